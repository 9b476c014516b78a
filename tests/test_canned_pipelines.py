"""Canned and multi-task specs in whole pipelines: Transform, Evaluator,
Pusher, ML Metadata."""

import glob
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, command_env


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


_CHURN_PIPELINE = textwrap.dedent('''
    """A churn pipeline written from scratch, outside the repository."""
    import logging, os, sys
    from tfx import v1 as tfx
    from generic_trainer.component import GenericTrainer

    HERE = os.path.dirname(os.path.abspath(__file__))

    def create_pipeline(root):
      example_gen = tfx.components.CsvExampleGen(
          input_base=os.path.join(HERE, 'data'))
      statistics_gen = tfx.components.StatisticsGen(
          examples=example_gen.outputs['examples'])
      schema_gen = tfx.components.SchemaGen(
          statistics=statistics_gen.outputs['statistics'])
      trainer = GenericTrainer(
          module_file=os.path.join(HERE, 'churn_spec.py'),
          examples=example_gen.outputs['examples'],
          schema=schema_gen.outputs['schema'],
          statistics=statistics_gen.outputs['statistics'],
          train_args=tfx.proto.TrainArgs(num_steps=4),
          eval_args=tfx.proto.EvalArgs(num_steps=2))
      return tfx.dsl.Pipeline(
          pipeline_name='churn', pipeline_root=os.path.join(root, 'root'),
          components=[example_gen, statistics_gen, schema_gen, trainer],
          metadata_connection_config=tfx.orchestration.metadata
          .sqlite_metadata_connection_config(os.path.join(root, 'mlmd.db')))

    if __name__ == '__main__':
      logging.basicConfig(level=logging.INFO)
      tfx.orchestration.LocalDagRunner().run(create_pipeline(sys.argv[1]))
    ''')


@pytest.mark.slow
def test_a_canned_spec_in_a_teams_pipeline_lists_its_columns_and_flags(
    tmp_path):
  """A LocalDagRunner script of a team's own, outside the repository, on a
  churn table (an ID per row, signup dates, yes/no labels, blanks): the
  canned spec's log lists its features and columns (vocabularies from
  StatisticsGen's statistics) and warns about the ID and the dates."""
  import datetime  # pylint: disable=g-import-not-at-top
  (tmp_path / 'data').mkdir()
  first = datetime.date(2023, 1, 1)
  rows = ['customer_id,signup_date,plan,tenure_months,support_calls,churned']
  rows += [f'C{10000 + i},{first + datetime.timedelta(days=i)},'
           f'{["basic", "plus", "pro"][i % 3]},{1 + i % 60},'
           f'{"" if i % 17 == 0 else i % 9},{"yes" if i % 4 == 0 else "no"}'
           for i in range(150)]
  (tmp_path / 'data' / 'churn.csv').write_text('\n'.join(rows) + '\n')
  (tmp_path / 'churn_spec.py').write_text(
      'from generic_trainer.canned import DNNClassifierSpec\n\n'
      'class Spec(DNNClassifierSpec):\n'
      "  label_key = 'churned'\n"
      '  hidden_units = [4]\n')
  (tmp_path / 'churn_pipeline.py').write_text(_CHURN_PIPELINE)
  env = command_env()
  env.pop('PYTHONPATH')  # As a team's script runs: the package installed.
  proc = subprocess.run(
      [sys.executable, 'churn_pipeline.py', str(tmp_path / 'out')],
      cwd=str(tmp_path), env=env, capture_output=True, text=True,
      timeout=900, check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  log = proc.stderr
  block = log.split('INFO:generic_trainer.system.progress:Spec reads 5 '
                    'features (columns={name: ...} changes one, '
                    'columns={name: None} leaves it out):\n', 1)[1]
  lines = block.splitlines()[:5]
  assert [l.split()[0] for l in lines] == [
      'customer_id', 'plan', 'signup_date', 'support_calls', 'tenure_months']
  assert 'Categorical, 3 values from the statistics' in lines[1]
  assert "WARNING:generic_trainer.system.progress:'customer_id' looks like " \
         'an ID: ' in log
  assert "WARNING:generic_trainer.system.progress:'signup_date' looks like " \
         'dates (' in log
  assert 'GenericTrainer: export validated' in log
