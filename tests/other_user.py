"""Another user on the same machine, as the attack tests play it.

The tests that use these run as root (tests/needs-root.txt): only root
may start a process as another uid. The other user is uid 65534
(`nobody`), whose files, links and moves are made by a real process of
that user
(`setpriv`), in a folder that user can reach (pytest's base folder is
0700). tests/test_trust_by_descriptor.py and
tests/test_other_users_files.py share these.

Ordinary users: the victim (uid 2001, group 2001, the team's) and a
teammate in the victim's group (uid 2002). `run_as` runs the real
command as one of them in a process of its own, each
with a HOME of their own under /tmp, the machine's real /tmp as TMPDIR
(unset), and an interpreter of their own (`user_python`): the venv's
interpreter lives under /root, which only root may enter, and so may
this checkout and its venv (a CI clone), so the users get a copy of each
they can read (`user_repo`), as a person has an install of their own. `as_user`
and `started_as` run one step of a run in a forked child of the test as
one of them, to time a teammate's swap at that step; `team_folder` is
their shared 2775 folder.
"""

import contextlib
import functools
import os
import pathlib
import pickle
import shutil
import subprocess
import tempfile
import time
from typing import Dict, Iterator, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NOBODY = 65534
# Two people of one team (issue 55): numeric uids of no /etc/passwd entry,
# as `setpriv` and `os.setresuid` take them; the team's group is the
# victim's own, which the teammate is in.
VICTIM = 2001
TEAMMATE = 2002
TEAM = 2001


def as_nobody(*command):
  """Runs `command` as uid and gid 65534, of no other group."""
  subprocess.run(['setpriv', f'--reuid={NOBODY}', f'--regid={NOBODY}',
                  '--clear-groups', *command], check=True)


@contextlib.contextmanager
def reachable_folder(name: str, mode: int,
                     group: Optional[int] = None) -> Iterator[pathlib.Path]:
  """A folder `name` of root's with `mode` (and `group`, when given) in a
  fresh 0755 folder under /tmp, where uid 65534 can reach it; removed
  with everything in it afterwards."""
  reachable = tempfile.mkdtemp(prefix=f'{name}-', dir='/tmp')
  try:
    os.chmod(reachable, 0o755)
    path = os.path.join(reachable, name)
    os.mkdir(path)
    if group is not None:
      os.chown(path, 0, group)
    os.chmod(path, mode)
    yield pathlib.Path(path)
  finally:
    shutil.rmtree(reachable)




@contextlib.contextmanager
def team_folder() -> Iterator[pathlib.Path]:
  """A team's shared folder: root's, group TEAM, mode 2775 (the usual
  setup: members may add, rename and delete names in it), in a fresh 0755
  folder under /tmp; with a 0700 home of each person's beside it
  (`home(uid)`). Removed with everything in it afterwards."""
  with reachable_folder('team', 0o2775, group=TEAM) as path:
    for uid in (VICTIM, TEAMMATE):
      own = home(path, uid)
      os.mkdir(own)
      os.chown(own, uid, TEAM)
      os.chmod(own, 0o700)
    yield path


def home(team: pathlib.Path, uid: int) -> pathlib.Path:
  """The home folder of `uid` beside the team folder `team`."""
  return team.parent / f'home-{uid}'


def started_as(uid: int, fn, *args, gid: int = TEAM):
  """Starts `fn(*args)` in a forked child of this process as `uid` (group
  `gid` alone, HOME its `home`), to drive a step of a run in-process as
  that user, where a subprocess could not time a swap; returns a function
  that waits for it and returns what `fn` returned, or raises what it
  raised (both pickled back)."""
  read, write = os.pipe()
  pid = os.fork()
  if pid == 0:  # The child: never back into pytest.
    os.close(read)
    try:
      os.setgroups([gid])
      os.setresgid(gid, gid, gid)
      os.setresuid(uid, uid, uid)
      result = ('returned', fn(*args))
    except BaseException as e:  # pylint: disable=broad-except
      result = ('raised', e)
    try:
      data = pickle.dumps(result)
    except Exception:  # pylint: disable=broad-except
      data = pickle.dumps(('raised', RuntimeError(repr(result))))
    with os.fdopen(write, 'wb') as f:
      f.write(data)
    os._exit(0)
  os.close(write)

  def wait():
    with os.fdopen(read, 'rb') as f:
      data = f.read()
    os.waitpid(pid, 0)
    how, value = pickle.loads(data)
    if how == 'raised':
      raise value
    return value
  return wait


