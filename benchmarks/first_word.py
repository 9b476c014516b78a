"""Seconds to the command's first word: a mistake the CSV header shows, and
the first line of a run that loads TensorFlow.

    python -m benchmarks.first_word --repeats 5

Runs the installed `generic-trainer` (beside this Python) in a fresh
process each time, its stdout and stderr read line by line as they come:

- mistake: a canned regressor whose `feature_keys` misspells 'area'
  ('aera'), on a CSV whose label 'price' has a blank and a '$' amount:
  seconds to its first line and to its exit (the one error, which names
  all three; target <= 5 s);
- loading: the same module spelt right on clean rows: seconds to its
  first line, the one that says TensorFlow is loading (target <= 2 s);
  the process is then ended (SIGKILL: only its start is measured).

The first run of each is the coldest this machine gives without dropping
its page cache; medians are of every run. Prints one JSON object and
writes it to `--out` when given.
"""

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

from benchmarks import variants

_MODULE = """from generic_trainer.canned import DNNRegressorSpec


class Houses(DNNRegressorSpec):
  label_key = 'price'
  feature_keys = ['rooms', '{area}']
  hidden_units = [8]
"""
_MISTAKE_ROWS = 'rooms,area,price\n3,70,$250000\n4,95,\n2,50,180000\n'
_CLEAN_ROWS = 'rooms,area,price\n' + ''.join(
    f'{i % 5 + 1},{40 + i},{100000 + 1000 * i}\n' for i in range(200))


def command() -> str:
  """The installed command beside this Python."""
  return os.path.join(os.path.dirname(sys.executable), 'generic-trainer')


def one_run(argv: List[str], stop_at_first: bool) -> Dict[str, Optional[float]]:
  """{first_line_s, exit_s, status, first_line} of one fresh process."""
  started = time.monotonic()
  proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, PYTHONUNBUFFERED='1'))
  first = proc.stdout.readline()
  first_s = time.monotonic() - started
  if stop_at_first:
    proc.send_signal(signal.SIGKILL)  # Our own child, by its pid.
    proc.communicate()
    return {'first_line_s': first_s, 'exit_s': None, 'status': None,
            'first_line': first.strip()}
  rest, _ = proc.communicate()
  return {'first_line_s': first_s, 'exit_s': time.monotonic() - started,
          'status': proc.returncode, 'first_line': (first + rest).strip()}


def main(argv=None) -> Dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--out')
  args = parser.parse_args(argv)
  folder = tempfile.mkdtemp(prefix='first-word-')
  cases = {}
  for name, area, rows in (('mistake', 'aera', _MISTAKE_ROWS),
                           ('loading', 'area', _CLEAN_ROWS)):
    module = os.path.join(folder, f'{name}.py')
    data = os.path.join(folder, f'{name}.csv')
    with open(module, 'w') as f:
      f.write(_MODULE.format(area=area))
    with open(data, 'w') as f:
      f.write(rows)
    run_argv = [command(), '--module-file', module, '--train-data', data,
                '--output-dir', os.path.join(folder, f'out-{name}')]
    runs = [one_run(run_argv, stop_at_first=name == 'loading')
            for _ in range(args.repeats)]
    cases[name] = runs
  mistake, loading = cases['mistake'], cases['loading']
  report = {
      'command': 'python -m benchmarks.first_word --repeats '
                 f'{args.repeats}',
      'cpu': variants.cpu_name(), 'python': platform.python_version(),
      'repeats': args.repeats,
      'mistake_first_line_s': statistics.median(
          r['first_line_s'] for r in mistake),
      'mistake_error_s': statistics.median(r['exit_s'] for r in mistake),
      'mistake_first_run_error_s': mistake[0]['exit_s'],
      'mistake_status': mistake[0]['status'],
      'mistake_message': mistake[0]['first_line'],
      'loading_first_line_s': statistics.median(
          r['first_line_s'] for r in loading),
      'loading_first_run_first_line_s': loading[0]['first_line_s'],
      'loading_line': loading[0]['first_line'],
      'targets': {'mistake_error_s': 5.0, 'loading_first_line_s': 2.0},
  }
  text = json.dumps(report, indent=1)
  print(text)
  if args.out:
    with open(args.out, 'w') as f:
      f.write(text + '\n')
  return report


if __name__ == '__main__':
  main()
