"""The penguin TrainSpec, asking for the JAX backend itself: trained on JAX
with no --backend or component setting."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), 'module_files'))
from penguin_spec import PenguinSpec  # pylint: disable=g-import-not-at-top,wrong-import-position


class JaxPenguinSpec(PenguinSpec):
  backend = 'jax'
