"""The local penguin pipeline end to end: trained, blessed, pushed, predicts."""

import glob
import os

import pytest

from conftest import REPO, TESTDATA


def _serialized_penguins(data_csv, limit=20):
  import csv  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  records, labels = [], []
  with open(data_csv) as f:
    for row in list(csv.DictReader(f))[:limit]:
      feature = {k: tf.train.Feature(float_list=tf.train.FloatList(
          value=[float(row[k])])) for k in ('bill_length_mm', 'bill_depth_mm')}
      for k in ('flipper_length_mm', 'body_mass_g'):
        feature[k] = tf.train.Feature(int64_list=tf.train.Int64List(
            value=[int(row[k])]))
      records.append(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())
      labels.append(int(row['species']))
  return records, labels


@pytest.mark.slow
@pytest.mark.parametrize('module', ['penguin_keras.py', 'penguin_spec.py'])
def test_pipeline_pushes_a_blessed_model_that_predicts(tmp_path, module):
  """Evaluator blesses the model, Pusher pushes it, and it classifies; with
  a run_fn module and with a TrainSpec module (no export code)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from pipelines import penguin_pipeline_local  # pylint: disable=g-import-not-at-top
  result = penguin_pipeline_local.run(
      str(tmp_path), train_steps=60,
      module_file=os.path.join(REPO, 'module_files', module))
  assert result['blessed']
  assert result['metrics']['sparse_categorical_accuracy'] >= 0.6
  assert result['metrics']['example_count'] > 50
  pushed = result['pushed_model']
  assert pushed and pushed.startswith(result['serving_model_dir'])
  records, labels = _serialized_penguins(
      os.path.join(tmp_path, 'data', 'penguins.csv'), limit=342)
  outputs = tf.saved_model.load(pushed).signatures['serving_default'](
      examples=tf.constant(records))['outputs'].numpy()
  assert outputs.shape == (len(records), 3)
  assert np.isfinite(outputs).all()
  assert (outputs.argmax(axis=1) == np.array(labels)).mean() > 0.6
  assert os.path.exists(result['metadata_path'])


@pytest.mark.slow
def test_jax_spec_is_trained_blessed_pushed_and_predicts_as_on_jax(tmp_path):
  """The penguin TrainSpec with backend='jax' trains in a JAX child process;
  its export passes the checks in this TensorFlow process, Evaluator
  blesses it, Pusher pushes it, and the pushed SavedModel (jax2tf, served
  by TensorFlow) predicts what the model predicts on JAX, within 1e-5."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from conftest import command_env  # pylint: disable=g-import-not-at-top
  from pipelines import penguin_pipeline_local  # pylint: disable=g-import-not-at-top
  module = os.path.join(REPO, 'module_files', 'penguin_spec_jax.py')
  result = penguin_pipeline_local.run(str(tmp_path), train_steps=60,
                                      module_file=module)
  assert result['blessed']
  assert result['metrics']['sparse_categorical_accuracy'] >= 0.6
  pushed = result['pushed_model']
  assert pushed and pushed.startswith(result['serving_model_dir'])
  assert 'XlaCallModule' in {
      node.op for f in tf.saved_model.load(pushed).signatures[
          'serving_default'].graph.as_graph_def().library.function
      for node in f.node_def}

  records, _ = _serialized_penguins(
      os.path.join(tmp_path, 'data', 'penguins.csv'), limit=342)
  served = tf.saved_model.load(pushed).signatures['serving_default'](
      examples=tf.constant(records))['outputs'].numpy()
  [weights] = glob.glob(str(tmp_path / 'pipeline_root' / 'GenericTrainer' /
                            'model_run' / '*' / 'checkpoints' /
                            'epoch-005.weights.h5'))
  np.save(tmp_path / 'records.npy', np.array(records, dtype=object))
  proc = subprocess.run(
      [sys.executable, os.path.join(TESTDATA, 'jax_predict.py'), module,
       weights, str(tmp_path / 'records.npy'), str(tmp_path / 'jax.npy')],
      env=dict(command_env(), KERAS_BACKEND='jax'), capture_output=True,
      text=True, timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  on_jax = np.load(tmp_path / 'jax.npy')
  assert served.shape == on_jax.shape == (len(records), 3)
  np.testing.assert_allclose(served, on_jax, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_failed_export_stops_the_pipeline_before_pusher(tmp_path):
  """A module whose export is invalid fails the run; nothing is pushed."""
  from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import ExportValidationError  # pylint: disable=g-import-not-at-top
  from pipelines import penguin_pipeline_local  # pylint: disable=g-import-not-at-top
  with pytest.raises(Exception) as info:
    penguin_pipeline_local.run(
        str(tmp_path), train_steps=5,
        module_file=os.path.join(TESTDATA, 'exports_keras_file.py'))
  chain, error = [], info.value
  while error is not None:
    chain.append(error)
    error = error.__cause__ or error.__context__
  assert any(isinstance(e, ExportValidationError) for e in chain), chain
  assert not os.path.exists(tmp_path / 'serving_model')
  config = metadata.sqlite_metadata_connection_config(
      str(tmp_path / 'metadata.sqlite'))
  with metadata.Metadata(config) as m:
    for model in m.store.get_artifacts_by_type('Model'):
      assert not os.path.exists(os.path.join(model.uri, 'Format-Serving'))
    assert not m.store.get_artifacts_by_type('PushedModel')
  kept = glob.glob(str(tmp_path / 'pipeline_root' / 'GenericTrainer' / '.system'
                       / 'stateful_working_dir' / '*' / 'rejected_export'))
  assert kept, 'the rejected export should be kept for inspection'



@pytest.mark.slow
def test_pipeline_command_shows_what_runs_and_logs_the_rest(tmp_path):
  """`python -m pipelines.penguin_pipeline_local` prints a line as each
  component starts and ends, the trainer's epochs and the summary with what
  the export checks validated, about 33 lines; the TensorFlow/absl/TFX
  lines are in the log it names."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from conftest import command_env  # pylint: disable=g-import-not-at-top
  out = subprocess.run(
      [sys.executable, '-m', 'pipelines.penguin_pipeline_local',
       '--output-dir', str(tmp_path), '--train-steps', '100',
       '--module-file', os.path.join(REPO, 'module_files', 'penguin_spec.py')],
      cwd=REPO, env=command_env(), capture_output=True, text=True,
      timeout=600)
  lines = (out.stdout + out.stderr).splitlines()
  assert out.returncode == 0, '\n'.join(lines)
  # 30, what was validated, the Keras it trained on, and the component's
  # own line of what it validated (which any team's script shows too).
  assert len(lines) <= 33, '\n'.join(lines)
  for component in ('CsvExampleGen', 'GenericTrainer', 'Evaluator', 'Pusher'):
    assert f'  {component} ...' in lines
    assert any(l.startswith(f'  {component} done in ') for l in lines)
  assert sum(l.strip().startswith('epoch ') for l in lines) == 5  # Spec's.
  assert any(l.startswith('  trainer: ') and 'eval_loss=' in l for l in lines)
  assert ("  trainer's export validated: loads, has serving_default, predicts "
          'finite values on 4 eval examples; answered TF Serving\'s requests '
          'on every signature (serving_default: Predict, serving_raw: '
          'Predict; 4 requests)') in lines  # What was validated.
  log = str(tmp_path / 'pipeline.log')
  assert f'  full log: {log}' in lines
  with open(log) as f:
    text = f.read()
  assert 'Component GenericTrainer is running.' in text
  assert 'tensorflow' in text.lower()
