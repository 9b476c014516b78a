"""Another user on the same machine, as the attack tests play it.

The suite runs as root; the other user is uid 65534 (`nobody`), whose
files, links and moves are made by a real process of that user
(`setpriv`), in a folder that user can reach (pytest's base folder is
0700). tests/test_trust_by_descriptor.py and
tests/test_other_users_files.py share these.

Ordinary users that run the real command (`as_user`): the victim (uid
4242, group 4242) and a teammate in the victim's group (uid 4243), each
with a HOME of their own under /tmp, the machine's real /tmp as TMPDIR
(unset), and an interpreter of their own (`user_python`): the venv's
interpreter lives under /root, which only root may enter, so the user
gets a copy, as a person has an install of their own; the venv's
packages and this checkout are read where they are (0755).
"""

import contextlib
import functools
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import Dict, Iterator, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NOBODY = 65534
VICTIM = 4242
TEAMMATE = 4243
TEAM = 4242  # The victim's group, which the teammate is in.


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


@functools.lru_cache(maxsize=None)
def user_python() -> str:
  """An interpreter ordinary users can run: a copy of this one's install
  (its standard library, without its tests), root's and 0755, in a venv
  whose site-packages are this venv's; made once a session, removed at
  exit. Its path."""
  import atexit  # pylint: disable=g-import-not-at-top
  root = tempfile.mkdtemp(prefix='gt-user-python-', dir='/tmp')
  atexit.register(shutil.rmtree, root, True)
  os.chmod(root, 0o755)
  install = os.path.join(root, 'install')
  home = sys.base_prefix
  stdlib = sysconfig.get_paths()['stdlib']
  shutil.copytree(home, install, symlinks=True, ignore=lambda folder, names: [
      n for n in names if os.path.join(folder, n) in (
          os.path.join(stdlib, 'test'), os.path.join(stdlib, 'site-packages'))])
  version = f'python{sys.version_info.major}.{sys.version_info.minor}'
  venv = os.path.join(root, 'venv')
  os.makedirs(os.path.join(venv, 'bin'))
  os.makedirs(os.path.join(venv, 'lib', version))
  os.symlink(os.path.join(install, 'bin', version),
             os.path.join(venv, 'bin', 'python'))
  os.symlink(sysconfig.get_paths()['purelib'],
             os.path.join(venv, 'lib', version, 'site-packages'))
  with open(os.path.join(venv, 'pyvenv.cfg'), 'w') as f:
    f.write(f'home = {install}/bin\ninclude-system-site-packages = false\n')
  subprocess.run(['chmod', '-R', 'go-w,a+rX', root], check=True)
  return os.path.join(venv, 'bin', 'python')


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


def as_user(uid: int, home: os.PathLike, argv: Sequence[str],
            groups: Sequence[int] = (), env: Optional[Dict[str, str]] = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
  """Runs `argv` (its first item `python` is `user_python`) as uid `uid`
  and gid `uid`, of `groups` besides, in `home`, with HOME `home`, TMPDIR
  unset, and a person's environment (PATH, this checkout importable):
  its output, not checked."""
  argv = list(argv)
  if argv[0] == 'python':
    argv[0] = user_python()
  python_lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(
      user_python()))), 'lib')
  environ = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'HOME': str(home),
             'LANG': 'C.UTF-8', 'PYTHONPATH': REPO,
             'LD_LIBRARY_PATH': python_lib, **(env or {})}
  given = ['--groups=' + ','.join(map(str, groups))] if groups else [
      '--clear-groups']
  return subprocess.run(
      ['setpriv', f'--reuid={uid}', f'--regid={uid}', *given, 'env', '-i',
       *[f'{k}={v}' for k, v in environ.items()], *argv],
      cwd=str(home), capture_output=True, text=True, timeout=timeout,
      check=False)


def command(*args: str) -> list:
  """The `generic-trainer` command with `args`, as `as_user` runs it."""
  return ['python', '-c', 'import sys; from generic_trainer.command import '
          'cli; sys.exit(cli.main(sys.argv[1:]))', *args]
