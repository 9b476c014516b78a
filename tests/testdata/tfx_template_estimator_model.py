"""TFX's taxi template (models/estimator_model/model.py) of the Estimator era,
abridged: a run_fn that calls tf_estimator.train_and_evaluate on a canned
Estimator whose columns come from another module (`features`). Read, never
imported, by tests/test_migration.py."""
import tensorflow as tf
from tensorflow import estimator as tf_estimator
import tensorflow_model_analysis as tfma
import tensorflow_transform as tft
from tfx_bsl.tfxio import dataset_options

from models import features
from models.estimator_model import constants


def _gzip_reader_fn(filenames):
  return tf.data.TFRecordDataset(filenames, compression_type='GZIP')


def _build_estimator(config, hidden_units=None, warm_start_from=None):
  real_valued_columns = [
      tf.feature_column.numeric_column(key, shape=())
      for key in features.transformed_names(features.DENSE_FLOAT_FEATURE_KEYS)
  ]
  categorical_columns = []
  for key in features.transformed_names(features.VOCAB_FEATURE_KEYS):
    categorical_columns.append(
        tf.feature_column.categorical_column_with_identity(
            key,
            num_buckets=features.VOCAB_SIZE + features.OOV_SIZE,
            default_value=0))
  for key, num_buckets in zip(
      features.transformed_names(features.BUCKET_FEATURE_KEYS),
      features.BUCKET_FEATURE_BUCKET_COUNT):
    categorical_columns.append(
        tf.feature_column.categorical_column_with_identity(
            key, num_buckets=num_buckets, default_value=0))
  indicator_column = [
      tf.feature_column.indicator_column(categorical_column)
      for categorical_column in categorical_columns
  ]
  return tf_estimator.DNNLinearCombinedClassifier(
      config=config,
      linear_feature_columns=categorical_columns,
      dnn_feature_columns=real_valued_columns,
      dnn_hidden_units=hidden_units or [100, 70, 50, 25],
      warm_start_from=warm_start_from)


def _create_train_and_eval_spec(trainer_fn_args, schema):
  tf_transform_output = tft.TFTransformOutput(trainer_fn_args.transform_output)
  train_input_fn = lambda: _input_fn(  # pylint: disable=g-long-lambda
      trainer_fn_args.train_files, trainer_fn_args.data_accessor,
      tf_transform_output, batch_size=constants.TRAIN_BATCH_SIZE)
  train_spec = tf_estimator.TrainSpec(
      train_input_fn, max_steps=trainer_fn_args.train_steps)
  run_config = tf_estimator.RunConfig(
      save_checkpoints_steps=999, keep_checkpoint_max=1)
  run_config = run_config.replace(model_dir=trainer_fn_args.serving_model_dir)
  first_dnn_layer_size = 100
  num_dnn_layers = 4
  dnn_decay_factor = 0.7
  estimator = _build_estimator(
      hidden_units=[
          max(2, int(first_dnn_layer_size * dnn_decay_factor**i))
          for i in range(num_dnn_layers)
      ],
      config=run_config,
      warm_start_from=trainer_fn_args.base_model)
  return {
      'estimator': estimator,
      'train_spec': train_spec,
  }


def run_fn(fn_args):
  schema = None
  train_and_eval_spec = _create_train_and_eval_spec(fn_args, schema)
  tf_estimator.train_and_evaluate(train_and_eval_spec['estimator'],
                                  train_and_eval_spec['train_spec'],
                                  train_and_eval_spec['eval_spec'])
