"""Multi-worker training for real: worker processes, TF_CONFIG, loopback ports.

Each test starts real TensorFlow processes that form a MultiWorkerMirroredStrategy
cluster on localhost; they take a minute or two on a 2-core machine.
"""

import glob
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO, TESTDATA, penguin_statistics
from executor_thread import executing
import worker_pair

pytestmark = pytest.mark.slow


@pytest.fixture
def scratch_tmp(tmp_path, monkeypatch):
  """A TMPDIR of this test's own, to see that worker scratch is removed."""
  import tempfile  # pylint: disable=g-import-not-at-top
  tmp = tmp_path / 'tmp'
  tmp.mkdir()
  monkeypatch.setenv('TMPDIR', str(tmp))
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp))
  return tmp


def _ours(tmp):
  """What GenericTrainer left in a temporary folder (other code uses it too)."""
  return [n for n in os.listdir(tmp)
          if n.startswith(('generic_trainer_', 'generic-trainer-'))]


def _accuracy(serving_dir, examples_uri):
  """Share of the eval split's penguins the model classifies right."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      tf.io.gfile.glob(os.path.join(examples_uri, 'Split-eval', '*')),
      'GZIP')]
  labels = [tf.train.Example.FromString(r).features.feature[
      'species'].int64_list.value[0] for r in records]
  outputs = tf.saved_model.load(serving_dir).signatures['serving_default'](
      examples=tf.constant(records))['outputs'].numpy()
  return float((outputs.argmax(axis=1) == np.array(labels)).mean())


def _latest(store, type_name):
  return max(store.get_artifacts_by_type(type_name), key=lambda a: a.id)


def test_two_worker_penguin_pipeline_trains_like_one_worker(tmp_path,
                                                            scratch_tmp,
                                                            capfd):
  """Two workers train the penguin pipeline's model together, as well as one."""
  from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  from pipelines import penguin_pipeline_local  # pylint: disable=g-import-not-at-top
  start = time.monotonic()
  result = penguin_pipeline_local.run(str(tmp_path / 'out'), train_steps=100,
                                      num_workers=2)
  two_worker_seconds = time.monotonic() - start
  assert result['blessed'], result
  config = metadata.sqlite_metadata_connection_config(result['metadata_path'])
  with metadata.Metadata(config) as m:
    model, model_run = _latest(m.store, 'Model'), _latest(m.store, 'ModelRun')
    examples, schema = _latest(m.store, 'Examples'), _latest(m.store,
                                                             'Schema')
  with open(os.path.join(model_run.uri, 'workers.json')) as f:
    workers = json.load(f)['workers']
  assert [(w['index'], w['chief'], w['replicas_in_sync']) for w in workers] == [
      (0, True, 2), (1, False, 2)]
  logs = capfd.readouterr().err
  assert '[worker 1] ' in logs and '[worker 0] ' in logs
  assert os.listdir(model.uri) == ['Format-Serving']
  assert _ours(scratch_tmp) == []

  # The same training in one process, on the same Examples.
  inputs = {'examples': [standard_artifacts.Examples()],
            'schema': [standard_artifacts.Schema()]}
  inputs['examples'][0].set_mlmd_artifact(examples)
  inputs['schema'][0].set_mlmd_artifact(schema)
  outputs = {'model': [standard_artifacts.Model()],
             'model_run': [standard_artifacts.ModelRun()]}
  outputs['model'][0].uri = str(tmp_path / 'one' / 'model')
  outputs['model_run'][0].uri = str(tmp_path / 'one' / 'model_run')
  GenericExecutor().Do(inputs, outputs, {
      'train_args': '{"num_steps": 100}', 'eval_args': '{"num_steps": 5}',
      'custom_config': 'null',
      'module_file': penguin_pipeline_local.DEFAULT_MODULE_FILE})

  two_workers = _accuracy(os.path.join(model.uri, 'Format-Serving'),
                          examples.uri)
  one_worker = _accuracy(
      os.path.join(outputs['model'][0].uri, 'Format-Serving'), examples.uri)
  print(f'eval accuracy: 2 workers {two_worker_seconds:.0f} s pipeline '
        f'{two_workers:.3f}, 1 worker {one_worker:.3f}; Evaluator: '
        f"{result['metrics']}")
  # Two workers learn as well as one (which, with its own random start,
  # lands between about 0.88 and 0.99 after 100 steps).
  assert two_workers >= 0.85
  assert two_workers >= one_worker - 0.08


