"""A training program starts without the collector's full passes over what
its imports made (`generic_trainer.system.collector`).

Each test runs in a process of its own: a frozen object stays frozen, and
the test process's collector is left as it was.
"""

import json
import subprocess
import sys

import pytest

from conftest import REPO, command_env
from test_cli import SPEC_MODULE

# Records each collection as it starts: (generation, TensorFlow imported or
# being imported, objects frozen at that moment).
_WATCH = '''
import gc, json, sys
collections = []
def watch(phase, info):
  if phase == 'start':
    collections.append((info['generation'], 'tensorflow' in sys.modules,
                        gc.get_freeze_count()))
gc.callbacks.append(watch)
'''


def _run(code: str, *args: str) -> dict:
  proc = subprocess.run([sys.executable, '-c', _WATCH + code, *args],
                        capture_output=True, text=True, env=command_env(),
                        cwd=REPO, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  found = json.loads(proc.stdout.strip().splitlines()[-1])
  found['stderr'] = proc.stderr[-3000:]
  return found


def test_paused_holds_off_collections_then_freezes_what_is_alive():
  """No collection runs while TensorFlow imports in the block; after it,
  what the import made is frozen and the collector runs again; a collector
  the caller had turned off stays off."""
  found = _run('''
from generic_trainer.system import collector
with collector.imports_paused():
  inside = gc.isenabled()
  import tensorflow
during = [c for c in collections if c[1]]
enabled_after = gc.isenabled()
gc.disable()
with collector.imports_paused():
  pass
print(json.dumps({'inside': inside, 'during': during,
                  'enabled_after': enabled_after,
                  'off_stays_off': not gc.isenabled(),
                  'frozen': gc.get_freeze_count()}))
''')
  assert found['inside'] is False
  assert found['during'] == []
  assert found['enabled_after'] is True
  assert found['off_stays_off'] is True
  assert found['frozen'] > 100_000, found  # TensorFlow's objects.


@pytest.mark.slow
def test_the_command_imports_its_training_without_full_collections(
    tmp_path, penguin_csvs):
  """`generic-trainer` loads TensorFlow and the training's modules with no
  full collection, and trains with them frozen."""
  found = _run('''
import runpy
sys.argv = ['generic-trainer'] + sys.argv[1:]
try:
  runpy.run_module('generic_trainer', run_name='__main__')
except SystemExit as e:
  status = e.code
print(json.dumps({
    'status': status,
    'while_importing': [c for c in collections if c[1] and not c[2]],
    'frozen': gc.get_freeze_count()}))
''', '--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '5')
  assert found['status'] == 0, found
  assert found['while_importing'] == []
  assert found['frozen'] > 100_000, found


@pytest.mark.slow
def test_main_called_in_a_process_leaves_its_collector_as_it_was(
    tmp_path, penguin_csvs):
  """`cli.main(argv)` called by a test or a notebook trains without
  freezing anything of its caller's process, nor turning its collector
  off."""
  found = _run('''
from generic_trainer.command import cli
status = cli.main(sys.argv[1:])
print(json.dumps({'status': status, 'frozen': gc.get_freeze_count(),
                  'enabled': gc.isenabled()}))
''', '--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '5')
  assert found['status'] == 0, found
  assert found['frozen'] == 0
  assert found['enabled'] is True
