"""(d): seconds to the command's first training step, as a new user meets
them, against TensorFlow's own import in the same run.

`benchmarks.run --only d` calls `measure`. Each round runs, each in a
fresh process, started in turns so that a slow spell hits both sides:

  - the yardstick: `python -c "import tensorflow; print(...)"`, timed from
    the process's start to its line (and to its exit, `wall_s`, which
    adds TensorFlow's teardown and is kept apart);
  - the command as a user types it: the venv's `generic-trainer` console
    script with the benchmark's TrainSpec on the eval split, 32 steps,
    timed from the start to its line `first training step after X s`.

Twice per round: "cold", with the operating system's page cache dropped
before each process (`/proc/sys/vm/drop_caches`; needs root: elsewhere the
report says the cache was not dropped), as the first run after a restart or
after other work pushed the files out of memory meets it; and "warm", the
files in memory, as a second run meets it. Each command run gets a cache
folder of its own (XDG_CACHE_HOME): nothing kept by an earlier run, as for
a new user.

The children run without PYTHONDONTWRITEBYTECODE (a user's shell does not
set it; root's on this project's machines does): one unmeasured run of each
side first writes the compiled modules a first run writes, so that the
rounds time what every later start pays, as after `pip install`, which
compiles them at install.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from benchmarks import peak_memory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST_STEP = re.compile(r'first training step after ([0-9.]+) s')
IMPORTED = 'tensorflow imported'
DROP_CACHES = '/proc/sys/vm/drop_caches'
STARTS = ('cold', 'warm')
LINE_START = 48  # Of each line the command prints: enough to name it.


def measure(data: Dict[str, str], work: str, repeats: int,
            cpu_ticks, contention) -> Dict[str, dict]:
  """{variant: {'records': [...], 'peak_rss_mb': MB up to its line}} for
  the variants `tensorflow_import` and `cli_first_step` (cold starts) and
  `tensorflow_import_warm` and `cli_first_step_warm`; `data` is the
  benchmark's main data set (`eval`, `schema`). `cpu_ticks` and
  `contention` are `benchmarks.run`'s, for each record's CPU steal and
  other processes' cores."""
  env = {k: v for k, v in os.environ.items()
         if k != 'PYTHONDONTWRITEBYTECODE'}
  command = _command(data)
  dropped = _drop_page_cache()
  runs = {name: {'records': [], 'peak_rss_mb': 0.0,
                 'page_cache_dropped': dropped if start == 'cold' else False}
          for start in STARTS
          for name in (_name('tensorflow_import', start),
                       _name('cli_first_step', start))}
  # The first run of each, unmeasured: what it compiles, later starts read.
  _timed_to_line([sys.executable, '-c', _YARDSTICK], IMPORTED, env,
                 os.path.join(work, 'first-import.log'))
  _timed_to_line(command + ['--output-dir', os.path.join(work, 'first-cli')],
                 FIRST_STEP, _own_cache(env, work, 'first-cli'),
                 os.path.join(work, 'first-cli.log'))
  for repeat in range(repeats):
    sides = [('tensorflow_import', None), ('cli_first_step', command)]
    if repeat % 2:
      sides.reverse()
    for start in STARTS:
      for side, cli in sides:
        label = f'{side}-{start}-{repeat}'
        if cli is None:
          argv, pattern, child_env = ([sys.executable, '-c', _YARDSTICK],
                                      IMPORTED, env)
        else:
          out = os.path.join(work, label)
          shutil.rmtree(out, ignore_errors=True)
          argv, pattern, child_env = (cli + ['--output-dir', out], FIRST_STEP,
                                      _own_cache(env, work, label))
        if start == 'cold' and dropped:
          _drop_page_cache()
        before = cpu_ticks()
        seen, wall, cpu_s, peak, lines = _timed_to_line(
            argv, pattern, child_env, os.path.join(work, f'{label}.log'))
        steal, others = contention(before, cpu_ticks(), cpu_s)
        run = runs[_name(side, start)]
        key = 'wall_s' if cli is None else 'first_step_s'
        record = {key: seen, 'round': repeat + 1, 'cpu_steal': steal,
                  'cpu_others': others}
        if cli is None:
          record['exit_s'] = wall
        else:
          record['lines'] = lines
        run['records'].append(record)
        run['peak_rss_mb'] = max(run['peak_rss_mb'], peak)
  return runs


