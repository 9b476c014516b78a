"""run_fn exporting with Keras 3's `model.export`: inputs are raw features."""

import keras
import tensorflow as tf

FEATURES = ['bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
            'body_mass_g']


def run_fn(fn_args):
  inputs = {k: keras.Input((1,), name=k) for k in FEATURES}
  x = keras.layers.Concatenate()([inputs[k] for k in FEATURES])
  model = keras.Model(inputs, keras.layers.Dense(3)(x))
  model.export(fn_args.serving_model_dir)
  assert tf.io.gfile.exists(fn_args.serving_model_dir)
