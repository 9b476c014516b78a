"""Fault injection with real processes: SIGKILL the trainer, run it again.

Each attempt is a separate `tests/fault_runner.py` process on the same
artifacts, as an orchestrator's retry is; or the generic-trainer command
on the same output folder, killed while it publishes.
"""

import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, TESTDATA
from conftest import checkpoint_point

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      'fault_runner.py')
TRAIN_STEPS = 40  # 8 epochs of 5 steps; ~0.1 s a step (slow_spec.py).
STEPS_PER_EPOCH = 5
EVERY_STEPS = 2  # slow_step_spec.py's checkpoint interval.
TRIALS = 5  # Random kill points; `make test` runs the first, `make soak` all.


def _start(workdir, attempt, module, steps, custom_config='null'):
  log = open(os.path.join(workdir, f'attempt-{attempt}.log'), 'w')
  return subprocess.Popen(
      [sys.executable, RUNNER, workdir, str(attempt),
       os.path.join(TESTDATA, module), str(steps), custom_config],
      stdout=log, stderr=subprocess.STDOUT)


def _wait_for(predicate, process, timeout=240):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    value = predicate()
    if value:
      return value
    if process.poll() is not None:
      raise AssertionError(f'attempt ended (code {process.returncode}) '
                           'before the point to kill it')
    time.sleep(0.05)
  process.kill()
  raise AssertionError('timed out waiting for the point to kill')


def _checkpoint(workdir):
  return checkpoint_point(os.path.join(workdir, 'swd', 'resume-*'))


def _steps_by_attempt(workdir):
  """[[steps the first process trained], [the second's]...], from the
  `PID STEP` lines slow_step_spec.py writes."""
  by_pid = {}
  with open(os.path.join(workdir, 'model_run', 'steps.log')) as f:
    for line in f:
      pid, step = line.split()
      by_pid.setdefault(pid, []).append(int(step))
  return list(by_pid.values())


