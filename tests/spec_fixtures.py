"""The TrainSpecs the tests train with the Estimator: the shipped penguin
spec (module_files/penguin_spec.py), configured to train in seconds."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'module_files'))

import penguin_spec  # pylint: disable=g-import-not-at-top,wrong-import-position

FEATURES = penguin_spec.FEATURES


class PenguinSpec(penguin_spec.PenguinSpec):
  """Species from the four measurements; two short epochs, no checkpoints."""
  eval_batch_size = 64
  epochs = 2
  checkpoint = None
