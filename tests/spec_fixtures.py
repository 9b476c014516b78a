"""Small TrainSpecs the tests train with the Estimator."""

import keras

from generic_trainer import TrainSpec

FEATURES = ['bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
            'body_mass_g']


class PenguinSpec(TrainSpec):
  """Species from the four measurements; fast to train."""
  label_key = 'species'
  feature_keys = FEATURES
  batch_size = 32
  eval_batch_size = 64
  epochs = 2
  checkpoint = None
  units = 3

  def build_model(self):
    inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURES}
    x = keras.layers.Concatenate()([inputs[k] for k in FEATURES])
    x = keras.layers.BatchNormalization(momentum=0.5)(x)
    x = keras.layers.Dense(8, activation='relu')(x)
    return keras.Model(inputs, keras.layers.Dense(
        self.units, activation='softmax')(x))

  def build_optimizer(self):
    return keras.optimizers.Adam(self.hparams.get('learning_rate', 1e-2))

  def build_loss(self):
    return keras.losses.SparseCategoricalCrossentropy()

  def build_metrics(self):
    return [keras.metrics.SparseCategoricalAccuracy()]

  def preprocess(self, features):
    return {k: keras.ops.cast(v, 'float32') for k, v in features.items()}
