"""A run_fn as TFX's tutorials write it (penguin_simple): datasets from
`data_accessor.tf_dataset_factory` that repeat, and
`model.fit(..., steps_per_epoch=fn_args.train_steps,
validation_steps=fn_args.eval_steps)`. With `eval_steps` None its
validation would never end.

It records what it got and did in `model_run_dir/evaluation.json`
(`train_steps`, `eval_steps`, the eval batches of the pass) and writes `evaluating` there
at the first eval batch. `hyperparameters` (or `custom_config`) choose a
variant: `{"eval":
"endless"}` passes validation_steps=None whatever it got; `{"eval":
"block"}` waits forever in `on_test_batch_end` (a callback that blocks).
"""

import json
import os
import threading

import keras
import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.utils import io_utils
from tfx_bsl.public import tfxio

FEATURE_KEYS = ['bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
                'body_mass_g']
LABEL_KEY = 'species'
_TRAIN_BATCH_SIZE = 20
_EVAL_BATCH_SIZE = 10
EVALUATING = 'evaluating'


def _input_fn(file_pattern, data_accessor, schema, batch_size):
  return data_accessor.tf_dataset_factory(
      file_pattern,
      tfxio.TensorFlowDatasetOptions(batch_size=batch_size,
                                     label_key=LABEL_KEY),
      schema=schema).map(lambda f, y: (
          {k: tf.cast(f[k], tf.float32) for k in FEATURE_KEYS}, y)).repeat()


def _make_keras_model():
  inputs = [keras.layers.Input(shape=(1,), name=f) for f in FEATURE_KEYS]
  d = keras.layers.concatenate(inputs)
  d = keras.layers.Dense(8, activation='relu')(d)
  outputs = keras.layers.Dense(3)(d)
  model = keras.Model(inputs=inputs, outputs=outputs)
  model.compile(optimizer=keras.optimizers.Adam(1e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True),
                metrics=[keras.metrics.SparseCategoricalAccuracy()])
  return model


class _Evaluation(keras.callbacks.Callback):
  """Counts the eval batches; says when evaluation starts; may block."""

  def __init__(self, run_dir, block):
    super().__init__()
    self.run_dir = run_dir
    self.block = block
    self.batches = 0

  def on_test_batch_end(self, batch, logs=None):
    self.batches += 1
    if self.batches == 1:
      with open(os.path.join(self.run_dir, EVALUATING), 'w') as f:
        f.write(str(os.getpid()))
    if self.block:
      threading.Event().wait()


def run_fn(fn_args):
  schema = io_utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
  train_dataset = _input_fn(fn_args.train_files, fn_args.data_accessor,
                            schema, _TRAIN_BATCH_SIZE)
  eval_dataset = _input_fn(fn_args.eval_files, fn_args.data_accessor,
                           schema, _EVAL_BATCH_SIZE)
  variant = (fn_args.hyperparameters or fn_args.custom_config or {}).get(
      'eval')
  os.makedirs(fn_args.model_run_dir, exist_ok=True)
  evaluation = _Evaluation(fn_args.model_run_dir, variant == 'block')
  model = _make_keras_model()
  model.fit(train_dataset, steps_per_epoch=fn_args.train_steps,
            validation_data=eval_dataset,
            validation_steps=(None if variant == 'endless'
                              else fn_args.eval_steps),
            callbacks=[evaluation], verbose=0)
  with open(os.path.join(fn_args.model_run_dir, 'evaluation.json'), 'w') as f:
    json.dump({'train_steps': fn_args.train_steps,
               'eval_steps': fn_args.eval_steps,
               'eval_batches': evaluation.batches}, f)
  from tensorflow_transform.tf_metadata import schema_utils  # pylint: disable=g-import-not-at-top
  spec = schema_utils.schema_as_feature_spec(schema).feature_spec
  spec.pop(LABEL_KEY, None)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, 'examples')])
  def serve(serialized):
    features = tf.io.parse_example(serialized, spec)
    return {'outputs': model([tf.cast(features[k], tf.float32)
                              for k in FEATURE_KEYS])}

  archive = keras.export.ExportArchive()
  archive.track(model)
  archive.add_endpoint('serving_default', serve)
  archive.write_out(fn_args.serving_model_dir, verbose=False)
