"""LogLines: plain progress lines, for logs that are not a terminal."""

import time

import keras

from generic_trainer.system import progress


class LogLines(keras.callbacks.Callback):
  """Logs one line every `every_steps` batches and one per epoch.

  On a terminal the fit loop uses Keras's progress bar instead; in a
  pipeline's log file a progress bar is noise, a line is readable. The
  lines go to the progress log (`generic_trainer.system.progress`).
  """

  def __init__(self, every_steps: int = 100):
    super().__init__()
    self.every_steps = every_steps
    self._started = 0.0
    self._epoch = 0
    self._last_batch = -1

  def on_train_begin(self, logs=None):
    self._started = time.monotonic()

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch
    self._last_batch = -1

  def on_train_batch_end(self, batch, logs=None):
    # With steps_per_execution > 1 the hook skips batches: log on crossing.
    last, self._last_batch = self._last_batch, batch
    if self.every_steps and ((batch + 1) // self.every_steps >
                             (last + 1) // self.every_steps):
      progress.log().info('epoch %d batch %d: %s', self._epoch + 1,
                          batch + 1, _format(logs))

  def on_epoch_end(self, epoch, logs=None):
    progress.log().info('epoch %d done after %.1fs: %s', epoch + 1,
                        time.monotonic() - self._started, _format(logs))


def _format(logs) -> str:
  return ', '.join(f'{k}={float(v):.4g}' for k, v in sorted((logs or {}).items()))
