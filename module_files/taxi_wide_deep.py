"""Chicago taxi "big tipper": TFX's taxi Transform, and the canned
wide-and-deep classifier where TFX's taxi module once built a
tf.estimator.DNNLinearCombinedClassifier.

`preprocessing_fn` is the one of TFX's taxi modules (`taxi_utils.py`,
`taxi_utils_native_keras.py`): z-scores, vocabularies, buckets, and the
label `tips_xf` (tips above 20% of the fare). The spec gives the wide part
the vocabulary, bucket and hour/day/month ids and the deep part the three
z-scored numbers, as the Estimator and TFX's native-Keras model did;
everything else (inputs, one-hot and embedding layers, head, loss, metrics,
export with the Transform graph) is the canned spec's.
"""

import tensorflow as tf
import tensorflow_transform as tft

from generic_trainer.canned import Categorical
from generic_trainer.canned import DNNLinearCombinedClassifierSpec

DENSE_FLOAT_FEATURE_KEYS = ['trip_miles', 'fare', 'trip_seconds']
VOCAB_FEATURE_KEYS = ['payment_type', 'company']
BUCKET_FEATURE_KEYS = ['pickup_latitude', 'pickup_longitude',
                       'dropoff_latitude', 'dropoff_longitude']
# The categorical ids TFX's models read, with their number of values.
CATEGORICAL_FEATURES = {'trip_start_hour': 24, 'trip_start_day': 31,
                        'trip_start_month': 13}
OTHER_CATEGORICAL_KEYS = ['pickup_census_tract', 'dropoff_census_tract',
                          'pickup_community_area', 'dropoff_community_area']
VOCAB_SIZE = 1000
OOV_SIZE = 10
FEATURE_BUCKET_COUNT = 10
LABEL_KEY = 'tips'
FARE_KEY = 'fare'


def _xf(key):
  return key + '_xf'


def _fill_in_missing(x):
  """A dense [batch] tensor from an optional (sparse) feature: '' or 0
  where it is missing."""
  if not isinstance(x, tf.sparse.SparseTensor):
    return x
  default_value = '' if x.dtype == tf.string else 0
  return tf.squeeze(tf.sparse.to_dense(
      tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]),
      default_value), axis=1)


def preprocessing_fn(inputs):
  """TFX's taxi preprocessing_fn (Transform calls it)."""
  outputs = {}
  for key in DENSE_FLOAT_FEATURE_KEYS:
    outputs[_xf(key)] = tft.scale_to_z_score(_fill_in_missing(inputs[key]))
  for key in VOCAB_FEATURE_KEYS:
    outputs[_xf(key)] = tft.compute_and_apply_vocabulary(
        _fill_in_missing(inputs[key]), top_k=VOCAB_SIZE,
        num_oov_buckets=OOV_SIZE)
  for key in BUCKET_FEATURE_KEYS:
    outputs[_xf(key)] = tft.bucketize(_fill_in_missing(inputs[key]),
                                      FEATURE_BUCKET_COUNT)
  for key in list(CATEGORICAL_FEATURES) + OTHER_CATEGORICAL_KEYS:
    outputs[_xf(key)] = _fill_in_missing(inputs[key])
  taxi_fare = _fill_in_missing(inputs[FARE_KEY])
  tips = _fill_in_missing(inputs[LABEL_KEY])
  outputs[_xf(LABEL_KEY)] = tf.where(
      tf.math.is_nan(taxi_fare), tf.cast(tf.zeros_like(taxi_fare), tf.int64),
      tf.cast(tf.greater(tips, tf.multiply(taxi_fare, tf.constant(0.2))),
              tf.int64))
  return outputs


class TaxiWideDeep(DNNLinearCombinedClassifierSpec):
  """The Estimator's DNNLinearCombinedClassifier, canned."""
  label_key = _xf(LABEL_KEY)
  raw_label_key = LABEL_KEY
  linear_feature_keys = [_xf(k) for k in VOCAB_FEATURE_KEYS +
                         BUCKET_FEATURE_KEYS + list(CATEGORICAL_FEATURES)]
  dnn_feature_keys = [_xf(k) for k in DENSE_FLOAT_FEATURE_KEYS]
  feature_keys = linear_feature_keys + dnn_feature_keys
  columns = {_xf(k): Categorical(num_buckets=n)
             for k, n in CATEGORICAL_FEATURES.items()}
  dnn_hidden_units = [100, 70, 50, 25]
  batch_size = 40
  learning_rate = 0.001
