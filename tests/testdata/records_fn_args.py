"""run_fn that records the FnArgs it got, then exports a tiny valid model."""

import json
import os

import tensorflow as tf


def run_fn(fn_args):
  os.makedirs(fn_args.model_run_dir, exist_ok=True)
  fields = {k: getattr(fn_args, k) for k in (
      'train_files', 'eval_files', 'train_steps', 'eval_steps', 'schema_path',
      'schema_file', 'transform_graph_path', 'serving_model_dir',
      'eval_model_dir', 'model_run_dir', 'base_model', 'hyperparameters',
      'custom_config', 'num_examples')}
  fields['checkpoint_dir'] = fn_args.checkpoint_dir
  fields['checkpoint_contents'] = (
      sorted(os.listdir(fn_args.checkpoint_dir))
      if os.path.isdir(fn_args.checkpoint_dir) else None)
  fields['fn_args_class'] = type(fn_args).__mro__[1].__module__
  fields['has_data_accessor'] = fn_args.data_accessor is not None
  with open(os.path.join(fn_args.model_run_dir, 'fn_args.json'), 'w') as f:
    json.dump(fields, f)
  module = tf.Module()

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def serve(examples):
    return {'outputs': tf.ones([tf.shape(examples)[0], 1])}

  tf.saved_model.save(module, fn_args.serving_model_dir,
                      signatures={'serving_default': serve})