def as_user(uid: int, fn, *args, gid: int = TEAM):
  """`fn(*args)` run as `uid` in a forked child (`started_as`), waited
  for."""
  return started_as(uid, fn, *args, gid=gid)()


def wait_for(path: pathlib.Path, timeout: float = 30.0) -> bool:
  """Polls for `path` to appear, as inotify would tell (the step a swap
  is timed at); False after `timeout` seconds."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if os.path.lexists(path):
      return True
    time.sleep(0.01)
  return False


@functools.lru_cache(maxsize=None)
def _install() -> str:
  """A copy of this checkout with an interpreter and a venv every user
  can read (`install` of scripts/suite_user.py, which makes the suite's
  own user's: hard links to this venv and its interpreter, the files that
  name their place written anew), in a 0755 folder under /tmp: this
  checkout, its venv and pyenv's Python may be in folders only root can
  enter (a CI clone under /root). Made once a session, removed at exit.
  The copy's checkout."""
  import atexit  # pylint: disable=g-import-not-at-top
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location(
      'suite_user', os.path.join(REPO, 'scripts', 'suite_user.py'))
  suite_user = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(suite_user)
  root = tempfile.mkdtemp(prefix='gt-user-python-', dir='/tmp')
  atexit.register(shutil.rmtree, root, True)
  os.chmod(root, 0o755)
  return suite_user.install(root)


def user_python() -> str:
  """An interpreter ordinary users can run, in a venv of this venv's
  packages (`_install`). Its path."""
  return os.path.join(_install(), '.venv', 'bin', 'python')


def user_repo() -> str:
  """A copy of this checkout ordinary users can read (`_install`)."""
  return _install()


@contextlib.contextmanager
def home_of(uid: int, mode: int = 0o700) -> Iterator[pathlib.Path]:
  """A HOME of uid `uid` (group `uid`) under /tmp, `mode` (0700, as a
  home on Fedora and RHEL); removed with what it holds afterwards."""
  path = tempfile.mkdtemp(prefix=f'home-{uid}-', dir='/tmp')
  try:
    os.chown(path, uid, uid)
    os.chmod(path, mode)
    yield pathlib.Path(path)
  finally:
    shutil.rmtree(path, ignore_errors=True)


def run_as(uid: int, home: os.PathLike, argv: Sequence[str],
            groups: Sequence[int] = (), env: Optional[Dict[str, str]] = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
  """Runs `argv` (its first item `python` is `user_python`) as uid `uid`
  and gid `uid`, of `groups` besides, in `home`, with HOME `home`, TMPDIR
  unset, and a person's environment (PATH, the copy of this checkout,
  `user_repo`, importable): its output, not checked."""
  argv = list(argv)
  if argv[0] == 'python':
    argv[0] = user_python()
  environ = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'HOME': str(home),
             'LANG': 'C.UTF-8', 'PYTHONPATH': user_repo(), **(env or {})}
  given = ['--groups=' + ','.join(map(str, groups))] if groups else [
      '--clear-groups']
  return subprocess.run(
      ['setpriv', f'--reuid={uid}', f'--regid={uid}', *given, 'env', '-i',
       *[f'{k}={v}' for k, v in environ.items()], *argv],
      cwd=str(home), capture_output=True, text=True, timeout=timeout,
      check=False)


def command(*args: str) -> list:
  """The `generic-trainer` command with `args`, as `run_as` runs it."""
  return ['python', '-c', 'import sys; from generic_trainer.command import '
          'cli; sys.exit(cli.main(sys.argv[1:]))', *args]