def _log(workdir, attempt):
  with open(os.path.join(workdir, f'attempt-{attempt}.log')) as f:
    return f.read()[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize('trial', [0] + [
    pytest.param(t, marks=pytest.mark.soak) for t in range(1, TRIALS)])
def test_killed_training_resumes_at_the_step_of_its_last_checkpoint(
    tmp_path, trial):
  """SIGKILL at a random step; the next attempt resumes at the step of the
  last checkpoint (every 2 steps), trains exactly the remaining steps, and
  publishes a valid model."""
  rng = random.Random(trial)
  workdir = str(tmp_path)
  first = _start(workdir, 1, 'slow_step_spec.py', TRAIN_STEPS)
  kill_after = rng.randint(4, 30)
  _wait_for(lambda: (_checkpoint(workdir) or {}).get('step', 0) >= kill_after,
            first)
  time.sleep(rng.uniform(0.0, 0.4))
  first.send_signal(signal.SIGKILL)
  first.wait()
  left = _checkpoint(workdir)
  assert not os.path.exists(os.path.join(workdir, 'model', 'Format-Serving'))

  second = _start(workdir, 2, 'slow_step_spec.py', TRAIN_STEPS)
  assert second.wait(timeout=300) == 0, _log(workdir, 2)
  with open(os.path.join(workdir, 'model_run', 'train_result.json')) as f:
    result = json.load(f)
  killed, resumed = _steps_by_attempt(workdir)
  assert left['step'] >= kill_after
  assert (result['resumed_from_epoch'], result['resumed_from_batch']) == (
      divmod(left['step'], STEPS_PER_EPOCH))
  assert result['resumed_from_step'] == left['step']
  assert resumed == list(range(left['step'] + 1, TRAIN_STEPS + 1))
  assert killed[-1] - left['step'] <= EVERY_STEPS  # Repeated: one interval.
  assert result['steps'] == TRAIN_STEPS
  assert os.path.exists(os.path.join(workdir, 'model', 'Format-Serving',
                                     'saved_model.pb'))
  assert not glob.glob(os.path.join(workdir, 'swd', 'resume-*'))


@pytest.mark.slow
def test_kill_during_export_publishes_nothing_and_retry_succeeds(tmp_path):
  """SIGKILL while run_fn is still exporting: no model is published; the
  next attempt succeeds."""
  workdir = str(tmp_path)
  first = _start(workdir, 1, 'slow_export.py', 1, '{"linger_s": 120}')
  _wait_for(lambda: os.path.exists(os.path.join(workdir, 'model_run',
                                                'exporting')), first)
  first.send_signal(signal.SIGKILL)
  first.wait()
  model_dir = os.path.join(workdir, 'model')
  assert not os.path.exists(os.path.join(model_dir, 'Format-Serving'))
  second = _start(workdir, 2, 'slow_export.py', 1)
  assert second.wait(timeout=300) == 0, _log(workdir, 2)
  assert sorted(os.listdir(model_dir)) == ['Format-Serving']


@pytest.mark.slow
def test_kill_during_a_cache_eviction_leaves_a_cache_the_next_run_repairs(
    tmp_path_factory):
  """SIGKILL inside the removal of an evicted parsed rows entry: no entry
  is left half in place; the next training removes what the kill left,
  reads every file right (hit, or a miss it writes again), and the one
  after hits every file."""
  from test_kept_rows import _decisions, _kept_twice, _read, _same, _write  # pylint: disable=g-import-not-at-top
  from generic_trainer.data.kept import cache as kept_cache  # pylint: disable=g-import-not-at-top
  from generic_trainer.data.kept import entry as kept_entry  # pylint: disable=g-import-not-at-top
  workdir = tmp_path_factory.mktemp('evict')
  files = [str(workdir / 'Examples' / '1' / 'Split-train' / f'data-{i}.gz')
           for i in range(2)]
  for path in files:
    _write(path, 3000)
  folder = workdir / 'parsed-rows'
  _kept_twice(files, folder)
  with open(workdir / 'evict.log', 'w') as log:
    evicting = subprocess.Popen(
        [sys.executable, RUNNER, 'evict', str(folder), '1'], stdout=log,
        stderr=subprocess.STDOUT)
  _wait_for(lambda: os.path.exists(workdir / 'evicting'), evicting, 120)
  evicting.send_signal(signal.SIGKILL)
  evicting.wait()
  for name in os.listdir(folder):  # In place: whole, or not there.
    if not name.startswith(kept_entry.TEMP) and os.path.isdir(folder / name):
      assert sorted(os.listdir(folder / name)) == [
          kept_entry.BLOCKS, kept_entry.MANIFEST]
  assert any(n.startswith(kept_entry.TEMP) for n in os.listdir(folder))
  with kept_cache.SpanCache(str(folder)) as store:
    assert _same(_read(files, store), _read(files))
  for decision in store.decisions.values():
    assert decision['decision'] == 'hit' or (
        decision['why'] == 'no entry' and decision['written']), decision
  assert not [n for n in os.listdir(folder)
              if n.startswith(kept_entry.TEMP)]
  with kept_cache.SpanCache(str(folder)) as store:
    _read(files, store)
  assert set(d for d, _ in _decisions(store).values()) == {'hit'}


@pytest.mark.parametrize('trial, exchange', [(0, True)] + [
    pytest.param(t, t % 2 == 0, marks=pytest.mark.soak)
    for t in range(1, TRIALS)])
def test_kill_during_publication_keeps_the_runs_records(
    tmp_path, penguin_csvs, trial, exchange):
  """SIGKILL at a random moment of the command's publication (model/ being
  replaced, the checkpoint removed), then the same command again: a model
  in model/, a real folder, and the run's records (history.json, the best
  checkpoint, train_result.json) all there."""
  rng = random.Random(trial)
  with open(os.path.join(REPO, 'module_files', 'penguin_spec.py')) as f:
    source = f.read().replace(
        '  epochs = 5\n', "  epochs = 5\n  checkpoint = {'best_only': True}\n")
  module = tmp_path / 'best_only_spec.py'
  module.write_text(source)
  out = str(tmp_path / 'out')
  options = [] if exchange else ['no-exchange']

  def start(*extra):
    log = open(os.path.join(str(tmp_path), f'attempt-{len(extra)}.log'), 'w')
    return subprocess.Popen(
        [sys.executable, RUNNER, 'command', out, str(module), penguin_csvs[0],
         '5', *extra, *options], stdout=log, stderr=subprocess.STDOUT)

  first = start('slow-publication')
  _wait_for(lambda: os.path.exists(out + '.publishing'), first)
  # Each step of the publication takes 0.25 s more: the first trial kills
  # while model/ is replaced, the others anywhere up to the checkpoint's
  # removal.
  time.sleep(rng.uniform(0.1, 0.6) if trial == 0 else rng.uniform(0.0, 1.2))
  first.send_signal(signal.SIGKILL)
  first.wait()
  assert start().wait(timeout=300) == 0, _log(str(tmp_path), 0)
  model = os.path.join(out, 'model')
  assert not os.path.islink(model)
  assert os.path.isfile(os.path.join(model, 'saved_model.pb'))
  run = os.path.join(out, 'run')
  with open(os.path.join(run, 'history.json')) as f:
    assert [e['epoch'] for e in json.load(f)] == [1, 2, 3, 4, 5]
  assert os.path.isfile(os.path.join(run, 'checkpoints', 'best.weights.h5'))
  with open(os.path.join(run, 'train_result.json')) as f:
    assert json.load(f)['steps'] == 5
  assert not glob.glob(os.path.join(out, '.resume-*'))
