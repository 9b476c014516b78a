"""FirstStepTime: says when the first training step ended."""

import sys
import time
from typing import Callable, Optional, TextIO

import keras

MESSAGE = 'first training step after {seconds:.2f} s'


class FirstStepTime(keras.callbacks.Callback):
  """Prints `first training step after X.XX s` when the first batch ends.

  The seconds are counted from `started`, a `clock()` reading; the local
  command passes its process's start, so the line tells how long start-up
  (imports, data, model building, tracing) took. `seconds` holds the value
  (None until the first batch ends).
  """

  def __init__(self, started: float,
               clock: Callable[[], float] = time.monotonic,
               stream: Optional[TextIO] = None):
    super().__init__()
    self.started = started
    self.clock = clock
    self.stream = stream
    self.seconds = None

  def on_train_begin(self, logs=None):
    self.seconds = None

  def on_train_batch_end(self, batch, logs=None):
    if self.seconds is None:
      self.seconds = self.clock() - self.started
      print(MESSAGE.format(seconds=self.seconds),
            file=self.stream or sys.stdout, flush=True)
