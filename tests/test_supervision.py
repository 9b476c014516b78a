"""The parent's supervision of the processes that train for it: a hung
group is ended, local workers that would need the network are refused,
a failed private network changes one group only, a closed terminal never
decides a training. Real processes: fake workers (tests/testdata/
fake_worker.py) where what is under test is the parent."""

import json
import logging
import os
import subprocess
import sys
import time

import pytest

import busy_grpc
from conftest import REPO, TESTDATA, command_env
from generic_trainer import errors
from generic_trainer.keys import STALL_LIMIT_ENV, WORKER_NETWORK_ENV


def _request(tmp_path, num_workers, checkpoint_dir=None):
  from generic_trainer.plan.plan import TrainingPlan, Where  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan.request import LocalInputs, TrainingRequest  # pylint: disable=g-import-not-at-top
  plan = TrainingPlan('module_file', '/m.py', num_workers=num_workers,
                      where=Where.LOCAL_WORKERS,
                      checkpoint_dir=checkpoint_dir or str(tmp_path / 'ckpt'))
  return TrainingRequest({}, {}, {}, str(tmp_path / 'serving'),
                         str(tmp_path / 'eval'), plan,
                         local_inputs=LocalInputs([], [], str(tmp_path / 'run')))


@pytest.fixture
def fake_workers(tmp_path, monkeypatch):
  """Local workers run tests/testdata/fake_worker.py; returns a function
  giving what each recorded ({index: {pid, interfaces}})."""
  from generic_trainer.launch import child_process  # pylint: disable=g-import-not-at-top
  records = tmp_path / 'records'
  records.mkdir()
  monkeypatch.setattr(child_process, 'CHILD_MODULE', 'fake_worker')
  monkeypatch.setenv('PYTHONPATH', TESTDATA)
  monkeypatch.setenv('FAKE_WORKER_DIR', str(records))
  monkeypatch.setenv('FAKE_WORKER_MODE', 'ok')
  monkeypatch.delenv('TF_CONFIG', raising=False)
  monkeypatch.delenv(WORKER_NETWORK_ENV, raising=False)

  def recorded():
    found = {}
    for name in os.listdir(records):
      with open(records / name) as f:
        entry = json.load(f)
      found[entry['index']] = entry
    return found
  return recorded


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  return True


def test_a_hung_group_is_ended_naming_the_worker_and_its_step(
    tmp_path, monkeypatch, fake_workers):
  """Two workers alive but making no step for the stall limit: both are
  killed and the error says which stalled (the one behind) and where."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv('FAKE_WORKER_MODE', 'hang')
  monkeypatch.setenv(STALL_LIMIT_ENV, '2')
  started = time.monotonic()
  with pytest.raises(errors.TrainingProcessError) as raised:
    local_cluster.run(_request(tmp_path, 2))
  assert time.monotonic() - started < 30
  message = str(raised.value)
  assert message.startswith(
      'Worker 1 stalled at step 2: no new step for 2 s (worker 0 at step 5), '
      'so every process of the local 2-worker training was ended. Expected a '
      f'new training step at least every 2 s ({STALL_LIMIT_ENV}). Received: '
      'none for 2 s while every process was alive'), message
  assert f'raise {STALL_LIMIT_ENV} (0 turns the watch off)' in message
  workers = fake_workers()
  assert sorted(workers) == [0, 1]
  assert not any(_alive(w['pid']) for w in workers.values())


def test_a_hung_child_process_is_ended_naming_its_step(
    tmp_path, monkeypatch, fake_workers):
  """A child training process (another Keras or backend) that stops making
  steps is killed; the error names it and its step."""
  from generic_trainer.launch import child_process  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv('FAKE_WORKER_MODE', 'hang')
  monkeypatch.setenv(STALL_LIMIT_ENV, '2')
  request = _request(tmp_path, 1)
  with pytest.raises(errors.TrainingProcessError,
                     match=r'^The tf_keras training process stalled at step '
                     r'5: no new step for 2 s, so every process of the '
                     r'training was ended\.'):
    child_process.train_in_child(request, {}, 'tf_keras')
  assert not _alive(fake_workers()[0]['pid'])


def test_a_wrong_stall_limit_is_refused_before_the_start(
    tmp_path, monkeypatch, fake_workers):
  """GENERIC_TRAINER_STALL_S must be seconds >= 0."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(STALL_LIMIT_ENV, 'soon')
  with pytest.raises(errors.InvalidArgumentError,
                     match=f"Received: {STALL_LIMIT_ENV}='soon'"):
    local_cluster.run(_request(tmp_path, 2))
  assert not fake_workers()


