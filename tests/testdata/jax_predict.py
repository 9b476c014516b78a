"""Predicts with a TrainSpec's model on JAX, from a weights checkpoint.

    KERAS_BACKEND=jax python jax_predict.py MODULE_FILE WEIGHTS RECORDS OUT

RECORDS is a .npy array of serialized tf.Example; the features the spec
reads are taken from each example as they are (floats or ints), passed
through the spec's `preprocess` and the model, and the outputs are saved
to OUT (.npy), for comparison with the exported SavedModel's.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
from generic_trainer.usercode import module_loader  # pylint: disable=g-import-not-at-top,wrong-import-position


def _features(records, keys):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  columns = {k: [] for k in keys}
  for record in records:
    feature = tf.train.Example.FromString(record).features.feature
    for k in keys:
      values = feature[k].float_list.value or feature[k].int64_list.value
      columns[k].append(list(values))
  return {k: np.array(v) for k, v in columns.items()}


def main(module_file, weights, records_path, out):
  spec = module_loader.load_from_file(module_file).train_spec()
  spec.model.load_weights(weights)
  features = _features(np.load(records_path, allow_pickle=True),
                       spec.feature_keys)
  outputs = spec.model.predict(spec.preprocess(features), verbose=0)
  np.save(out, np.asarray(outputs))


if __name__ == '__main__':
  main(*sys.argv[1:5])
