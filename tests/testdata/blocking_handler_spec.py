"""The slow penguin spec with a checkpoint every 2 steps and a handler that,
at step 6, writes `blocked` into model_run and then waits forever (user
code blocking: no step boundary comes after a SIGTERM)."""

import os
import sys
import threading

import keras

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slow_step_spec  # pylint: disable=g-import-not-at-top,wrong-import-position

BLOCKED = 'blocked'


class _Blocks(keras.callbacks.Callback):

  def __init__(self, path):
    super().__init__()
    self.path = path
    self.steps = 0

  def on_train_batch_end(self, batch, logs=None):
    self.steps += 1
    if self.steps == 6:
      with open(self.path, 'w') as f:
        f.write(str(os.getpid()))
      threading.Event().wait()


class BlockingPenguinSpec(slow_step_spec.SlowStepPenguinSpec):

  def handlers(self):
    return super().handlers() + [
        _Blocks(os.path.join(self.fn_args.model_run_dir, BLOCKED))]
