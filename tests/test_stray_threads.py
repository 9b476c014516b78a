"""Threads user code leaves running (`usercode.stray_threads`): made daemons
and named, so that neither the command nor a pipeline script waits on
them."""

import os
import subprocess
import sys
import time

import pytest

from command_line import module_file as _module
from conftest import REPO, TESTDATA, command_env


# User code cannot keep the process alive.
_PIPELINE_SCRIPT = '''
import os, sys, textwrap, time
sys.path.insert(0, {tests!r})
from conftest import write_penguin_artifacts
from tfx.types import standard_artifacts
from generic_trainer.component.executor import GenericExecutor

root = {root!r}
examples, schema = write_penguin_artifacts(os.path.join(root, 'data'))
module = os.path.join(root, 'leaves_a_thread.py')
with open(module, 'w') as f:
  f.write(textwrap.dedent("""
      import sys, threading, time
      sys.path.insert(0, {testdata!r})
      from records_fn_args import run_fn as _record

      def run_fn(fn_args):
        threading.Thread(target=time.sleep, args=(3600,),
                         name='forever').start()
        _record(fn_args)
      """))
model = standard_artifacts.Model()
model.uri = os.path.join(root, 'model')
model_run = standard_artifacts.ModelRun()
model_run.uri = os.path.join(root, 'model_run')
GenericExecutor().Do(
    {{'examples': [examples], 'schema': [schema]}},
    {{'model': [model], 'model_run': [model_run]}},
    {{'train_args': '{{"num_steps": 2}}', 'eval_args': '{{"num_steps": 1}}',
     'custom_config': 'null', 'module_file': module}})
print('pipeline done', flush=True)
'''


@pytest.mark.slow
def test_thread_left_by_run_fn_does_not_keep_a_pipeline_script_alive(
    tmp_path):
  """A user's own script that runs the executor (as LocalDagRunner does, in
  its process) exits once the run ends, though run_fn left a non-daemon
  thread sleeping an hour; the log names the thread."""
  from conftest import TESTDATA  # pylint: disable=g-import-not-at-top
  script = tmp_path / 'my_pipeline.py'
  script.write_text(_PIPELINE_SCRIPT.format(
      tests=os.path.join(REPO, 'tests'), root=str(tmp_path),
      testdata=TESTDATA))
  start = time.monotonic()
  proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                        text=True, env=command_env(), cwd=str(tmp_path),
                        timeout=240, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'pipeline done' in proc.stdout
  assert ('left 1 non-daemon thread(s) running (forever). Expected user code '
          'to join its threads before returning') in proc.stderr
  assert time.monotonic() - start < 200


def test_stray_threads_become_daemons_and_are_named(caplog):
  """The mechanism itself: a non-daemon thread started by user code is a
  daemon afterwards, and not joined at exit."""
  import threading  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import stray_threads  # pylint: disable=g-import-not-at-top
  before = set(threading.enumerate())
  stop = threading.Event()
  thread = threading.Thread(target=stop.wait, name='uploader')
  thread.start()
  try:
    assert stray_threads.release(before, 'run_fn') == ['uploader']
    assert thread.daemon
    assert thread._tstate_lock not in threading._shutdown_locks  # pylint: disable=protected-access
  finally:
    stop.set()
    thread.join()
  assert 'run_fn left 1 non-daemon thread(s) running (uploader)' in (
      caplog.text)


def _command(*args, timeout=600):
  return subprocess.run([sys.executable, '-m', 'generic_trainer', *args],
                        capture_output=True, text=True, env=command_env(),
                        cwd=REPO, timeout=timeout, check=False)


@pytest.mark.slow
def test_threads_left_running_do_not_keep_the_command_alive(tmp_path,
                                                             penguin_csvs):
  """A run_fn that leaves a non-daemon thread: the command publishes, says
  so, and exits instead of waiting forever."""
  module = _module(tmp_path, 'leaves_a_thread', f'''
      import sys, threading, time
      sys.path.insert(0, {TESTDATA!r})
      from records_fn_args import run_fn as _record

      def run_fn(fn_args):
        threading.Thread(target=time.sleep, args=(3600,),
                         name='forever').start()
        _record(fn_args)
      ''')
  out = tmp_path / 'out'
  start = time.monotonic()
  proc = _command('--module-file', module, '--train-data', penguin_csvs[0],
                  '--output-dir', str(out), timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert ('Note: user code left 1 thread(s) running (forever); exiting '
          'without waiting for them.') in proc.stderr
  assert (out / 'model' / 'saved_model.pb').is_file()
  assert time.monotonic() - start < 240
