"""run_fn that saves a native .keras file instead of a SavedModel."""

import os

import keras


def run_fn(fn_args):
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
  os.makedirs(fn_args.serving_model_dir, exist_ok=True)
  model.save(os.path.join(fn_args.serving_model_dir, 'model.keras'))
