"""The model every benchmark variant trains: a 2x64 DNN on the synthetic
features (one `keras.Input` per feature, as TFX's tutorials build it). On
the wide table, the int and string categoricals are hashed into 4-wide
embeddings first."""

from benchmarks.synthetic_data import VOCABULARY, feature_keys

BATCH_SIZE = 256
EMBEDDING_WIDTH = 4


def build_model(table: str = 'narrow'):
  """Uncompiled; two logits for the binary label."""
  import keras  # pylint: disable=g-import-not-at-top
  keys = feature_keys(table)
  dtypes = {'float': 'float32', 'int': 'int64', 'string': 'string'}
  inputs = {k: keras.Input(shape=(1,), name=k, dtype=dtypes[kind])
            for kind, names in keys.items() for k in names}
  parts = [keras.layers.Concatenate()([inputs[k] for k in keys['float']])]
  for kind in ('int', 'string'):
    if keys[kind]:
      bins = 2 * VOCABULARY * len(keys[kind])
      codes = keras.layers.Hashing(bins)(keras.layers.Concatenate()(
          [inputs[k] for k in keys[kind]]))
      parts.append(keras.layers.Flatten()(
          keras.layers.Embedding(bins, EMBEDDING_WIDTH)(codes)))
  x = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
  for _ in range(2):
    x = keras.layers.Dense(64, activation='relu')(x)
  return keras.Model(inputs, keras.layers.Dense(2)(x))


def compile_args():
  """Optimizer, loss and metrics, as keyword arguments of `compile`."""
  import keras  # pylint: disable=g-import-not-at-top
  return dict(optimizer=keras.optimizers.Adam(1e-3),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=[keras.metrics.SparseCategoricalAccuracy()])
