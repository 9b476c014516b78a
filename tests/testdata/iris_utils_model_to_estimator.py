# Copyright 2019 Google LLC. All Rights Reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
"""Python source file include Iris pipeline functions and necessary utils.

The utilities in this file are used to build a model with tf.keras and
convert it to an estimator with model_to_estimator.

(TFX's Estimator-era iris example, tfx/examples/iris/iris_utils.py, as it
was before TFX removed tf.estimator; a test input for the migration
message. It is never imported.)
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import tensorflow as tf
import tensorflow_model_analysis as tfma
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils

_FEATURE_KEYS = ['sepal_length', 'sepal_width', 'petal_length', 'petal_width']
_LABEL_KEY = 'variety'

# The Iris dataset has 150 records, and is split into train and eval
# datasets in a 2:1 split.
_TRAIN_DATA_SIZE = 100
_EVAL_DATA_SIZE = 50
_TRAIN_BATCH_SIZE = 20
_EVAL_BATCH_SIZE = 10


def _gzip_reader_fn(filenames):
  """Small utility returning a record reader that can read gzip'ed files."""
  return tf.data.TFRecordDataset(filenames, compression_type='GZIP')


def _serving_input_receiver_fn(schema):
  """Build the serving inputs."""
  raw_feature_spec = _get_raw_feature_spec(schema)
  # Remove label since serving does not include label.
  raw_feature_spec.pop(_LABEL_KEY)
  raw_input_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(
      raw_feature_spec, default_batch_size=None)
  serving_input_receiver = raw_input_fn()
  return tf.estimator.export.ServingInputReceiver(
      serving_input_receiver.features, serving_input_receiver.receiver_tensors)


def _get_raw_feature_spec(schema):
  return schema_utils.schema_as_feature_spec(schema).feature_spec


def _input_fn(filenames, schema, batch_size=200):
  """Generates features and labels for training or evaluation."""
  feature_spec = _get_raw_feature_spec(schema)
  dataset = tf.data.experimental.make_batched_features_dataset(
      filenames, batch_size, feature_spec, reader=_gzip_reader_fn)
  dataset = dataset.map(lambda f: (f, f.pop(_LABEL_KEY)))
  return dataset


def _keras_model_builder():
  """Creates a DNN Keras model for classifying iris data.

  Returns:
    A keras Model.
  """
  # Keras needs the feature definitions at compile time.
  inputs = [tf.keras.layers.Input(shape=(1,), name=f) for f in _FEATURE_KEYS]
  input_layer = tf.keras.layers.concatenate(inputs)
  d1 = tf.keras.layers.Dense(8, activation='relu')(input_layer)
  output = tf.keras.layers.Dense(3, activation='softmax')(d1)
  model = tf.keras.Model(inputs=inputs, outputs=output)
  model.compile(
      optimizer=tf.keras.optimizers.Adam(lr=0.001),
      loss='sparse_categorical_crossentropy',
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy()])
  tf.compat.v1.logging.info(model.summary())
  return model


# TFX will call this function
def trainer_fn(trainer_fn_args, schema):
  """Build the estimator using the high level API."""
  train_batch_size = _TRAIN_BATCH_SIZE
  eval_batch_size = _EVAL_BATCH_SIZE

  train_input_fn = lambda: _input_fn(  # pylint: disable=g-long-lambda
      trainer_fn_args.train_files, schema, batch_size=train_batch_size)
  eval_input_fn = lambda: _input_fn(  # pylint: disable=g-long-lambda
      trainer_fn_args.eval_files, schema, batch_size=eval_batch_size)

  train_spec = tf.estimator.TrainSpec(
      train_input_fn, max_steps=trainer_fn_args.train_steps)
  serving_receiver_fn = lambda: _serving_input_receiver_fn(schema)
  exporter = tf.estimator.FinalExporter('iris', serving_receiver_fn)
  eval_spec = tf.estimator.EvalSpec(
      eval_input_fn, steps=trainer_fn_args.eval_steps, exporters=[exporter],
      name='iris-eval')
  run_config = tf.estimator.RunConfig(
      save_checkpoints_steps=999, keep_checkpoint_max=1)
  run_config = run_config.replace(model_dir=trainer_fn_args.serving_model_dir)
  estimator = tf.keras.estimator.model_to_estimator(
      keras_model=_keras_model_builder(), config=run_config)
  return {
      'estimator': estimator,
      'train_spec': train_spec,
      'eval_spec': eval_spec,
      'eval_input_receiver_fn': None,
  }
