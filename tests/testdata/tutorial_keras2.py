"""TFX's penguin_simple tutorial run_fn (tf.keras 2), as its docs write it:
`from tensorflow import keras`, a feature spec of its own turned into a
schema, and `model.save(dir, save_format='tf')`, which Keras 3 refuses.
Its spec gives the penguin CSV's whole-number columns tf.int64, as the
data writes them (the tutorial's float32 for every column is told to do
so: `usercode.guard.parse_type_idiom`). Run with keras_version='tf_keras'
(the command's --keras-version tf_keras).
"""
from typing import List

import tensorflow as tf
from tensorflow import keras
from tensorflow_transform.tf_metadata import schema_utils
from tfx import v1 as tfx
from tfx_bsl.public import tfxio
from tensorflow_metadata.proto.v0 import schema_pb2

_FEATURE_KEYS = ['bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
                 'body_mass_g']
_LABEL_KEY = 'species'
_INT_KEYS = ['flipper_length_mm', 'body_mass_g']  # Whole numbers in the CSV.
_FEATURE_SPEC = {
    **{feature: tf.io.FixedLenFeature(
        shape=[1], dtype=tf.int64 if feature in _INT_KEYS else tf.float32)
       for feature in _FEATURE_KEYS},
    _LABEL_KEY: tf.io.FixedLenFeature(shape=[1], dtype=tf.int64)}


def _input_fn(file_pattern: List[str], data_accessor, schema,
              batch_size: int = 20) -> tf.data.Dataset:
  return data_accessor.tf_dataset_factory(
      file_pattern,
      tfxio.TensorFlowDatasetOptions(batch_size=batch_size,
                                     label_key=_LABEL_KEY),
      schema=schema).repeat()


def _build_keras_model() -> tf.keras.Model:
  inputs = [keras.layers.Input(shape=(1,), name=f) for f in _FEATURE_KEYS]
  d = keras.layers.concatenate(inputs)
  for _ in range(2):
    d = keras.layers.Dense(8, activation='relu')(d)
  outputs = keras.layers.Dense(3)(d)
  model = keras.Model(inputs=inputs, outputs=outputs)
  model.compile(
      optimizer=keras.optimizers.Adam(1e-2),
      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=[keras.metrics.SparseCategoricalAccuracy()])
  return model


def run_fn(fn_args: tfx.components.FnArgs):
  schema = schema_utils.schema_from_feature_spec(_FEATURE_SPEC)
  train_dataset = _input_fn(fn_args.train_files, fn_args.data_accessor, schema,
                            batch_size=20)
  eval_dataset = _input_fn(fn_args.eval_files, fn_args.data_accessor, schema,
                           batch_size=10)
  model = _build_keras_model()
  model.fit(train_dataset, steps_per_epoch=fn_args.train_steps,
            validation_data=eval_dataset,
            validation_steps=fn_args.eval_steps)
  model.save(fn_args.serving_model_dir, save_format='tf')
