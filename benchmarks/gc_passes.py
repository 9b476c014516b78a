"""Each full garbage collection of the command up to its first step.

    python -m benchmarks.gc_passes              # the command of (d)
    python -m benchmarks.gc_passes --json F

Runs benchmark (d)'s command (`first_step._command`: the benchmark's
TrainSpec on the main data's eval split, 32 steps) in a process of its
own whose `gc.callbacks` record every full (generation 2) collection:
when it started (seconds since the process started), how long it took,
the objects it freed and the objects the collector tracked then, and
whether it came before the first step's line. The objects frozen
(`gc.freeze`, `generic_trainer.system.collector`) are counted apart:
collections do not scan them. Nothing is asserted.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from benchmarks import first_step
from benchmarks import synthetic_data

# Run before the command: the hook (importing nothing heavy, so that the
# command imports as it does alone), then the command as its console script
# runs it; the records go to the file named by GT_COLLECTIONS_OUT at exit.
# The first step is read from the command's own line.
_HOOK = '''
import atexit, gc, json, os, sys, time
from generic_trainer.command import cli as _cli  # Light: no TensorFlow.
_t0 = _cli._STARTED  # The process's start, as the first step's line counts.
_records, _start = [], {}
def _watch(phase, info):
  if info['generation'] != 2:
    return
  if phase == 'start':
    _start['t'] = time.monotonic()
    _start['tracked'] = len(gc.get_objects())
    _start['frozen'] = gc.get_freeze_count()
  else:
    _records.append({'at_s': round(_start['t'] - _t0, 3),
                     'took_s': round(time.monotonic() - _start['t'], 4),
                     'freed': info['collected'],
                     'tracked': _start['tracked'],
                     'frozen': _start['frozen']})
gc.callbacks.append(_watch)
@atexit.register
def _write():
  with open(os.environ['GT_COLLECTIONS_OUT'], 'w') as f:
    json.dump(_records, f)
import runpy
sys.argv = ['generic-trainer'] + sys.argv[1:]
runpy.run_module('generic_trainer', run_name='__main__')
'''


def measure(data_dir: str, rows: int) -> dict:
  """{'collections': [...], 'first_step_s': s} of one run of the command."""
  data = synthetic_data.main_set(data_dir, rows)
  command = first_step._command(data)  # pylint: disable=protected-access
  args = command[command.index('--module-file'):]
  with tempfile.TemporaryDirectory() as work:
    out = os.path.join(work, 'collections.json')
    cache = os.path.join(work, 'cache')
    os.makedirs(cache, mode=0o700)
    env = dict(os.environ, GT_COLLECTIONS_OUT=out, XDG_CACHE_HOME=cache,
               PYTHONPATH=os.pathsep.join(
                   p for p in (first_step.ROOT, os.environ.get('PYTHONPATH'))
                   if p))
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    proc = subprocess.run(
        [sys.executable, '-c', _HOOK, *args, '--output-dir',
         os.path.join(work, 'out')], env=env, capture_output=True, text=True,
        check=False)
    if proc.returncode:
      raise SystemExit(f'the command failed ({proc.returncode}):\n'
                       f'{proc.stderr[-3000:]}')
    with open(out) as f:
      records = json.load(f)
  mark = first_step.FIRST_STEP.search(proc.stdout)
  first = float(mark.group(1)) if mark else None
  collections = [dict(r, before_first_step=first is not None and
                      r['at_s'] < first) for r in records]
  return {'first_step_s': first, 'collections': collections}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--data-dir', default=synthetic_data.DATA_DIR)
  parser.add_argument('--rows', type=int, default=1_000_000,
                      help="the main data set's train rows, as benchmarks.run's")
  parser.add_argument('--json', help='also write the figures here')
  args = parser.parse_args(argv)
  found = measure(args.data_dir, args.rows)
  before = [c for c in found['collections'] if c['before_first_step']]
  print(f'first step after {found["first_step_s"]} s; '
        f'{len(before)} full collection(s) before it, '
        f'{sum(c["took_s"] for c in before):.3f} s in all')
  for c in found['collections']:
    print(f'  at {c["at_s"]:.2f} s: {c["took_s"] * 1000:.0f} ms, freed '
          f'{c["freed"]}, {c["tracked"]} objects tracked, {c["frozen"]} '
          f'frozen' + ('' if c['before_first_step'] else ' (after it)'))
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(dict(found, command='python -m benchmarks.gc_passes '
                     + ' '.join(argv or sys.argv[1:])), f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main())
