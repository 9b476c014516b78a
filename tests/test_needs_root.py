"""The tests that need root, in one place (tests/needs-root.txt).

`make test` run by root runs the suite as an ordinary user
(scripts/suite.sh), and the tests that list names as root; run by an
ordinary user, those skip with the list's reason. These check that the
list is the truth: each entry is a test that exists and says why, every
test that does what only root may is listed, and pytest marks and skips
what it lists.
"""

import ast
import glob
import os
import re
import subprocess
import sys

from conftest import REPO, command_env, needs_root, why_root

# What only root may do: start a process as another uid, give a file to
# another user or group, run a rootful container, make network namespaces.
ROOT_ONLY = re.compile(
    r'\bos\.chown\(|\bsetresuid\b|\bsetpriv\b|\bas_nobody\(|\brun_as\(|'
    r'\bas_user\(|\bstarted_as\(|\bteam_folder\(|\bhome_of\(|'
    r'\breachable_folder\([^)]*group=|\bcontainers\.(build_image|engine|'
    r'ENGINE)\b|\b_ip\(')


def _reaches(tree: ast.Module, source: str):
  """{test function: the source it runs}: its own, and that of the
  module's functions (fixtures, helpers) it names, theirs, and so on."""
  lines = source.splitlines()
  text, names = {}, {}
  for node in tree.body:
    if isinstance(node, ast.FunctionDef):
      text[node.name] = '\n'.join(lines[node.lineno - 1:node.end_lineno])
      names[node.name] = {n.id for n in ast.walk(node) if isinstance(
          n, ast.Name)} | {a.arg for a in node.args.args}
  reached = {}
  for name in text:
    if not name.startswith('test_'):
      continue
    seen, todo = set(), [name]
    while todo:
      current = todo.pop()
      if current not in seen and current in text:
        seen.add(current)
        todo.extend(names[current])
    reached[name] = '\n'.join(text[n] for n in sorted(seen))
  return reached


def test_each_listed_test_exists_and_says_why():
  """Each entry names a test file, or a test in it, and gives a reason."""
  wrong = []
  for test, why in needs_root().items():
    path, _, name = test.partition('::')
    if not os.path.isfile(os.path.join(REPO, path)):
      wrong.append(f'{test}: no such file')
      continue
    with open(os.path.join(REPO, path), encoding='utf-8') as f:
      text = f.read()
    if name and not re.search(rf'^def {re.escape(name)}\(', text, re.M):
      wrong.append(f'{test}: no such test in {path}')
    if len(why) < 20:
      wrong.append(f'{test}: no reason given ({why!r})')
  assert not wrong, '\n'.join(wrong)


def test_every_test_that_does_what_only_root_may_is_listed():
  """A test that (through its fixtures and helpers) starts a process as
  another uid, chowns, or runs a container is in tests/needs-root.txt."""
  listed = needs_root()
  missing = []
  for path in sorted(glob.glob(os.path.join(REPO, 'tests', 'test_*.py'))):
    with open(path, encoding='utf-8') as f:
      source = f.read()
    rel = os.path.relpath(path, REPO)
    for name, reached in _reaches(ast.parse(source), source).items():
      if ROOT_ONLY.search(reached) and not why_root(f'{rel}::{name}', listed):
        missing.append(f'{rel}::{name}: {ROOT_ONLY.search(reached)[0]}')
  assert not missing, ('Not in tests/needs-root.txt, though they do what '
                       'only root may:\n' + '\n'.join(missing))


def test_the_scan_finds_a_uid_switch_through_a_fixture():
  """The scan above sees through a fixture and a helper."""
  switch = 'run' + '_as(2001, home, argv)'  # Not itself a switch.
  source = (f'def helper():\n  {switch}\n'
            'def fixture():\n  return helper()\n'
            'def test_it(fixture):\n  pass\n'
            'def test_other(tmp_path):\n  pass\n')
  reached = _reaches(ast.parse(source), source)
  assert ROOT_ONLY.search(reached['test_it'])
  assert not ROOT_ONLY.search(reached['test_other'])


_LISTED = ('tests/test_shared_cache.py::'
           'test_a_cache_folder_of_another_user_writable_by_all_is_refused')


def test_pytest_marks_what_the_list_names_and_only_that():
  """`-m needs_root` selects exactly the listed tests of a file, their
  cases included (the root lane); the others are left to the user's."""
  out = subprocess.run(
      [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider',
       '--collect-only', '-q', '-m', 'needs_root',
       'tests/test_shared_cache.py'], cwd=REPO, env=command_env(),
      capture_output=True, text=True, check=False).stdout
  root = {l.split('[')[0] for l in out.splitlines()
          if l.startswith('tests/')}
  assert root == {t for t in needs_root()
                  if t.startswith('tests/test_shared_cache.py::')}, out
  selected = re.search(r'(\d+)/(\d+) tests collected \((\d+) deselected',
                       out)
  assert selected, out
  assert int(selected[3]) > 0, out  # Left to the user's lane.


def test_a_listed_test_run_by_an_ordinary_user_skips_saying_why():
  """Run by a uid that is not root, a listed test skips with the list's
  reason."""
  script = ('import os, sys, pytest; os.geteuid = lambda: 3000; '
            'sys.exit(pytest.main(["-p", "no:cacheprovider", "-rs", '
            f'"{_LISTED}"]))')
  out = subprocess.run([sys.executable, '-c', script], cwd=REPO,
                       env=command_env(), capture_output=True, text=True,
                       check=False)
  assert out.returncode == 0, out.stdout[-3000:]
  why = needs_root()[_LISTED]
  assert f'SKIPPED [1] {_LISTED.split("::")[0]}' in out.stdout, out.stdout
  assert f'needs root: {why}' in out.stdout.replace('\n', ' '), out.stdout


def test_root_runs_the_suite_as_an_ordinary_user_in_a_copy_of_its_own():
  """`scripts/suite.sh` (what `make test` runs), started by root, runs the
  tests as `gt-tester` in a copy of the checkout in that user's HOME, and
  removes the copy afterwards."""
  import pwd  # pylint: disable=g-import-not-at-top
  done = subprocess.run(
      ['bash', os.path.join(REPO, 'scripts', 'suite.sh'), 'only',
       'tests/test_needs_root.py::test_each_listed_test_exists_and_says_why'],
      cwd=REPO, env=command_env(), capture_output=True, text=True,
      timeout=600, check=False)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  user = pwd.getpwnam('gt-tester')
  assert user.pw_uid >= 3000 and user.pw_uid not in (2001, 2002)
  run = re.search(rf'rootdir: ({re.escape(user.pw_dir)}/suite-\w+)/checkout\n',
                  done.stdout)
  assert run, done.stdout
  assert f'the suite runs as gt-tester (uid {user.pw_uid})' in done.stdout
  assert '1 passed' in done.stdout and not os.path.exists(run[1])
  assert os.stat(user.pw_dir).st_mode & 0o777 == 0o700