# The yardstick prints once TensorFlow is imported: timed to that line, as
# the command is timed to its own, not to the end of TensorFlow's teardown.
_YARDSTICK = f'import tensorflow; print({IMPORTED!r}, flush=True)'


def _name(side: str, start: str) -> str:
  return side if start == 'cold' else f'{side}_warm'


def _command(data: Dict[str, str]) -> List[str]:
  """The command as the venv installs it, else `python -m generic_trainer`."""
  from benchmarks.variants import SPEC_MODULE  # pylint: disable=g-import-not-at-top
  script = os.path.join(os.path.dirname(sys.executable), 'generic-trainer')
  head = [script] if os.access(script, os.X_OK) else [
      sys.executable, '-m', 'generic_trainer']
  return head + ['--module-file', SPEC_MODULE,
                 '--train-data', os.path.join(data['eval'], '*'),
                 '--eval-data', os.path.join(data['eval'], '*'),
                 '--schema', data['schema'], '--steps', '32',
                 '--progress', 'lines']


def _own_cache(env: Dict[str, str], work: str, label: str) -> Dict[str, str]:
  """`env` for the command: a new, empty XDG_CACHE_HOME of this run's own,
  and this checkout on PYTHONPATH (the benchmark's module imports
  `benchmarks`, which the console script does not find by itself)."""
  cache = os.path.join(work, f'{label}-cache')
  shutil.rmtree(cache, ignore_errors=True)
  os.makedirs(cache, mode=0o700)
  path = os.pathsep.join(p for p in (ROOT, env.get('PYTHONPATH')) if p)
  return dict(env, XDG_CACHE_HOME=cache, PYTHONPATH=path)


def _drop_page_cache() -> bool:
  """Writes the dirty pages out and drops the page cache: True, or False
  where this process may not (not root, or a container)."""
  os.sync()
  try:
    with open(DROP_CACHES, 'w') as f:
      f.write('3\n')
  except OSError:
    return False
  return True


def _timed_to_line(argv: List[str], pattern, env: Dict[str, str],
                   log_path: str
                   ) -> Tuple[float, float, float, float, List[list]]:
  """Runs `argv` to its end: (seconds from its start to the first line
  matching `pattern` (a str is looked for as is), seconds to its exit, its
  CPU seconds, its own peak RSS in MB up to that line (its VmHWM then: the
  wait's ru_maxrss would hold this process's peak, `peak_memory`), and
  [seconds, line's start] of every line up to that one: when each stage of
  the command ended). Raises RuntimeError, naming the log, when it fails
  or prints no such line."""
  started = time.monotonic()
  seen: Optional[float] = None
  peak = 0.0
  lines = []
  with open(log_path, 'w') as log:
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
    for line in process.stdout:
      log.write(line)
      if seen is None:
        lines.append([round(time.monotonic() - started, 3), line[:LINE_START]])
      if seen is None and (pattern in line if isinstance(pattern, str)
                           else pattern.search(line)):
        seen = time.monotonic() - started
        peak = peak_memory.peak_mb(process.pid) or 0.0
    _, status, usage = os.wait4(process.pid, 0)
  wall = time.monotonic() - started
  if os.waitstatus_to_exitcode(status) or seen is None:
    raise RuntimeError(f'{" ".join(argv)} failed or printed no line '
                       f'matching {pattern!r}; see {log_path}.')
  return seen, wall, usage.ru_utime + usage.ru_stime, peak, lines
