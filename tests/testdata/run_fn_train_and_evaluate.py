"""A `run_fn` of the Estimator era: TFX's GenericExecutor called it, and it
ran `tf_estimator.train_and_evaluate` on the Estimator that `trainer_fn`
builds (as TFX's taxi example did when run_fn replaced trainer_fn). Never
imported by the tests: importing it raises ImportError on TF 2.16."""

import tensorflow as tf
from tensorflow import estimator as tf_estimator
import tensorflow_transform as tft

_LABEL_KEY = 'tips'
_DENSE_FLOAT_FEATURE_KEYS = ['trip_miles', 'fare', 'trip_seconds']
_VOCAB_FEATURE_KEYS = ['payment_type', 'company']


def _transformed_name(key):
  return key + '_xf'


def preprocessing_fn(inputs):
  outputs = {}
  for key in _DENSE_FLOAT_FEATURE_KEYS:
    outputs[_transformed_name(key)] = tft.scale_to_z_score(inputs[key])
  for key in _VOCAB_FEATURE_KEYS:
    outputs[_transformed_name(key)] = tft.compute_and_apply_vocabulary(
        inputs[key], top_k=100, num_oov_buckets=1)
  outputs[_transformed_name(_LABEL_KEY)] = tf.cast(
      inputs[_LABEL_KEY] > 0.2 * inputs['fare'], tf.int64)
  return outputs


def _estimator(config):
  return tf_estimator.DNNClassifier(
      config=config,
      feature_columns=[
          tf.feature_column.numeric_column(_transformed_name(k))
          for k in _DENSE_FLOAT_FEATURE_KEYS
      ] + [
          tf.feature_column.embedding_column(
              tf.feature_column.categorical_column_with_identity(
                  _transformed_name(k), num_buckets=101), dimension=8)
          for k in _VOCAB_FEATURE_KEYS
      ],
      hidden_units=[64, 32],
      optimizer=tf.keras.optimizers.Adagrad(learning_rate=0.1),
      dropout=0.1)


def run_fn(fn_args):
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  batch_size = 128
  train_input_fn = lambda: fn_args.data_accessor.tf_dataset_factory(
      fn_args.train_files, batch_size, tf_transform_output.transformed_metadata
      .schema)
  estimator = _estimator(tf_estimator.RunConfig(
      model_dir=fn_args.model_run_dir))
  tf_estimator.train_and_evaluate(
      estimator, tf_estimator.TrainSpec(train_input_fn, fn_args.train_steps),
      tf_estimator.EvalSpec(train_input_fn, fn_args.eval_steps))
