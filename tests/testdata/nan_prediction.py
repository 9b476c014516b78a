"""run_fn whose exported serving_default returns NaN."""

import tensorflow as tf


def run_fn(fn_args):
  module = tf.Module()

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve(examples):
    return {'outputs': tf.fill([tf.shape(examples)[0], 3], float('nan'))}

  tf.saved_model.save(module, fn_args.serving_model_dir,
                      signatures={'serving_default': serve})
