"""Chicago taxi "big tipper" classifier: Transform + a TrainSpec.

One module file serves both components: Transform calls `preprocessing_fn`;
GenericTrainer trains `TaxiSpec` on the transformed examples. The exported
`serving_default` takes raw serialized tf.Example and applies the Transform
graph itself, so Evaluator and Pusher need no user code.
"""

import keras
import tensorflow as tf
import tensorflow_transform as tft

from generic_trainer import TrainSpec

DENSE = ['trip_miles', 'fare', 'trip_seconds']
VOCAB = ['payment_type', 'company']
HOUR = 'trip_start_hour'
_TOP_K = 50


def _dense(value, default):
  """A [batch] tensor from a sparse (optional) or [batch, 1] feature."""
  if isinstance(value, tf.sparse.SparseTensor):
    value = tf.sparse.to_dense(tf.SparseTensor(
        value.indices, value.values, [value.dense_shape[0], 1]), default)
  return tf.reshape(value, [-1])


def preprocessing_fn(inputs):
  outputs = {}
  for key in DENSE:
    outputs[key + '_xf'] = tft.scale_to_z_score(
        tf.cast(_dense(inputs[key], tf.cast(0, inputs[key].dtype)),
                tf.float32))
  for key in VOCAB:
    outputs[key + '_xf'] = tft.compute_and_apply_vocabulary(
        _dense(inputs[key], ''), top_k=_TOP_K, num_oov_buckets=1)
  outputs[HOUR + '_xf'] = _dense(inputs[HOUR], tf.cast(0, inputs[HOUR].dtype))
  fare = tf.cast(_dense(inputs['fare'], tf.cast(0, inputs['fare'].dtype)),
                 tf.float32)
  tips = tf.cast(_dense(inputs['tips'], tf.cast(0, inputs['tips'].dtype)),
                 tf.float32)
  outputs['big_tipper'] = tf.cast(tips > 0.2 * fare, tf.int64)
  return outputs


class TaxiSpec(TrainSpec):
  label_key = 'big_tipper'
  raw_label_key = 'tips'
  feature_keys = [k + '_xf' for k in DENSE + VOCAB + [HOUR]]
  batch_size = 64
  epochs = 2

  def build_model(self):
    inputs = {k: keras.Input(shape=(), name=k, dtype='int64' if k[:-3] in
                             VOCAB + [HOUR] else 'float32')
              for k in self.feature_keys}
    parts = [keras.ops.stack([inputs[k + '_xf'] for k in DENSE], axis=1)]
    for key, size in [(k, _TOP_K + 1) for k in VOCAB] + [(HOUR, 24)]:
      parts.append(keras.layers.Embedding(size, 4)(inputs[key + '_xf']))
    x = keras.layers.Concatenate()(parts)
    x = keras.layers.Dense(16, activation='relu')(x)
    return keras.Model(inputs, keras.layers.Dense(1, activation='sigmoid')(x))

  def build_optimizer(self):
    return keras.optimizers.Adam(self.hparams.get('learning_rate', 1e-3))

  def build_loss(self):
    return keras.losses.BinaryCrossentropy()

  def build_metrics(self):
    return [keras.metrics.AUC(name='auc'), keras.metrics.BinaryAccuracy()]
