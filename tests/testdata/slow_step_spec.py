"""The slow penguin spec with a checkpoint every 2 steps, recording every
step it trains as a line `PID STEP` in model_run/steps.log."""

import os
import sys

import keras

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slow_spec  # pylint: disable=g-import-not-at-top,wrong-import-position

STEPS_LOG = 'steps.log'


class _Steps(keras.callbacks.Callback):

  def __init__(self, path):
    super().__init__()
    self.path = path

  def on_train_batch_end(self, batch, logs=None):
    with open(self.path, 'a') as f:
      f.write(f'{os.getpid()} {int(self.model.optimizer.iterations.numpy())}\n')


class SlowStepPenguinSpec(slow_spec.SlowPenguinSpec):
  checkpoint = {'every_steps': 2}

  def handlers(self):
    os.makedirs(self.fn_args.model_run_dir, exist_ok=True)
    return super().handlers() + [
        _Steps(os.path.join(self.fn_args.model_run_dir, STEPS_LOG))]
