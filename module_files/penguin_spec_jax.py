"""The penguin TrainSpec on Keras's JAX backend: the same spec, and one line.

GenericTrainer trains it in a child process with KERAS_BACKEND=jax (input
pipeline: tf.data) and exports a TensorFlow SavedModel through jax2tf,
whose `serving_default` takes serialized tf.Example like the TensorFlow
one; Evaluator and Pusher take it as they are. See docs/guides/jax.md.
"""

import os
import sys

# The folder of this file holds penguin_spec.py, here and in the wheel TFX
# packages the module files into.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import penguin_spec  # pylint: disable=g-import-not-at-top,wrong-import-position


class PenguinSpecOnJax(penguin_spec.PenguinSpec):
  backend = 'jax'
