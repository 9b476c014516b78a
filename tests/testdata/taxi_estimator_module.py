"""A tf.estimator module as TFX's taxi example was written before TF 2.16
removed tf.estimator (abridged): Transform's `preprocessing_fn` and a
`trainer_fn` that builds a DNNLinearCombinedClassifier on feature columns.
docs/guides/migrating-from-estimator.md shows what replaces it."""

import tensorflow as tf

_DENSE_FLOAT_FEATURE_KEYS = ['trip_miles', 'fare', 'trip_seconds']
_VOCAB_FEATURE_KEYS = ['payment_type', 'company']
_BUCKET_FEATURE_KEYS = ['pickup_latitude', 'pickup_longitude',
                        'dropoff_latitude', 'dropoff_longitude']
_CATEGORICAL_FEATURE_KEYS = ['trip_start_hour', 'trip_start_day',
                             'trip_start_month']
_MAX_CATEGORICAL_FEATURE_VALUES = [24, 31, 13]
_VOCAB_SIZE, _OOV_SIZE, _FEATURE_BUCKET_COUNT = 1000, 10, 10


def _xf(keys):
  return [key + '_xf' for key in keys]


def preprocessing_fn(inputs):
  """Transform's callback (z-scores, vocabularies, buckets; see
  module_files/taxi_wide_deep.py for the whole function)."""
  raise NotImplementedError('abridged')


def _build_estimator(config, hidden_units=None, warm_start_from=None):
  real_valued_columns = [
      tf.feature_column.numeric_column(key, shape=())
      for key in _xf(_DENSE_FLOAT_FEATURE_KEYS)]
  categorical_columns = [
      tf.feature_column.categorical_column_with_identity(
          key, num_buckets=_VOCAB_SIZE + _OOV_SIZE, default_value=0)
      for key in _xf(_VOCAB_FEATURE_KEYS)]
  categorical_columns += [
      tf.feature_column.categorical_column_with_identity(
          key, num_buckets=_FEATURE_BUCKET_COUNT, default_value=0)
      for key in _xf(_BUCKET_FEATURE_KEYS)]
  categorical_columns += [
      tf.feature_column.categorical_column_with_identity(
          key, num_buckets=num_buckets, default_value=0)
      for key, num_buckets in zip(_xf(_CATEGORICAL_FEATURE_KEYS),
                                  _MAX_CATEGORICAL_FEATURE_VALUES)]
  return tf.estimator.DNNLinearCombinedClassifier(
      config=config,
      linear_feature_columns=categorical_columns,
      dnn_feature_columns=real_valued_columns,
      dnn_hidden_units=hidden_units or [100, 70, 50, 25],
      warm_start_from=warm_start_from)


def trainer_fn(trainer_fn_args, schema):
  """TFX's Trainer called this; it returned the estimator and its specs."""
  estimator = _build_estimator(
      config=tf.estimator.RunConfig(save_checkpoints_steps=999),
      hidden_units=[100, 70, 50, 25],
      warm_start_from=trainer_fn_args.base_model)
  return {'estimator': estimator, 'train_spec': None, 'eval_spec': None,
          'eval_input_receiver_fn': None}
