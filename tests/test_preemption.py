"""SIGTERM saves the step: real processes are sent SIGTERM mid-training and
run again; the rerun repeats no step (`generic_trainer.system.preemption`)."""

import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, TESTDATA
from conftest import checkpoint_point
from conftest import command_env

SLOW_STEP_SPEC = os.path.join(TESTDATA, 'slow_step_spec.py')
RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      'fault_runner.py')
TRAIN_STEPS = 40  # 8 epochs of 5 steps, ~0.1 s a step.
GRACE_S = 30  # Kubernetes's default grace period.


def _steps_by_process(steps_log):
  """[[steps the first process trained], [the second's]...], from the
  `PID STEP` lines slow_step_spec.py writes."""
  by_pid = {}
  with open(steps_log) as f:
    for line in f:
      pid, step = line.split()
      by_pid.setdefault(pid, []).append(int(step))
  return list(by_pid.values())


def _wait_for_step(resume_dirs, process, step, timeout=240):
  deadline = time.monotonic() + timeout
  while (checkpoint_point(resume_dirs) or {}).get('step', 0) < step:
    assert process.poll() is None, process.communicate()[1][-3000:]
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.05)


def _terminate(process):
  """SIGTERM; returns (exit status, stderr, seconds it took to exit)."""
  sent = time.monotonic()
  process.send_signal(signal.SIGTERM)
  _, err = process.communicate(timeout=GRACE_S + 30)
  return process.returncode, err, time.monotonic() - sent


def test_preemption_stop_agrees_on_one_step_through_the_stop_file(tmp_path):
  """In a group the chief, at its first step boundary after SIGTERM, writes
  the next step into the stop file; every worker stops there."""
  from generic_trainer.system import preemption  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers.preemption_stop import PreemptionStop  # pylint: disable=g-import-not-at-top

  class Model:
    stop_training = False

  stop_file = str(tmp_path / 'stop-step')
  chief = PreemptionStop(is_chief=True, stop_file=stop_file)
  worker = PreemptionStop(is_chief=False, stop_file=stop_file)
  for handler in (chief, worker):
    handler.set_model(Model())
    handler.on_train_begin()
  for batch in range(3):
    for handler in (chief, worker):
      handler.on_train_batch_end(batch)
  preemption._requested.set()  # pylint: disable=protected-access
  try:
    worker.on_train_batch_end(3)  # The worker's own SIGTERM is not enough.
    chief.on_train_batch_end(3)
    assert preemption.read_stop_step(stop_file) == 5
    assert not chief.stopping and not worker.stopping
    for handler in (chief, worker):
      handler.on_train_batch_end(4)
      assert handler.stopping and handler.model.stop_training
  finally:
    preemption._requested.clear()  # pylint: disable=protected-access


def test_workers_that_share_no_stop_file_do_not_stop_on_their_own():
  """The workers of a TF_CONFIG cluster cannot agree on a step: SIGTERM
  ends them as before instead (`watches` is False)."""
  from generic_trainer.system import preemption  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers.preemption_stop import PreemptionStop  # pylint: disable=g-import-not-at-top

  class Model:
    stop_training = False

  alone = PreemptionStop(is_chief=True, num_workers=1)
  pod = PreemptionStop(is_chief=True, num_workers=2)
  assert alone.watches and not pod.watches
  preemption._requested.set()  # pylint: disable=protected-access
  try:
    for handler in (alone, pod):
      handler.set_model(Model())
      handler.on_train_begin()
      handler.on_train_batch_end(0)
    assert alone.stopping and not pod.stopping
  finally:
    preemption._requested.clear()  # pylint: disable=protected-access


@pytest.mark.slow
def test_sigterm_saves_the_step_and_the_command_resumes_there(
    tmp_path, penguin_csvs):
  """SIGTERM to the command mid-training: it exits 143 within the grace
  period with the step it stopped at saved and nothing published; the same
  command resumes at that step, repeats none, and publishes."""
  out = tmp_path / 'out'
  command = [sys.executable, '-m', 'generic_trainer', '--module-file',
             SLOW_STEP_SPEC, '--train-data', penguin_csvs[0], '--output-dir',
             str(out), '--steps', str(TRAIN_STEPS), '--progress', 'lines']
  first = subprocess.Popen(command, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True,
                           env=command_env(), cwd=REPO)
  _wait_for_step(str(out / '.resume-*'), first, 7)
  code, err, seconds = _terminate(first)
  assert code == 143, err[-3000:]
  assert seconds < GRACE_S
  [checkpoint] = glob.glob(str(out / '.resume-*'))
  point = checkpoint_point(checkpoint)
  [trained] = _steps_by_process(out / 'run' / 'steps.log')
  assert point['step'] == trained[-1] and not point['stopped']
  epoch, batch = divmod(point['step'], 5)
  where = (f'step {point["step"]} (epoch {epoch + 1}, batch {batch})' if batch
           else f'step {point["step"]} (the end of epoch {epoch})')
  assert (f'generic-trainer: PreemptedError: SIGTERM stopped the training at '
          f'{where} and saved that step in the resume checkpoint in '
          f'{checkpoint}; nothing was exported or published. Run the same '
          'training again (the same command, or the pipeline on the same '
          f'inputs): it resumes at step {point["step"]}, repeating no step.'
          ) in err
  # The last line: where it stopped, what holds it, the command that resumes.
  assert err.rstrip('\n').rsplit('\n', 1)[-1] == (
      f'generic-trainer: stopped by SIGTERM at {where}; the resume checkpoint '
      f'in {checkpoint} holds {where}. To resume there, run the same command: '
      + shlex.join(['generic-trainer', *command[3:]]))
  assert not (out / 'model').exists()

  second = subprocess.run(command, capture_output=True, text=True,
                          env=command_env(), cwd=REPO, timeout=600,
                          check=False)
  assert second.returncode == 0, second.stderr[-3000:]
  # A resumed run keeps the earlier run's records (run/): both processes'.
  before, resumed = _steps_by_process(out / 'run' / 'steps.log')
  assert before == trained
  assert resumed == list(range(point['step'] + 1, TRAIN_STEPS + 1))
  with open(out / 'run' / 'train_result.json') as f:
    result = json.load(f)
  assert (result['resumed_from_step'], result['steps']) == (point['step'],
                                                            TRAIN_STEPS)
  assert (out / 'model' / 'saved_model.pb').is_file()
  assert not glob.glob(str(out / '.resume-*'))


