"""What entering the private network costs a local worker's start.

    python -m benchmarks.worker_entry --repeats 15

A local worker of a multi-worker training starts as
`python -m generic_trainer.launch.network_entry ... -- <its program>`
(`private_network.Entry`), which enters the group's network and execs the
program. This times a program that does nothing (`python -c pass`) started
plainly and started through the entry (creating a network), from the
start to its exit, alternately, in fresh processes; medians. The training
program's own start (TensorFlow's import, seconds) is what the difference
adds to. Prints one JSON object and writes it to `--out` when given.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from benchmarks.variants import cpu_name
from generic_trainer.launch import child_process
from generic_trainer.launch import private_network
from generic_trainer.system import atomic_files

_PROGRAM = [sys.executable, '-c', 'pass']


def _once(entered: bool, env) -> float:
  started = time.monotonic()
  if entered:
    entry = private_network.Entry()
    process = subprocess.Popen(entry.command(_PROGRAM), pass_fds=entry.pass_fds,
                               env=env)
    for fd in entry.entered(process):  # The namespaces it made.
      os.close(fd)
  else:
    process = subprocess.Popen(_PROGRAM, env=env)
  if process.wait() != 0:
    raise RuntimeError(f'{_PROGRAM} exited with {process.returncode}')
  return time.monotonic() - started


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=15)
  parser.add_argument('--out', help='also write the JSON here')
  args = parser.parse_args(argv)
  why = private_network.available()
  if why:
    raise SystemExit(f'no private network on this machine: {why}')
  env = child_process.child_env()
  _once(True, env)  # Both warm: the files in memory, the modules compiled.
  _once(False, env)
  plain, entered = [], []
  for _ in range(args.repeats):
    plain.append(_once(False, env))
    entered.append(_once(True, env))
  report = {
      'machine': f'CPU: {cpu_name()}, {os.cpu_count()} cores',
      'python': platform.python_version(),
      'repeats': args.repeats,
      'plain_start_s': statistics.median(plain),
      'entered_start_s': statistics.median(entered),
  }
  report['entry_adds_s'] = report['entered_start_s'] - report['plain_start_s']
  text = json.dumps(report, indent=1)
  print(text)
  if args.out:
    atomic_files.write_text(args.out, text + '\n')
  return 0


if __name__ == '__main__':
  sys.exit(main())
