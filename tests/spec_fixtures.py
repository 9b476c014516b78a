"""The TrainSpecs the tests train with the Estimator: the shipped penguin
spec (module_files/penguin_spec.py), configured to train in seconds."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'module_files'))

import keras  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import penguin_spec  # pylint: disable=g-import-not-at-top,wrong-import-position

FEATURES = penguin_spec.FEATURES


class PenguinSpec(penguin_spec.PenguinSpec):
  """Species from the four measurements; two short epochs, no checkpoints."""
  eval_batch_size = 64
  epochs = 2
  checkpoint = None


class WorseFromEpoch3(keras.callbacks.Callback):
  """From the 3rd epoch on, the model always says "class 2", surely: a
  loss near 100 on two thirds of the rows, worse than any epoch before."""

  def on_epoch_begin(self, epoch, logs=None):
    if epoch >= 2:
      last = self.model.layers[-1]
      last.kernel.assign(np.zeros(last.kernel.shape, 'float32'))
      last.bias.assign(np.array([-50.0, -50.0, 50.0], 'float32'))


class BestOnlySpec(PenguinSpec):
  """Four epochs, the last two worse (`WorseFromEpoch3`); a best-only
  checkpoint on val_loss; a learning rate that leaves the best epoch as
  it is."""
  epochs = 4
  checkpoint = {'best_only': True, 'monitor': 'val_loss', 'mode': 'min'}

  def build_optimizer(self):
    return keras.optimizers.SGD(learning_rate=1e-4)

  def handlers(self):
    return [WorseFromEpoch3()]