def test_a_crashing_worker_fails_the_execution_quickly(trainer_io,
                                                       scratch_tmp):
  """Worker 1's error ends the run at once; the waiting chief is stopped."""
  from generic_trainer import errors  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  io = trainer_io(module_file=os.path.join(TESTDATA, 'worker_crashes.py'),
                  num_workers=2)
  start = time.monotonic()
  with pytest.raises(errors.RunFnError, match=(
      r'^Worker 1 failed: run_fn \(.*worker_crashes.py.\) raised OSError: '
      r'worker 1 cannot read its shard: disk quota exceeded')) as info:
    GenericExecutor().Do(*io)
  assert time.monotonic() - start < 150
  assert 'raised in worker 1 of the local 2-worker training' in str(
      info.value)
  assert not os.path.exists(os.path.join(io[1]['model'][0].uri,
                                         'Format-Serving'))
  assert _ours(scratch_tmp) == []
  leftovers = subprocess.run(  # Workers' command lines name their scratch.
      ['pgrep', '-f', str(scratch_tmp)], capture_output=True,
      text=True, check=False).stdout.split()
  assert not leftovers, f'worker processes left running: {leftovers}'


def test_tf_config_from_the_cluster_makes_chief_and_worker(
    compiled_kubeflow, penguin_artifacts, tmp_path):
  """As a TFJob runs it: the chief publishes, the worker trains and writes nothing."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  examples, schema = penguin_artifacts
  compiled_kubeflow, _ = compiled_kubeflow
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri, model_run.uri = str(tmp_path / 'model'), str(tmp_path /
                                                          'model_run')
  invocation = kfp_step.executor_input(
      compiled_kubeflow, 'GenericTrainer',
      {'examples': [examples], 'schema': [schema],
       'statistics': [penguin_statistics(tmp_path)]},
      {'model': [model], 'model_run': [model_run]},
      str(tmp_path / 'executor_output.json'))
  command = kfp_step.command_line(compiled_kubeflow, 'GenericTrainer',
                                  invocation, python=sys.executable)
  processes = {}
  for task_type, tf_config in worker_pair.tf_configs().items():
    scratch = tmp_path / f'tmp-{task_type}'
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch), TF_CONFIG=tf_config)
    env['PYTHONPATH'] = os.pathsep.join(
        [os.path.join(REPO, 'module_files'), REPO, env.get('PYTHONPATH', '')])
    processes[task_type] = subprocess.Popen(
        command, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
  logs = worker_pair.ended(processes, timeout_s=420)
  for task_type, process in processes.items():
    assert process.returncode == 0, logs[task_type][-5000:]
  assert 'training as worker 1 of 2 (worker 0); the chief publishes' in logs[
      'worker']
  assert 'export validated: ' in logs['chief']
  assert 'export validated: ' not in logs['worker']
  assert os.listdir(model.uri) == ['Format-Serving']
  assert 'rejected_export' not in os.listdir(model_run.uri)
  assert _ours(tmp_path / 'tmp-worker') == []


def test_two_workers_train_a_train_spec_unchanged(trainer_io, scratch_tmp):
  """A TrainSpec module trains on two workers with no change to it."""
  io = trainer_io(train_steps=60, eval_steps=0, num_workers=2,
                  module_file=os.path.join(REPO, 'module_files',
                                           'penguin_spec.py'))
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  GenericExecutor().Do(*io)
  model, model_run = io[1]['model'][0], io[1]['model_run'][0]
  with open(os.path.join(model_run.uri, 'workers.json')) as f:
    workers = json.load(f)['workers']
  assert [(w['chief'], w['replicas_in_sync']) for w in workers] == [
      (True, 2), (False, 2)]
  assert _accuracy(os.path.join(model.uri, 'Format-Serving'),
                   io[0]['examples'][0].uri) >= 0.8
  assert model.get_int_custom_property('train_steps') == 60
  assert _ours(scratch_tmp) == []


def _two_slow_workers_at_10(trainer_io, tmp_path):
  """Two workers of slow_worker_spec.py training 40 steps, once the resume
  checkpoint is at step 10: (record folder, Model, ModelRun, the
  execution's thread, its outcome)."""
  record = tmp_path / 'record'
  io = trainer_io(train_steps=40, eval_steps=0, num_workers=2,
                  module_file=os.path.join(TESTDATA, 'slow_worker_spec.py'),
                  custom_config=json.dumps({'record_dir': str(record)}))
  model, model_run = io[1]['model'][0], io[1]['model_run'][0]
  execution, outcome = executing(io)
  _wait_for_checkpoint(model_run, execution, outcome, step=10)
  return record, model, model_run, execution, outcome


def _wait_for_checkpoint(model_run, execution, outcome, step):
  """Until the resume checkpoint in `model_run` is at `step` or later."""
  pointer = os.path.join(model_run.uri, 'resume-*', 'latest.json')
  deadline = time.monotonic() + 240
  while not any(json.load(open(p))['step'] >= step
                for p in glob.glob(pointer)):
    assert execution.is_alive() and time.monotonic() < deadline, outcome
    time.sleep(0.05)


def test_a_killed_worker_restarts_the_group_from_the_checkpoint(
    trainer_io, scratch_tmp, tmp_path, caplog):
  """SIGKILL worker 1 mid-training: the group restarts from the last
  checkpoint (every 2 steps), the execution completes and publishes, the
  steps add up, at most one checkpoint interval is trained twice, and the
  log and workers.json say what happened."""
  caplog.set_level(logging.INFO, logger='absl')
  record, model, model_run, execution, outcome = _two_slow_workers_at_10(
      trainer_io, tmp_path)
  os.kill(int((record / 'worker-1.pid').read_text()), signal.SIGKILL)
  execution.join(timeout=300)
  assert not execution.is_alive() and 'error' not in outcome, outcome

  assert os.listdir(model.uri) == ['Format-Serving']
  assert model.get_int_custom_property('train_steps') == 40
  with open(os.path.join(model_run.uri, 'workers.json')) as f:
    summary = json.load(f)
  [restart] = summary['restarts']
  assert (restart['worker'], restart['how']) == (
      1, 'was killed by signal 9 (SIGKILL)')
  resumed_step = int(restart['resumed_from'].split()[1])
  assert resumed_step >= 10
  killed, restarted = _chief_steps(record)
  assert restarted == list(range(resumed_step + 1, 41))
  assert killed[-1] - resumed_step <= 2  # At most one interval repeated.
  assert ('Worker 1 of the local 2-worker training was killed by signal 9 '
          '(SIGKILL) after ') in caplog.text
  assert ('restarting all 2 (restart 1 of at most 2) from the checkpoint at '
          f'{restart["resumed_from"]}.') in caplog.text
  assert _ours(scratch_tmp) == []


def test_sigterm_stops_every_worker_at_one_step_and_the_group_resumes_there(
    trainer_io, scratch_tmp, tmp_path):
  """SIGTERM to the executor's process (sent to itself from a thread):
  it forwards it to both workers, which stop at one step; the chief saves
  it, PreemptedError, nothing published; the next execution trains exactly
  the steps after it."""
  from generic_trainer.errors import PreemptedError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  record = tmp_path / 'record'
  io = trainer_io(train_steps=40, eval_steps=0, num_workers=2,
                  module_file=os.path.join(TESTDATA, 'slow_worker_spec.py'),
                  custom_config=json.dumps({'record_dir': str(record)}))
  model, model_run = io[1]['model'][0], io[1]['model_run'][0]
  pointer = os.path.join(model_run.uri, 'resume-*', 'latest.json')

  def point():
    for path in glob.glob(pointer):
      with open(path) as f:
        return json.load(f)
    return {}

  done = threading.Event()

  def terminate_at_step_10():
    deadline = time.monotonic() + 240
    while point().get('step', 0) < 10 and time.monotonic() < deadline:
      if done.wait(0.05):
        return  # The execution ended first: never signal a later test.
    if not done.is_set():
      os.kill(os.getpid(), signal.SIGTERM)

  threading.Thread(target=terminate_at_step_10, daemon=True).start()
  try:
    with pytest.raises(PreemptedError, match=(
        r'SIGTERM stopped the local 2-worker training; every worker stopped '
        r'at the same step and the chief saved it: the resume checkpoint in '
        r'.* is at step \d+ .*Nothing was published\.')):
      GenericExecutor().Do(*io)
  finally:
    done.set()
  saved = point()
  by_worker = {}
  for line in (record / 'steps.log').read_text().splitlines():
    _, worker, step = line.split()
    by_worker.setdefault(worker, []).append(int(step))
  assert by_worker['0'][-1] == by_worker['1'][-1] == saved['step'] >= 10
  assert saved['step'] < 40 and not saved['stopped']
  assert not os.listdir(model.uri)

  (record / 'steps.log').unlink()
  GenericExecutor().Do(*io)
  chief = [int(line.split()[2]) for line in
           (record / 'steps.log').read_text().splitlines()
           if line.split()[1] == '0']
  assert chief == list(range(saved['step'] + 1, 41))
  assert os.listdir(model.uri) == ['Format-Serving']
  assert _ours(scratch_tmp) == []


def test_sigterm_to_one_worker_stops_the_group_at_a_saved_step_and_restarts(
    trainer_io, scratch_tmp, tmp_path, caplog):
  """SIGTERM to worker 1 alone (its machine preempted, not the executor):
  it asks the chief to stop, every worker stops at one step which is
  saved, the group restarts from it (a restart in workers.json) and trains
  exactly the steps after it: 0 repeated; it publishes."""
  caplog.set_level(logging.INFO, logger='absl')
  record, model, model_run, execution, outcome = _two_slow_workers_at_10(
      trainer_io, tmp_path)
  signalled = time.monotonic()
  pid = int((record / 'worker-1.pid').read_text())
  os.kill(pid, signal.SIGTERM)
  while True:  # Until the signalled worker has ended.
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      break
    time.sleep(0.05)
  stopped_s = time.monotonic() - signalled
  execution.join(timeout=300)
  assert not execution.is_alive() and 'error' not in outcome, outcome
  print(f'SIGTERM to one worker: it ended {stopped_s:.1f} s after the signal')

  assert os.listdir(model.uri) == ['Format-Serving']
  assert model.get_int_custom_property('train_steps') == 40
  with open(os.path.join(model_run.uri, 'workers.json')) as f:
    [restart] = json.load(f)['restarts']
  assert restart['worker'] in (0, 1)
  assert restart['how'].startswith('was stopped by SIGTERM')
  resumed_step = int(restart['resumed_from'].split()[1])
  stopped, restarted = _chief_steps(record)
  assert stopped[-1] == resumed_step  # The step it stopped at was saved.
  assert restarted == list(range(resumed_step + 1, 41))  # 0 repeated.
  assert stopped_s < 25
  assert _ours(scratch_tmp) == []


def _chief_steps(record):
  """The steps the chief trained, one list per process it ran in (in the
  order the processes started), from the spec's steps.log."""
  steps = {}
  for line in (record / 'steps.log').read_text().splitlines():
    pid, worker, step = line.split()
    if worker == '0':
      steps.setdefault(pid, []).append(int(step))
  return list(steps.values())
