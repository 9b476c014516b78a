"""run_fn whose serving_default parses a feature the data does not have."""

import tensorflow as tf


def run_fn(fn_args):
  module = tf.Module()
  spec = {'no_such_feature': tf.io.FixedLenFeature([1], tf.float32)}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve(examples):
    return {'outputs': tf.io.parse_example(examples, spec)['no_such_feature']}

  tf.saved_model.save(module, fn_args.serving_model_dir,
                      signatures={'serving_default': serve})
