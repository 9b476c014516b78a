"""A penguin classifier as a TrainSpec, in a project that installed the
tfx-generic-trainer wheel (docs/getting-started/install.md)."""

import keras

from generic_trainer import TrainSpec

FEATURES = ['bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
            'body_mass_g']


class PenguinSpec(TrainSpec):
  label_key = 'species'
  feature_keys = FEATURES
  batch_size = 20
  num_classes = 3

  def build_model(self):
    inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURES}
    x = keras.layers.Concatenate()([inputs[k] for k in FEATURES])
    x = keras.layers.BatchNormalization(momentum=0.9)(x)
    x = keras.layers.Dense(8, activation='relu')(x)
    outputs = keras.layers.Dense(self.num_classes, activation='softmax')(x)
    return keras.Model(inputs, outputs)

  def build_optimizer(self):
    return keras.optimizers.Adam(1e-2)

  def build_loss(self):
    return keras.losses.SparseCategoricalCrossentropy()

  def build_metrics(self):
    return [keras.metrics.SparseCategoricalAccuracy()]

  def preprocess(self, features):
    return {k: keras.ops.cast(v, 'float32') for k, v in features.items()}
