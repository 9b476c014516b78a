"""A `run_fn` written the way TFX's tutorials write one (penguin_utils):
TFXIO's `tf_dataset_factory` with default options, `.repeat()`, a compiled
Keras model, `model.fit(steps_per_epoch=train_steps)`, and a serving
signature on serialized tf.Example. The benchmark's baseline.

For the benchmark only, it records how long `model.fit` took in
`model_run_dir/fit_time.json`. The table (`custom_config['table']`,
default 'narrow') picks the model's inputs.
"""

import json
import os
import time

import keras
import tensorflow as tf
from tfx.utils import io_utils
from tfx_bsl.public import tfxio
from tensorflow_metadata.proto.v0 import schema_pb2

from benchmarks.model import BATCH_SIZE, build_model, compile_args
from benchmarks.synthetic_data import LABEL_KEY, feature_keys


def _input_fn(file_pattern, data_accessor, schema, batch_size):
  return data_accessor.tf_dataset_factory(
      file_pattern,
      tfxio.TensorFlowDatasetOptions(batch_size=batch_size,
                                     label_key=LABEL_KEY),
      schema=schema).repeat()


def run_fn(fn_args):
  schema = io_utils.parse_pbtxt_file(fn_args.schema_file, schema_pb2.Schema())
  train_dataset = _input_fn(fn_args.train_files, fn_args.data_accessor,
                            schema, BATCH_SIZE)
  eval_dataset = _input_fn(fn_args.eval_files, fn_args.data_accessor, schema,
                           BATCH_SIZE)
  table = (fn_args.custom_config or {}).get('table', 'narrow')
  model = build_model(table)
  model.compile(**compile_args())
  started = time.monotonic()
  model.fit(train_dataset, steps_per_epoch=fn_args.train_steps,
            validation_data=eval_dataset,
            validation_steps=fn_args.eval_steps, verbose=0)
  elapsed = time.monotonic() - started
  os.makedirs(fn_args.model_run_dir, exist_ok=True)
  with open(os.path.join(fn_args.model_run_dir, 'fit_time.json'), 'w') as f:
    json.dump({'fit_time_s': elapsed,
               'train_examples': fn_args.train_steps * BATCH_SIZE}, f)

  dtypes = {'float': tf.float32, 'int': tf.int64, 'string': tf.string}
  feature_spec = {k: tf.io.FixedLenFeature([1], dtypes[kind])
                  for kind, names in feature_keys(table).items()
                  for k in names}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, 'examples')])
  def serve_tf_examples_fn(serialized):
    return {'outputs': model(tf.io.parse_example(serialized, feature_spec))}

  archive = keras.export.ExportArchive()
  archive.track(model)
  archive.add_endpoint('serving_default', serve_tf_examples_fn)
  archive.write_out(fn_args.serving_model_dir, verbose=False)
