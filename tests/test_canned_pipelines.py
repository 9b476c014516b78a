"""Canned and multi-task specs in whole pipelines: Transform, Evaluator,
Pusher, ML Metadata."""

import glob
import os

import pytest

from conftest import REPO


def _raw_eval_records(pipeline_root, count):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  files = glob.glob(os.path.join(pipeline_root, 'CsvExampleGen', 'examples',
                                 '*', 'Split-eval', '*.gz'))
  return [r.numpy() for r in tf.data.TFRecordDataset(files, 'GZIP').take(
      count)]


@pytest.mark.slow
def test_taxi_wide_and_deep_with_transform_is_blessed_and_pushed(tmp_path):
  """The canned wide-and-deep classifier trains on Transform's output;
  Evaluator reads its AUC on raw examples (the label through the
  `transform_features` signature) and blesses it; Pusher pushes it; the
  pushed model classifies raw examples."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from pipelines import taxi_pipeline_local  # pylint: disable=g-import-not-at-top
  result = taxi_pipeline_local.run(
      str(tmp_path), taxi_pipeline_local.WIDE_DEEP_MODULE_FILE, rows=2000,
      train_steps=200, eval_steps=5, auc_threshold=0.6)
  assert result['metrics']['auc'] >= 0.6, result['metrics']
  assert result['blessed'] and result['pushed_model'], result
  assert 'eval_auc' in result['trainer']
  loaded = tf.saved_model.load(result['pushed_model'])
  assert {'serving_default', 'predict', 'classification', 'regression',
          'transform_features'} <= set(loaded.signatures)
  records = _raw_eval_records(result['pipeline_root'], 8)
  scores = loaded.signatures['classification'](
      inputs=tf.constant(records))['scores'].numpy()
  assert scores.shape == (8, 2)
  np.testing.assert_allclose(scores.sum(axis=1), 1, rtol=1e-5)


@pytest.mark.slow
def test_multi_task_metrics_reach_ml_metadata_and_evaluator_reads_one_output(
    tmp_path):
  """Two heads train; each output's metrics are custom properties of the
  Model in ML Metadata; Evaluator evaluates the `species` output by name."""
  from pipelines import penguin_pipeline_local  # pylint: disable=g-import-not-at-top
  result = penguin_pipeline_local.run(
      str(tmp_path), train_steps=60,
      module_file=os.path.join(REPO, 'module_files', 'penguin_multi_task.py'),
      sex=True, evaluate_output='species')
  trainer = result['trainer']
  assert trainer['eval_species_accuracy'] >= 0.8, trainer
  assert 0.5 <= trainer['eval_sex_accuracy'] <= 1, trainer
  assert {'eval_species_loss', 'eval_sex_loss', 'eval_sex_auc'} <= set(
      trainer)
  assert result['metrics']['sparse_categorical_accuracy'] >= 0.8
  assert result['blessed'] and result['pushed_model']
