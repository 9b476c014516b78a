"""The model every benchmark variant trains: a 2x64 DNN on the synthetic
features (one `keras.Input` per feature, as TFX's tutorials build it)."""

from benchmarks.synthetic_data import FEATURE_KEYS

BATCH_SIZE = 256


def build_model():
  """Uncompiled; two logits for the binary label."""
  import keras  # pylint: disable=g-import-not-at-top
  inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURE_KEYS}
  x = keras.layers.Concatenate()([inputs[k] for k in FEATURE_KEYS])
  for _ in range(2):
    x = keras.layers.Dense(64, activation='relu')(x)
  return keras.Model(inputs, keras.layers.Dense(2)(x))


def compile_args():
  """Optimizer, loss and metrics, as keyword arguments of `compile`."""
  import keras  # pylint: disable=g-import-not-at-top
  return dict(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=[keras.metrics.SparseCategoricalAccuracy()])
