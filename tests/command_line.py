"""The generic-trainer command run in the test process, as the tests of its
flags and messages call it: its exit status, the error line it printed, and
a user's module file written from a test's source. Every test file that
runs `cli.main` or writes such a module shares these."""

import textwrap


def main(*argv) -> int:
  """`generic-trainer ARGV` in this process (`cli.main`): its exit status."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  return cli.main(list(argv))


def error_line(err: str) -> str:
  """The command's error line in its stderr."""
  return [l for l in err.splitlines() if l.startswith('generic-trainer: ')][0]


def module_file(tmp_path, name: str, source: str) -> str:
  """The path of `name`.py in `tmp_path`, holding `source` dedented."""
  path = tmp_path / f'{name}.py'
  path.write_text(textwrap.dedent(source))
  return str(path)
