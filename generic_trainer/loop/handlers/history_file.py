"""HistoryFile: the per-epoch metrics as JSON, rewritten after every epoch."""

import keras

from generic_trainer.system import atomic_files


class HistoryFile(keras.callbacks.Callback):
  """Writes `[{"epoch": 1, "loss": ..., "val_loss": ...}, ...]` to `path`.

  Rewritten atomically at each epoch end, so it is complete up to the last
  finished epoch even if training is killed. Its state (the epochs so far)
  is saved with the resume checkpoints, so a resumed training's file holds
  every epoch, those of the attempts before included.
  """

  def __init__(self, path: str):
    super().__init__()
    self.path = path
    self.epochs = []

  def on_train_begin(self, logs=None):
    self.epochs = []

  def get_state(self):
    return {'epochs': self.epochs}

  def set_state(self, state):
    self.epochs = list(state['epochs'])

  def on_epoch_end(self, epoch, logs=None):
    self.epochs = [e for e in self.epochs if e['epoch'] <= epoch]
    self.epochs.append({'epoch': epoch + 1,
                        **{k: float(v) for k, v in (logs or {}).items()}})
    atomic_files.write_json(self.path, self.epochs, indent=1)
