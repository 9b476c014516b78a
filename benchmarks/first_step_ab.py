"""The command's time to its first training step, two checkouts alternated.

    python -m benchmarks.first_step_ab OLD_CHECKOUT NEW_CHECKOUT [--rounds 5]

Runs `python -m generic_trainer` of each checkout (the same interpreter,
the checkout first on PYTHONPATH) on the same penguin CSV with the penguin
TrainSpec, in turns (old, new, new, old, ...), so that a busy spell of a
shared machine hits both alike; reports each one's median wall time from
the process's start to the line `first training step after X s`, and
new / old. Used to check that a change of the code's layout (issue 39)
does not slow the command's start.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.first_step import FIRST_STEP


def first_step_s(checkout: str, csv: str, out: str) -> float:
  """Wall seconds from start to the first step's line of one run."""
  module = os.path.join(checkout, 'module_files', 'penguin_spec.py')
  env = dict(os.environ, PYTHONPATH=checkout, TF_CPP_MIN_LOG_LEVEL='2')
  started = time.monotonic()
  process = subprocess.Popen(
      [sys.executable, '-m', 'generic_trainer', '--module-file', module,
       '--train-data', csv, '--output-dir', out, '--steps', '10',
       '--progress', 'lines', '--parsed-rows-cache', 'off'],
      cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True)
  seen = None
  for line in process.stdout:
    if seen is None and FIRST_STEP.search(line):
      seen = time.monotonic() - started
  if process.wait() or seen is None:
    raise RuntimeError(f'{checkout}: the command failed or printed no first '
                       f'step (exit {process.returncode}).')
  return seen


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('old')
  parser.add_argument('new')
  parser.add_argument('--rounds', type=int, default=5)
  args = parser.parse_args(argv)
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  work = tempfile.mkdtemp(prefix='first-step-ab-')
  csv = write_penguin_csv(os.path.join(work, 'data'))
  times = {'old': [], 'new': []}
  for index in range(args.rounds):
    order = ('old', 'new') if index % 2 == 0 else ('new', 'old')
    for name in order:
      out = os.path.join(work, f'{name}-{index}')
      times[name].append(first_step_s(getattr(args, name), csv, out))
  old, new = (statistics.median(times[n]) for n in ('old', 'new'))
  print(f'old {args.old}: {old:.2f} s (runs: '
        f'{", ".join(f"{t:.2f}" for t in times["old"])})')
  print(f'new {args.new}: {new:.2f} s (runs: '
        f'{", ".join(f"{t:.2f}" for t in times["new"])})')
  print(f'new / old: {new / old:.3f}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
