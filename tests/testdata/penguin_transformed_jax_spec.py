"""A TrainSpec on JAX over the output of TFX's penguin Transform.

The features are TFX's penguin preprocessing's (`culmen_length_mm_xf`...:
z-scores); the serving signature parses raw examples and applies the
Transform graph in TensorFlow, then the model through jax2tf. `preprocess`
(clipping, in keras.ops) runs in tf.data through jax2tf; the model
bucketizes the body mass into an Embedding (a gather in StableHLO).
"""

import keras
import numpy as np

from generic_trainer import TrainSpec

FEATURES = ['culmen_length_mm_xf', 'culmen_depth_mm_xf',
            'flipper_length_mm_xf', 'body_mass_g_xf']


class PenguinTransformedSpec(TrainSpec):
  backend = 'jax'
  label_key = 'species_xf'
  raw_label_key = 'species'
  feature_keys = FEATURES
  batch_size = 20
  epochs = 2

  def build_model(self):
    inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURES}
    mass = keras.ops.cast(keras.ops.digitize(
        inputs['body_mass_g_xf'][:, 0], np.array([-1.0, 0.0, 1.0],
                                                 'float32')), 'int32')
    x = keras.layers.Concatenate()(
        [inputs[k] for k in FEATURES] + [keras.layers.Embedding(4, 2)(mass)])
    x = keras.layers.Dense(8, activation='relu')(x)
    return keras.Model(inputs, keras.layers.Dense(3, activation='softmax')(x))

  def build_optimizer(self):
    return keras.optimizers.Adam(1e-2)

  def build_loss(self):
    return keras.losses.SparseCategoricalCrossentropy()

  def build_metrics(self):
    return [keras.metrics.SparseCategoricalAccuracy()]

  def preprocess(self, features):
    return {k: keras.ops.clip(v, -5.0, 5.0) for k, v in features.items()}
