"""A child training process (`launch.child_process.start`) starts whatever
the starting process's gRPC is doing, dies with the process that started
it, and ends at once when that process is already gone."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from conftest import REPO, command_env

TESTDATA = os.path.join(REPO, 'tests', 'testdata')

# Starts STARTS children with `child_process.start` while gRPC is busy
# (`busy_grpc`); prints the exit statuses counted.
_BESIDE_BUSY_GRPC = textwrap.dedent('''
    import collections, os, sys
    import busy_grpc
    from generic_trainer.launch import child_process

    child_process.CHILD_MODULE = 'exits_zero'
    statuses = collections.Counter()
    with busy_grpc.busy():
      for _ in range(int(sys.argv[1])):
        statuses[child_process.start('unused', dict(os.environ)).wait()] += 1
    print(dict(statuses))
    ''')


def _env():
  env = command_env()
  env['PYTHONPATH'] = os.pathsep.join(
      [TESTDATA, os.path.join(REPO, 'tests'), env['PYTHONPATH']])
  return env


def test_children_start_beside_busy_grpc_threads():
  """300 children started beside busy gRPC threads all run: with a
  preexec_fn (the code before), gRPC's fork handlers aborted 3 of them
  before exec, each reported as a training killed by SIGABRT."""
  process = subprocess.run(
      [sys.executable, '-c', _BESIDE_BUSY_GRPC, '300'], env=_env(),
      capture_output=True, text=True, timeout=600, check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  assert process.stdout.strip().splitlines()[-1] == '{0: 300}'


def _gone(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/status') as f:
      return 'State:\tZ' in f.read()
  except FileNotFoundError:
    return True


def test_a_child_dies_with_the_process_that_started_it(tmp_path):
  """The process that started a child is SIGKILLed: the child, which asked
  for it itself, gets SIGKILL too."""
  ready = tmp_path / 'ready'
  middle = subprocess.Popen(
      [sys.executable, '-c', textwrap.dedent('''
          import os, sys, time
          from generic_trainer.launch import child_process
          child_process.CHILD_MODULE = 'sleeps_with_parent'
          child = child_process.start(sys.argv[1], dict(os.environ))
          print(child.pid, flush=True)
          time.sleep(120)
          '''), str(ready)],
      env=_env(), stdout=subprocess.PIPE, text=True)
  child = int(middle.stdout.readline())
  try:
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
      time.sleep(0.05)
    assert ready.exists() and not _gone(child)
    middle.kill()
    middle.wait()
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
      time.sleep(0.05)
    assert _gone(child)
  finally:
    if not _gone(child):
      os.kill(child, signal.SIGKILL)


def test_a_child_whose_starter_is_already_gone_ends_saying_so(tmp_path):
  """Started by a process that is not its parent any more (here: a pid
  that never was its parent): it ends with status 1 before doing anything,
  saying why."""
  env = dict(_env(), GENERIC_TRAINER_PARENT_PID='1')
  process = subprocess.run(
      [sys.executable, '-m', 'sleeps_with_parent', str(tmp_path / 'ready')],
      env=env, capture_output=True, text=True, timeout=120, check=False)
  assert (process.returncode, process.stderr.strip()) == (
      1, 'The process that started this training (pid 1) ended before it '
      'began; nothing was trained.')
  assert not (tmp_path / 'ready').exists()
