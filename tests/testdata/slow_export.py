"""run_fn that exports a valid model, then lingers as a slow export does.

custom_config {"linger_s": N} keeps it in the export for N seconds after
writing `model_run/exporting`, so a test can kill it there.
"""

import os
import time

import tensorflow as tf


def run_fn(fn_args):
  module = tf.Module()

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve(examples):
    return {'outputs': tf.ones([tf.shape(examples)[0], 1])}

  tf.saved_model.save(module, fn_args.serving_model_dir,
                      signatures={'serving_default': serve})
  linger = (fn_args.custom_config or {}).get('linger_s', 0)
  if linger:
    os.makedirs(fn_args.model_run_dir, exist_ok=True)
    open(os.path.join(fn_args.model_run_dir, 'exporting'), 'w').close()
    time.sleep(linger)
