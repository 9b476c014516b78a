"""TFX's Estimator-era taxi module (tests/testdata/taxi_utils_estimator.py),
migrated by following GenericTrainer's refusal message alone: its
constants, helpers and `preprocessing_fn` kept, everything from
`_build_estimator` down replaced by the lines the message gave (pasted
below the marker, unchanged; tests/test_migration.py checks they are still
the message's)."""

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform.tf_metadata import schema_utils

# Categorical features are assumed to each have a maximum value in the dataset.
_MAX_CATEGORICAL_FEATURE_VALUES = [24, 31, 12]

_CATEGORICAL_FEATURE_KEYS = [
    'trip_start_hour', 'trip_start_day', 'trip_start_month'
]

_DENSE_FLOAT_FEATURE_KEYS = ['trip_miles', 'fare', 'trip_seconds']

# Number of buckets used by tf.transform for encoding each feature.
_FEATURE_BUCKET_COUNT = 10

_BUCKET_FEATURE_KEYS = [
    'pickup_latitude', 'pickup_longitude', 'dropoff_latitude',
    'dropoff_longitude'
]

# Number of vocabulary terms used for encoding VOCAB_FEATURES by tf.transform
_VOCAB_SIZE = 1000

# Count of out-of-vocab buckets in which unrecognized VOCAB_FEATURES are hashed.
_OOV_SIZE = 10

_VOCAB_FEATURE_KEYS = [
    'payment_type',
    'company',
]

# Keys
_LABEL_KEY = 'tips'
_FARE_KEY = 'fare'


def _transformed_name(key):
  return key + '_xf'


def _transformed_names(keys):
  return [_transformed_name(key) for key in keys]


def _get_raw_feature_spec(schema):
  return schema_utils.schema_as_feature_spec(schema).feature_spec


def _gzip_reader_fn(filenames):
  """Small utility returning a record reader that can read gzip'ed files."""
  return tf.data.TFRecordDataset(
      filenames,
      compression_type='GZIP')


def _fill_in_missing(x):
  """Replace missing values in a SparseTensor.

  Fills in missing values of `x` with '' or 0, and converts to a dense tensor.

  Args:
    x: A `SparseTensor` of rank 2.  Its dense shape should have size at most 1
      in the second dimension.

  Returns:
    A rank 1 tensor where missing values of `x` have been filled in.
  """
  if not isinstance(x, tf.sparse.SparseTensor):
    return x

  default_value = '' if x.dtype == tf.string else 0
  return tf.squeeze(
      tf.sparse.to_dense(
          tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]),
          default_value),
      axis=1)


def preprocessing_fn(inputs):
  """tf.transform's callback function for preprocessing inputs.

  Args:
    inputs: map from feature keys to raw not-yet-transformed features.

  Returns:
    Map from string feature key to transformed feature operations.
  """
  outputs = {}
  for key in _DENSE_FLOAT_FEATURE_KEYS:
    # If sparse make it dense, setting nan's to 0 or '', and apply zscore.
    outputs[_transformed_name(key)] = tft.scale_to_z_score(
        _fill_in_missing(inputs[key]))

  for key in _VOCAB_FEATURE_KEYS:
    # Build a vocabulary for this feature.
    outputs[_transformed_name(key)] = tft.compute_and_apply_vocabulary(
        _fill_in_missing(inputs[key]),
        top_k=_VOCAB_SIZE,
        num_oov_buckets=_OOV_SIZE)

  for key in _BUCKET_FEATURE_KEYS:
    outputs[_transformed_name(key)] = tft.bucketize(
        _fill_in_missing(inputs[key]),
        _FEATURE_BUCKET_COUNT)

  for key in _CATEGORICAL_FEATURE_KEYS:
    outputs[_transformed_name(key)] = _fill_in_missing(inputs[key])

  # Was this passenger a big tipper?
  taxi_fare = _fill_in_missing(inputs[_FARE_KEY])
  tips = _fill_in_missing(inputs[_LABEL_KEY])
  outputs[_transformed_name(_LABEL_KEY)] = tf.where(
      tf.math.is_nan(taxi_fare),
      tf.cast(tf.zeros_like(taxi_fare), tf.int64),
      # Test if the tip was > 20% of the fare.
      tf.cast(
          tf.greater(tips, tf.multiply(taxi_fare, tf.constant(0.2))), tf.int64))

  return outputs


# The lines of the message.
from generic_trainer.canned import Categorical, DNNLinearCombinedClassifierSpec, Numeric

class Spec(DNNLinearCombinedClassifierSpec):
  label_key = 'tips_xf'  # label_key= at line 293
  raw_label_key = 'tips'  # the raw label: no serving request carries it
  n_classes = 2  # the Estimator's n_classes (2 by default)
  # linear_feature_columns
  linear_feature_keys = [
      'payment_type_xf',
      'company_xf',
      'pickup_latitude_xf',
      'pickup_longitude_xf',
      'dropoff_latitude_xf',
      'dropoff_longitude_xf',
      'trip_start_hour_xf',
      'trip_start_day_xf',
      'trip_start_month_xf',
  ]
  # dnn_feature_columns
  dnn_feature_keys = ['trip_miles_xf', 'fare_xf', 'trip_seconds_xf']
  columns = {
      'payment_type_xf': Categorical(num_buckets=1010),  # categorical_column_with_identity
      'company_xf': Categorical(num_buckets=1010),  # categorical_column_with_identity
      'pickup_latitude_xf': Categorical(num_buckets=10),  # categorical_column_with_identity
      'pickup_longitude_xf': Categorical(num_buckets=10),  # categorical_column_with_identity
      'dropoff_latitude_xf': Categorical(num_buckets=10),  # categorical_column_with_identity
      'dropoff_longitude_xf': Categorical(num_buckets=10),  # categorical_column_with_identity
      'trip_start_hour_xf': Categorical(num_buckets=24),  # categorical_column_with_identity
      'trip_start_day_xf': Categorical(num_buckets=31),  # categorical_column_with_identity
      'trip_start_month_xf': Categorical(num_buckets=12),  # categorical_column_with_identity
      'trip_miles_xf': Numeric(normalize=False),  # numeric_column: as it is
      'fare_xf': Numeric(normalize=False),  # numeric_column: as it is
      'trip_seconds_xf': Numeric(normalize=False),  # numeric_column: as it is
  }
  dnn_hidden_units = [100, 70, 48, 34]  # the Estimator's hidden units
  batch_size = 40  # train_batch_size, line 318
  # The Estimator used its default optimizers: Ftrl for the linear part and Adagrad (learning rate 0.05) for the DNN.
  # The spec trains with optimizer_name = 'adam' and
  # learning_rate = 0.01 unless you set them here.
