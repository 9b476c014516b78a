"""The penguin spec, slowed to ~0.1 s a step so a test can kill it mid-run."""

import os
import sys
import time

import keras

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), 'module_files'))
import penguin_spec  # pylint: disable=g-import-not-at-top,wrong-import-position


class _Slow(keras.callbacks.Callback):

  def on_train_batch_end(self, batch, logs=None):
    time.sleep(0.1)


class SlowPenguinSpec(penguin_spec.PenguinSpec):
  epochs = 8
  checkpoint = None

  def handlers(self):
    return [_Slow()]
