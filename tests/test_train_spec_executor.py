"""TrainSpec modules through GenericExecutor: train, export, record."""

import json
import os

import pytest

from conftest import REPO
from generic_trainer import errors

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _do(io):
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  GenericExecutor().Do(*io)


def _eval_records(io, n=6):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = os.path.join(io[0]['examples'][0].uri, 'Split-eval', 'data.gz')
  return [r.numpy() for r in tf.data.TFRecordDataset(path, 'GZIP').take(n)]


def test_penguin_spec_trains_exports_and_records(trainer_io):
  """A TrainSpec module trains, exports both signatures and records metrics."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  io = trainer_io(train_steps=20, eval_steps=0, module_file=SPEC_MODULE)
  _do(io)
  model, model_run = io[1]['model'][0], io[1]['model_run'][0]
  loaded = tf.saved_model.load(os.path.join(model.uri, 'Format-Serving'))
  assert {'serving_default', 'serving_raw'} <= set(loaded.signatures)
  by_example = loaded.signatures['serving_default'](
      examples=tf.constant(_eval_records(io)))['outputs'].numpy()
  assert by_example.shape == (6, 3)
  np.testing.assert_allclose(by_example.sum(axis=1), 1.0, rtol=1e-5)
  raw = loaded.signatures['serving_raw'](
      bill_length_mm=tf.constant([[39.1]]), bill_depth_mm=tf.constant([[18.7]]),
      flipper_length_mm=tf.constant([[181]], tf.int64),
      body_mass_g=tf.constant([[3750]], tf.int64))['outputs']
  assert raw.shape == (1, 3)
  for artifact in (model, model_run):
    assert artifact.get_int_custom_property('train_steps') == 20
    assert artifact.get_int_custom_property('epochs') == 5
    assert 0 <= artifact.get_float_custom_property(
        'eval_sparse_categorical_accuracy') <= 1
    assert artifact.get_float_custom_property('training_time_s') > 0
  with open(os.path.join(model_run.uri, 'history.json')) as f:
    history = json.load(f)
  assert [e['epoch'] for e in history] == [1, 2, 3, 4, 5]
  assert 'val_loss' in history[0]
  assert sorted(os.listdir(os.path.join(model_run.uri, 'checkpoints'))) == [
      f'epoch-00{i}.weights.h5' for i in range(1, 6)]
  assert os.listdir(os.path.join(model_run.uri, 'tensorboard'))
