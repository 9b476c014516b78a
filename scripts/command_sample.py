"""The sample output of docs/guides/command.md, from a real run.

The page shows what `generic-trainer` prints on the penguin CSV (the
command of its `sh` block). Between `<!-- generated: command-sample -->`
and its end marker it holds a text block of that output, written here
from a real run: tests/test_docs.py runs the same command and checks that
the page's block has the lines a user sees, in order, with only the
numbers (times, metrics, versions) and the checkout's path left to differ.

Regenerate it after a change to what the command prints:

    .venv/bin/python scripts/command_sample.py --write
"""

import os
import re
import subprocess
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(_ROOT, 'docs', 'guides', 'command.md')
MARKER = '<!-- generated: command-sample -->'
END = '<!-- end generated: command-sample -->'
# What may differ between two runs of the same command: numbers (times,
# metrics, the Keras release) and where the checkout is.
_NUMBER = re.compile(r'\d+(\.\d+)?(e-?\d+)?')


def run(folder: str) -> str:
  """The page's command run in `folder`, as a first run (no parsed rows
  kept yet): its output as a terminal shows it (stderr and stdout, in the
  order written), `folder` written as the page's /tmp and the cache
  folder as ~/.cache."""
  sys.path.insert(0, _ROOT)
  try:
    from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.pop(0)
  data = write_penguin_csv(os.path.join(folder, 'penguin_data'))
  out = os.path.join(folder, 'penguin')
  cache = os.path.join(folder, 'cache')  # A first run's: nothing kept yet.
  env = dict(os.environ, PYTHONPATH=_ROOT, PYTHONUNBUFFERED='1',
             XDG_CACHE_HOME=cache)
  # A user's shell: none of what a process that imported TensorFlow or TFX
  # (the test suite's) set for itself, e.g. TF_USE_LEGACY_KERAS=1, which
  # makes the command train on tf_keras, or TF_CPP_MIN_LOG_LEVEL=1, which
  # asks for TensorFlow's start-up lines.
  for name in [n for n in env if n.startswith(('TF_', 'KERAS_'))]:
    del env[name]
  done = subprocess.run(
      [sys.executable, '-m', 'generic_trainer', '--module-file',
       os.path.join('module_files', 'penguin_spec.py'), '--train-data', data,
       '--output-dir', out, '--steps', '100'],
      cwd=_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, timeout=600, check=False)
  if done.returncode != 0:
    raise RuntimeError(f'the command failed ({done.returncode}):\n'
                       f'{done.stdout}')
  return (done.stdout.replace(cache, '~/.cache').replace(folder, '/tmp')
          .replace(_ROOT, '/...')
          .rstrip('\n') + '\n')


def comparable(text: str):
  """The lines of `text`, each with its numbers written as N."""
  return [_NUMBER.sub('N', line.rstrip()) for line in text.splitlines()
          if line.strip()]


def region(page: str) -> str:
  """The output block the page holds between the markers (no fences)."""
  inside = page.split(MARKER + '\n', 1)[1].split(END, 1)[0]
  return inside.split('```text\n', 1)[1].rsplit('```', 1)[0]


def write(output: str) -> None:
  """Puts `output` between the page's markers."""
  with open(PAGE) as f:
    page = f.read()
  before, rest = page.split(MARKER + '\n', 1)
  after = rest.split(END, 1)[1]
  with open(PAGE, 'w') as f:
    f.write(f'{before}{MARKER}\n```text\n{output}```\n{END}{after}')


def main(argv) -> int:
  with tempfile.TemporaryDirectory() as folder:
    output = run(folder)
  if '--write' in argv:
    write(output)
    print(f'wrote the sample output into {PAGE}')
  else:
    sys.stdout.write(output)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