@pytest.mark.slow
def test_sigterm_in_a_pipeline_execution_saves_the_step(tmp_path):
  """SIGTERM to a process running GenericExecutor.Do: PreemptedError,
  the step saved, nothing published; the next attempt repeats no step."""
  workdir = str(tmp_path)

  def start(attempt):
    return subprocess.Popen(
        [sys.executable, RUNNER, workdir, str(attempt), SLOW_STEP_SPEC,
         str(TRAIN_STEPS)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=command_env())

  resume_dirs = os.path.join(workdir, 'swd', 'resume-*')
  first = start(1)
  _wait_for_step(resume_dirs, first, 5)
  code, err, seconds = _terminate(first)
  assert code == 1 and seconds < GRACE_S, err[-3000:]
  point = checkpoint_point(resume_dirs)
  assert re.search(
      r'generic_trainer\.errors\.PreemptedError: SIGTERM stopped the '
      rf"training at step {point['step']} .* it resumes at step "
      rf"{point['step']}, repeating no step\.", err), err[-3000:]
  steps_log = os.path.join(workdir, 'model_run', 'steps.log')
  [trained] = _steps_by_process(steps_log)
  assert point['step'] == trained[-1]
  assert not os.path.exists(os.path.join(workdir, 'model', 'Format-Serving'))

  second = start(2)
  _, err = second.communicate(timeout=300)
  assert second.returncode == 0, err[-3000:]
  _, resumed = _steps_by_process(steps_log)
  assert resumed == list(range(point['step'] + 1, TRAIN_STEPS + 1))
  assert os.path.exists(os.path.join(workdir, 'model', 'Format-Serving',
                                     'saved_model.pb'))


@pytest.mark.slow
def test_sigterm_while_user_code_blocks_leaves_with_the_last_checkpoint(
    tmp_path, penguin_csvs):
  """SIGTERM while a handler waits forever (no step boundary comes): the
  command is interrupted after the step wait, says so, keeps the last
  resume checkpoint, removes its TMPDIR folders and exits 143, well inside
  the grace period."""
  out, tmp = tmp_path / 'out', tmp_path / 'tmp'
  tmp.mkdir()
  env = dict(command_env(), TMPDIR=str(tmp),
             GENERIC_TRAINER_PREEMPTION_STEP_WAIT_S='2')
  process = subprocess.Popen(
      [sys.executable, '-m', 'generic_trainer', '--module-file',
       os.path.join(TESTDATA, 'blocking_handler_spec.py'), '--train-data',
       penguin_csvs[0], '--output-dir', str(out), '--steps',
       str(TRAIN_STEPS), '--progress', 'lines'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
      cwd=REPO)
  blocked = out / 'run' / 'blocked'
  deadline = time.monotonic() + 240
  while not blocked.exists():
    assert process.poll() is None, process.communicate()[1][-3000:]
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.05)
  code, err, seconds = _terminate(process)
  assert code == 143, err[-3000:]
  assert seconds < 10, seconds
  [checkpoint] = glob.glob(str(out / '.resume-*'))
  point = checkpoint_point(checkpoint)
  assert 4 <= point['step'] <= 6  # Saved every 2 steps and each epoch.
  assert ('generic-trainer: PreemptedError: SIGTERM arrived 2 s ago and the '
          'training reached no step boundary since: user code blocks') in err
  assert (f'It leaves with the last resume checkpoint: '
          f'step {point["step"]}') in err
  last = err.rstrip('\n').rsplit('\n', 1)[-1]
  assert re.fullmatch(
      r'generic-trainer: stopped by SIGTERM at epoch \d+, step \d+ of TrainSpec '
      r"BlockingPenguinSpec's Keras fit; the resume checkpoint in "
      + re.escape(f'{checkpoint} holds step {point["step"]} ') + r'.*'
      r'To resume there, run the same command: generic-trainer .*', last), last
  assert not (out / 'model').exists()
  assert not os.listdir(tmp), os.listdir(tmp)
