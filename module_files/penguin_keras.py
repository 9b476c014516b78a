"""Penguin species classifier: a `run_fn` module file written for Keras 3.

Works unchanged with `tfx.components.Trainer` and with GenericTrainer. The
data is the Palmer penguins table: four numeric features and the species
(0, 1, 2) as label. The exported `serving_default` signature takes
serialized tf.Example, which is what Evaluator (TFMA) and TF Serving send.
It trains on one or several workers: the model is built under
`fn_args.strategy`, and every worker exports to its own
`fn_args.serving_model_dir` (only the chief's is published).
"""

from typing import Dict, List

import keras
import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.utils import io_utils
from tfx_bsl.public.tfxio import TensorFlowDatasetOptions

FEATURE_KEYS = ['bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
                'body_mass_g']
LABEL_KEY = 'species'
_TRAIN_BATCH_SIZE = 20
_EVAL_BATCH_SIZE = 10


def _as_float(features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
  return {k: tf.cast(features[k], tf.float32) for k in FEATURE_KEYS}


def _input_fn(files: List[str], data_accessor, schema: schema_pb2.Schema,
              batch_size: int) -> tf.data.Dataset:
  dataset = data_accessor.tf_dataset_factory(
      files, TensorFlowDatasetOptions(batch_size=batch_size,
                                      label_key=LABEL_KEY), schema)
  # Several workers share the batches: each split here is one file, too few
  # to give every worker files of its own (the default sharding).
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  return dataset.with_options(options).map(
      lambda f, label: (_as_float(f), label)).repeat()


def _build_model(train_dataset: tf.data.Dataset) -> keras.Model:
  inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURE_KEYS}
  x = keras.layers.Concatenate()([inputs[k] for k in FEATURE_KEYS])
  normalize = keras.layers.Normalization()
  normalize.adapt(train_dataset.take(10).map(
      lambda f, _: tf.concat([f[k] for k in FEATURE_KEYS], axis=-1)))
  x = normalize(x)
  for _ in range(2):
    x = keras.layers.Dense(8, activation='relu')(x)
  outputs = keras.layers.Dense(3, activation='softmax')(x)
  model = keras.Model(inputs=inputs, outputs=outputs)
  model.compile(optimizer=keras.optimizers.Adam(1e-2),
                loss=keras.losses.SparseCategoricalCrossentropy(),
                metrics=[keras.metrics.SparseCategoricalAccuracy()])
  return model


def _export(model: keras.Model, schema: schema_pb2.Schema,
            export_dir: str) -> None:
  from tensorflow_transform.tf_metadata import schema_utils  # pylint: disable=g-import-not-at-top
  spec = schema_utils.schema_as_feature_spec(schema).feature_spec
  spec.pop(LABEL_KEY, None)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, 'examples')])
  def serve_tf_examples(serialized):
    features = tf.io.parse_example(serialized, spec)
    return {'outputs': model(_as_float(features))}

  archive = keras.export.ExportArchive()
  archive.track(model)
  archive.add_endpoint('serving_default', serve_tf_examples)
  archive.write_out(export_dir, verbose=False)


def run_fn(fn_args) -> None:
  """Trains the classifier and exports it to `fn_args.serving_model_dir`."""
  schema = io_utils.parse_pbtxt_file(fn_args.schema_path, schema_pb2.Schema())
  train = _input_fn(fn_args.train_files, fn_args.data_accessor, schema,
                    _TRAIN_BATCH_SIZE)
  evaluation = _input_fn(fn_args.eval_files, fn_args.data_accessor, schema,
                         _EVAL_BATCH_SIZE)
  # GenericTrainer's fn_args.strategy is MultiWorkerMirroredStrategy when
  # several workers train; tfx.components.Trainer has no such field.
  strategy = getattr(fn_args, 'strategy', None) or tf.distribute.get_strategy()
  with strategy.scope():
    model = _build_model(train)
  model.fit(train, steps_per_epoch=fn_args.train_steps or 100,
            validation_data=evaluation,
            validation_steps=fn_args.eval_steps or 5,
            callbacks=[keras.callbacks.TensorBoard(fn_args.model_run_dir)])
  _export(model, schema, fn_args.serving_model_dir)
