"""A training process starts and trains without the collector's full
passes over what it made before (`generic_trainer.system.collector`).

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


def test_training_freezes_what_was_there_and_gives_it_back():
  """In the block, what was alive is frozen; after it, unfrozen, and a
  cycle made before is collected. A process frozen before (the command)
  stays frozen; a block inside another thread's block leaves the unfreeze
  to the first."""
  found = _run('''
import threading
from generic_trainer.system import collector
class Node:
  pass
cycle = Node(); cycle.me = cycle
import weakref
ref = weakref.ref(cycle)
with collector.training():
  inside = gc.get_freeze_count()
  del cycle
  gc.collect()
  kept_inside = ref() is not None
  with collector.training():  # Another training in this process.
    pass
  nested_left_it = gc.get_freeze_count() > 0
after = gc.get_freeze_count()
gc.collect()
collected_after = ref() is None
collector.freeze()
with collector.training():
  pass
print(json.dumps({'inside': inside, 'kept_inside': kept_inside,
                  'nested_left_it': nested_left_it, 'after': after,
                  'collected_after': collected_after,
                  'frozen_stays': gc.get_freeze_count() > 0}))
''')
  assert found['inside'] > 1000, found
  assert found['kept_inside'] is True  # Frozen: not scanned.
  assert found['nested_left_it'] is True
  assert found['after'] == 0
  assert found['collected_after'] is True
  assert found['frozen_stays'] is True


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
