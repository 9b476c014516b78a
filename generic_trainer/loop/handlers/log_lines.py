"""LogLines: plain progress lines, for logs that are not a terminal."""

import time

import keras

from generic_trainer.system import progress


class LogLines(keras.callbacks.Callback):
  """Logs one line every `every_steps` steps and one per epoch.

  On a terminal the fit loop uses Keras's progress bar instead; in a
  pipeline's log file a progress bar is noise, a line is readable. The
  lines go to the progress log (`generic_trainer.system.progress`):

      epoch 2 step 100/104: loss=0.31
      epoch 2 done in 8.1s (16.3s in all): loss=0.3, val_loss=0.29

  The step is the steps of the epoch done, never past the epoch's steps:
  with steps_per_execution > 1 Keras reports the last step an execution
  could reach (`batch` 127 of a 104-step epoch run 32 at a time). The
  time is the epoch's own, then the training's so far.
  """

  def __init__(self, every_steps: int = 100):
    super().__init__()
    self.every_steps = every_steps
    self._started = 0.0
    self._epoch_started = 0.0
    self._epoch = 0
    self._last_batch = -1

  def on_train_begin(self, logs=None):
    self._started = time.monotonic()

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch
    self._epoch_started = time.monotonic()
    self._last_batch = -1

  def on_train_batch_end(self, batch, logs=None):
    # With steps_per_execution > 1 the hook skips batches: log on crossing.
    last, self._last_batch = self._last_batch, batch
    if self.every_steps and ((batch + 1) // self.every_steps >
                             (last + 1) // self.every_steps):
      steps = (self.params or {}).get('steps')
      done = min(batch + 1, steps) if steps else batch + 1
      progress.log().info('epoch %d step %s: %s', self._epoch + 1,
                          f'{done}/{steps}' if steps else done,
                          _format(logs))

  def on_epoch_end(self, epoch, logs=None):
    now = time.monotonic()
    progress.log().info('epoch %d done in %.1fs (%.1fs in all): %s',
                        epoch + 1, now - self._epoch_started,
                        now - self._started, _format(logs))


def _format(logs) -> str:
  return ', '.join(f'{k}={float(v):.4g}' for k, v in sorted((logs or {}).items()))
