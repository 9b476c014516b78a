"""Another user on the same machine, as the attack tests play it.

The suite runs as root; the other user is uid 65534 (`nobody`), whose
files, links and moves are made by a real process of that user
(`setpriv`), in a folder that user can reach (pytest's base folder is
0700). tests/test_trust_by_descriptor.py and
tests/test_other_users_files.py share these.
"""

import contextlib
import os
import pathlib
import pickle
import shutil
import subprocess
import tempfile
import time
from typing import Iterator, Optional

NOBODY = 65534


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


# Two people of one team (issue 55): numeric uids of no /etc/passwd entry,
# in one group, as `setpriv` and `os.setresuid` take them.
VICTIM = 2001
TEAMMATE = 2002
TEAM = 2000


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