def test_local_workers_that_need_the_network_are_refused_before_the_start(
    tmp_path, fake_workers):
  """Workers in a private network (no way out) with a checkpoint on an
  object store: refused, saying what to do; nothing starts."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  if private_network.available():
    pytest.skip('no private network here: ' + private_network.available())
  with pytest.raises(errors.InvalidArgumentError) as raised:
    local_cluster.run(_request(tmp_path, 2, checkpoint_dir='gs://b/ckpt'))
  assert str(raised.value).startswith(
      'num_workers=2 runs the workers on this machine in a network of their '
      'own, with no way out (no port of theirs reachable, and none of the '
      'network reachable from them), but this training reads or writes 1 '
      'path(s) on another machine: gs://b/ckpt. Expected local paths for '
      "local workers. Received: paths with '://'.")
  assert f'set {WORKER_NETWORK_ENV}=host' in str(raised.value)
  assert not fake_workers()


def test_host_network_lets_workers_out(tmp_path, monkeypatch, fake_workers):
  """GENERIC_TRAINER_WORKER_NETWORK=host: the same training runs, its
  workers on this machine's network."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(WORKER_NETWORK_ENV, 'host')
  local_cluster.run(_request(tmp_path, 2, checkpoint_dir='gs://b/ckpt'))
  assert fake_workers()[0]['interfaces'] != ['lo']


def test_a_failed_private_network_start_changes_that_group_only(
    tmp_path, monkeypatch, fake_workers, caplog):
  """A worker the kernel refuses the namespace (its process has a second
  thread from the start: unshare EINVAL): its group runs on reserved
  ports and says why; the next group is private again."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  if private_network.available():
    pytest.skip('no private network here: ' + private_network.available())
  monkeypatch.setenv('PYTHONPATH', os.pathsep.join(
      [os.path.join(TESTDATA, 'threaded_start'), TESTDATA]))
  with caplog.at_level(logging.WARNING):
    local_cluster.run(_request(tmp_path / 'first', 2))
  assert ('starting worker 0 in a private network failed '
          '([Errno 22] unshare(CLONE_NEWUSER|CLONE_NEWNET) failed: Invalid '
          'argument), '
          'so this group (only) runs on reserved ports') in caplog.text
  assert fake_workers()[0]['interfaces'] != ['lo']
  monkeypatch.setenv('PYTHONPATH', TESTDATA)
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    local_cluster.run(_request(tmp_path / 'second', 2))
  assert 'in a private network failed' not in caplog.text
  assert fake_workers()[0]['interfaces'] == ['lo']
  assert fake_workers()[1]['interfaces'] == ['lo']


def test_a_sigterm_while_a_worker_enters_its_network_starts_no_other_group(
    tmp_path, monkeypatch, fake_workers, caplog):
  """A SIGTERM that came while a worker was entering the network (the
  entry, which has no handler, ends of it): the training stops as
  preempted; no group is started on reserved ports in its place."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import preemption  # pylint: disable=g-import-not-at-top
  if private_network.available():
    pytest.skip('no private network here: ' + private_network.available())
  monkeypatch.setenv('PYTHONPATH', os.pathsep.join(
      [os.path.join(TESTDATA, 'threaded_start'), TESTDATA]))
  monkeypatch.setattr(preemption, 'requested', lambda: True)
  with caplog.at_level(logging.WARNING):
    with pytest.raises(errors.PreemptedError):
      local_cluster.run(_request(tmp_path, 2))
  assert 'reserved ports' not in caplog.text
  assert not fake_workers()


