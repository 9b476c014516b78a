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

  def on_train_begin(self, logs=None):
    self.failure = None

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch

  def on_train_batch_end(self, batch, logs=None):
    loss = (logs or {}).get('loss')
    if loss is not None and not math.isfinite(float(loss)):
      step = int(self.model.optimizer.iterations.numpy())
      self.failure = (f'The training loss became {float(loss)} at step {step} '
                      f'(epoch {self._epoch + 1}, batch {batch + 1}).')
      self.model.stop_training = True
