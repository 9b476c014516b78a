"""Heartbeat: the training's progress, in a file its parent watches.

A process that trains for a parent (a child under the other Keras or
backend, a local worker) gets `keys.HEARTBEAT_FILE_ENV`; this handler writes
the count of steps it trained into that file, and the batches of an
evaluation pass, at most once a second. The parent ends a training whose
file stops changing (`launch.stall_watch`): a hung group, a handler that
waits forever. Without the variable (a training in its own process) it does
nothing.
"""

import os
import time
from typing import Optional

import keras

from generic_trainer.system import atomic_files
from generic_trainer.keys import HEARTBEAT_FILE_ENV

EVERY_S = 1.0


class Heartbeat(keras.callbacks.Callback):
  """Writes `STEPS` (or `STEPS eval BATCHES`) into the heartbeat file.

  Args:
    path: The file; None: the one `keys.HEARTBEAT_FILE_ENV` names, if any.
  """

  def __init__(self, path: Optional[str] = None):
    super().__init__()
    self.path = path or os.environ.get(HEARTBEAT_FILE_ENV) or None
    self._steps = 0
    self._written = 0.0

  def on_train_begin(self, logs=None):
    self._steps = 0
    self._beat('0', force=True)

  def on_train_batch_end(self, batch, logs=None):
    self._steps += 1
    self._beat(str(self._steps))

  def on_test_batch_end(self, batch, logs=None):
    self._beat(f'{self._steps} eval {batch + 1}')

  def on_train_end(self, logs=None):
    self._beat(str(self._steps), force=True)

  def _beat(self, text: str, force: bool = False) -> None:
    if self.path is None:
      return
    now = time.monotonic()
    if force or now - self._written >= EVERY_S:
      self._written = now
      try:
        atomic_files.write_text(self.path, text)
      except OSError:  # The parent's scratch folder is gone: it ended.
        pass
