"""NaNGuard: stops training at the first non-finite loss and says where."""

import math

import keras


class NaNGuard(keras.callbacks.Callback):
  """Stops training when the batch loss is NaN or Inf.

  Unlike `keras.callbacks.TerminateOnNaN`, it remembers where it happened:
  the fit loop reads `failure` after `fit` returns and raises
  `NonFiniteLossError`, so a diverged model is never exported.
  """

  def __init__(self):
    super().__init__()
    self.failure = None
    self._epoch = 0
    self._last_batch = -1  # With steps_per_execution > 1, hooks skip batches.

  def on_train_begin(self, logs=None):
    self.failure = None

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch
    self._last_batch = -1

  def on_train_batch_end(self, batch, logs=None):
    loss = (logs or {}).get('loss')
    if loss is not None and not math.isfinite(float(loss)):
      step = int(self.model.optimizer.iterations.numpy())
      first = step - (batch - self._last_batch) + 1
      if first >= step:
        where = f'at step {step} (epoch {self._epoch + 1}, batch {batch + 1})'
      else:
        where = (f'in steps {first}-{step} (epoch {self._epoch + 1}, batches '
                 f'{batch - step + first + 1}-{batch + 1}; set TrainSpec.'
                 'steps_per_execution = 1 to find the exact step)')
      self.failure = f'The training loss became {float(loss)} {where}.'
      self.model.stop_training = True
    self._last_batch = batch
