"""A legacy tf.keras 2 module: `model.save(dir, save_format='tf')`.

This is how TFX's docs save models; it works only under tf.keras 2
(TF_USE_LEGACY_KERAS=1), so GenericTrainer runs it with
keras_version='tf_keras'. It records which process and Keras ran it.
"""

import json
import os

import tensorflow as tf


def run_fn(fn_args):
  os.makedirs(fn_args.model_run_dir, exist_ok=True)
  with open(os.path.join(fn_args.model_run_dir, 'keras.json'), 'w') as f:
    json.dump({'pid': os.getpid(), 'keras': tf.keras.layers.Dense.__module__},
              f)
  inputs = tf.keras.Input((1,), name='bill_length_mm')
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(inputs))
  model.compile(loss='mse')
  model.save(fn_args.serving_model_dir, save_format='tf')
