"""run_fn that exports a SavedModel without any signature."""

import tensorflow as tf


def run_fn(fn_args):
  module = tf.Module()
  module.v = tf.Variable(1.0)
  tf.saved_model.save(module, fn_args.serving_model_dir)