def test_private_network_workers_start_beside_busy_grpc_threads(
    tmp_path, monkeypatch, fake_workers, caplog):
  """Groups started by a process whose gRPC is busy (a pipeline's, after
  Beam ran a Transform) run in their private network every time: with
  the preexec_fn the workers entered it in before, gRPC's fork handlers
  made the unshare fail (EINVAL) or aborted the worker."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  if private_network.available():
    pytest.skip('no private network here: ' + private_network.available())
  with busy_grpc.busy():
    for group in range(10):
      with caplog.at_level(logging.WARNING):
        local_cluster.run(_request(tmp_path / str(group), 2))
      assert 'in a private network failed' not in caplog.text
      assert [fake_workers()[i]['interfaces'] for i in (0, 1)] == [
          ['lo'], ['lo']]


_CLOSED_CONSOLE = r'''
import logging, sys
from generic_trainer.system import console
with console.pipeline_console(sys.argv[1]) as say:
  say('== a pipeline')
  logging.getLogger('absl').warning(console._COMPONENT_RUNNING, 'Trainer')
  for i in range(5000):  # 500 KB: more than a pipe holds.
    print('x' * 99, flush=True)
  sys.stderr.write('[worker 1] a line\n')
  logging.getLogger('absl').warning(console._COMPONENT_FINISHED, 'Trainer')
  say('the model is published')
'''


def test_a_closed_terminal_never_ends_a_pipeline_run(tmp_path):
  """stdout and stderr pipes closed by their reader: the run goes on to
  the end, everything in its log, which says the terminal closed."""
  log = tmp_path / 'pipeline.log'
  process = subprocess.Popen(
      [sys.executable, '-c', _CLOSED_CONSOLE, str(log)], cwd=REPO,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=command_env())
  process.stdout.close()
  process.stderr.close()
  assert process.wait(timeout=60) == 0
  text = log.read_text()
  assert text.count('x' * 99) == 5000
  assert '[worker 1] a line' in text
  assert 'the model is published' in text
  assert (f'The terminal\'s output closed (BrokenPipeError); what follows is '
          f'written to this log only: {log}') in text


def test_a_wrong_worker_network_is_refused(tmp_path, monkeypatch,
                                           fake_workers):
  """GENERIC_TRAINER_WORKER_NETWORK must be 'private' or 'host'."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(WORKER_NETWORK_ENV, 'public')
  with pytest.raises(errors.InvalidArgumentError,
                     match=f"Received: {WORKER_NETWORK_ENV}='public'"):
    local_cluster.run(_request(tmp_path, 2, checkpoint_dir='gs://b/c'))
  assert not fake_workers()


def test_the_supervision_messages_have_the_four_parts(monkeypatch):
  """The stall, the settings, the network refusal and the interrupted
  SIGTERM each say what is wrong, Expected, Received, what to do."""
  from message_parts import assert_four_parts  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import stall_watch  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import preemption  # pylint: disable=g-import-not-at-top
  assert_four_parts(stall_watch.message(
      'worker 1 stalled at step 2: no new step for 9 s', 'the training', 9))
  monkeypatch.setattr(private_network, 'why_public', lambda: '')
  for call in (
      lambda: private_network.check_outside_paths(['gs://b/c'], 2),
      lambda: preemption._interrupt(2)(14, None),  # pylint: disable=protected-access
  ):
    with pytest.raises(errors.GenericTrainerError) as raised:
      call()
    assert_four_parts(str(raised.value))
  for name, value, call in ((STALL_LIMIT_ENV, '-1', stall_watch.limit),
                            (WORKER_NETWORK_ENV, 'x', private_network.asked)):
    monkeypatch.setenv(name, value)
    with pytest.raises(errors.InvalidArgumentError) as raised:
      call()
    assert_four_parts(str(raised.value))


def test_the_workers_output_is_kept_in_the_model_run(tmp_path, fake_workers):
  """Each worker's output goes to the run's files, whatever stderr does:
  model_run/worker-logs/worker-<i>.log."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  local_cluster.run(_request(tmp_path, 2))
  logs = tmp_path / 'run' / 'worker-logs'
  assert sorted(os.listdir(logs)) == ['worker-0.log', 'worker-1.log']
  assert 'a fake worker' in (logs / 'worker-1.log').read_text()
