"""The ordinary user `make test` runs the suite as when root runs it.

    .venv/bin/python scripts/suite_user.py prepare   # prints the run folder
    .venv/bin/python scripts/suite_user.py remove RUN

Every person who trains runs as themselves, not root: root may read and
replace any file, so a suite run as root cannot see what an ordinary user
is refused (issue 55: local worker groups failed for every non-root user
with the default TMPDIR while the suite, as root, passed). So when root
runs `make test` (CI does), `scripts/suite.sh` runs the suite as
`gt-tester`, a real user of this machine's /etc/passwd made here the
first time (`useradd`; its uid and gid from 3000 up, apart from the uids
2001 and 2002 the team tests play the victim and the teammate with), with
its own 0700 HOME, the machine's real /tmp and no TMPDIR, as a person's
session has.

`prepare` gives that user what a person has, without opening any of
root's folders (the checkout may be under /root, 0700, and so is pyenv's
Python): a folder of this run in its HOME holding

  - `checkout/`: a copy of this checkout (the files git tracks, and the
    untracked ones it does not ignore), the user's own, so that no test
    needs to write into root's;
  - `python/`: this venv's interpreter install, as hard links where it is
    on the same file system (a copy where not), readable by all; its
    executable's library path (an absolute RUNPATH into root's install)
    pointed at its own `lib/`;
  - `checkout/.venv`: this venv, as hard links likewise (the files
    compiled so far included), with the files that name where it lives
    (`pyvenv.cfg`, the scripts' `#!` lines, the editable install's
    finder) written anew for the copy: a hard link is never written
    through, so root's venv stays as it was. Its folders are the user's,
    for the files Python compiles as it imports.

Made in 2 to 7 seconds on the same file system (`make test` prints it),
and removed afterwards (`remove`: 2 to 25 seconds); the user and its HOME
stay for the next run.
"""

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER = 'gt-tester'
# Apart from the victim (2001) and the teammate (2002) of
# tests/other_user.py, and from the people of a machine (1000 up).
FIRST_ID, LAST_ID = 3000, 3999


def user() -> pwd.struct_passwd:
  """The suite's user, made the first time (a HOME of its own, 0700)."""
  try:
    entry = pwd.getpwnam(USER)
  except KeyError:
    try:
      subprocess.run(
          ['useradd', '--create-home', '--user-group', '--shell', '/bin/bash',
           '--comment', 'tfx-generic-trainer test suite (scripts/suite_user.py)',
           '-K', f'UID_MIN={FIRST_ID}', '-K', f'UID_MAX={LAST_ID}',
           '-K', f'GID_MIN={FIRST_ID}', '-K', f'GID_MAX={LAST_ID}', USER],
          check=True)
    except (OSError, subprocess.CalledProcessError) as e:
      raise SystemExit(
          f'suite_user.py: the suite\'s user {USER} could not be made: {e}. '
          'Expected `useradd` (Debian\'s passwd package) to add a user with '
          f'a uid from {FIRST_ID} to {LAST_ID}. Received: no user {USER} in '
          f'the passwd database. Add it yourself (`useradd -m {USER}`), or '
          'run `make test` as an ordinary user.') from e
    entry = pwd.getpwnam(USER)
  if not os.path.isdir(entry.pw_dir):
    os.makedirs(entry.pw_dir)
  os.chown(entry.pw_dir, entry.pw_uid, entry.pw_gid)
  os.chmod(entry.pw_dir, 0o700)
  return entry


def _linked(source: str, target: str) -> None:
  """`target`, a tree of hard links to `source`'s files (a copy where they
  are on another file system)."""
  if subprocess.run(['cp', '-al', source, target], check=False,
                    stderr=subprocess.DEVNULL).returncode != 0:
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(['cp', '-a', source, target], check=True)


def _rewrite(path: str, text: str) -> None:
  """Writes `text` to `path` as a new file (its mode kept): a hard link to
  root's file is replaced, never written through."""
  mode = os.stat(path).st_mode & 0o7777
  os.unlink(path)
  with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode),
            'w', encoding='utf-8') as f:
    f.write(text)
  os.chmod(path, mode)


def _own_library_path(executable: str, install: str) -> None:
  """Points `executable`'s RUNPATH (root's `install/lib`) at its own
  `lib/` (`$ORIGIN/../lib`, padded with NULs to the same length): the
  user cannot enter root's install. Nothing to do where it names none."""
  with open(executable, 'rb') as f:
    binary = f.read()
  old = os.path.join(install, 'lib').encode() + b'\0'
  new = b'$ORIGIN/../lib'
  if binary.count(old) != 1:
    return
  replaced = binary.replace(old, new + b'\0' * (len(old) - len(new)))
  os.unlink(executable)
  with open(os.open(executable, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755),
            'wb') as f:
    f.write(replaced)


def _checkout(target: str) -> None:
  """Copies what git tracks in this checkout and the untracked files it
  does not ignore into `target`."""
  listed = subprocess.run(
      ['git', '-C', REPO, 'ls-files', '-z', '--cached', '--others',
       '--exclude-standard'], check=True, capture_output=True).stdout
  names = [n for n in listed.decode().split('\0')
           if n and os.path.lexists(os.path.join(REPO, n))]
  os.makedirs(target)
  subprocess.run(
      f'tar -C {REPO!r} --null -T - -cf - | tar -C {target!r} -xf -',
      shell=True, input='\0'.join(names).encode(), check=True)


def prepare() -> str:
  """The run folder: the user's copy of the checkout, with an
  interpreter and a venv the user can read. Its path."""
  entry = user()
  run = tempfile.mkdtemp(prefix='suite-', dir=entry.pw_dir)
  os.chown(run, entry.pw_uid, entry.pw_gid)
  install(run, entry)
  return run


def install(run: str, owner: Optional[pwd.struct_passwd] = None) -> str:
  """Makes in the folder `run` a copy of this checkout (`checkout/`) with
  this venv (`checkout/.venv`) and its interpreter (`python/`), linked as
  the module docstring says: `owner`'s (the checkout, and the folders of
  the install), or, without one, root's and readable by every user (the
  other users of tests/other_user.py). The copy's checkout."""
  checkout = os.path.join(run, 'checkout')
  _checkout(checkout)
  if owner is not None:
    subprocess.run(['chown', '-R', f'{owner.pw_uid}:{owner.pw_gid}',
                    checkout], check=True)
  else:
    subprocess.run(['chmod', '-R', 'a+rX', checkout], check=True)

  venv = sys.prefix
  base = os.path.realpath(sys.base_prefix)
  python = os.path.join(run, 'python')
  _linked(base, python)
  version = f'python{sys.version_info.major}.{sys.version_info.minor}'
  _own_library_path(os.path.join(python, 'bin', version), base)

  copy = os.path.join(checkout, '.venv')
  _linked(venv, copy)
  for name in ('python', 'python3', version):
    path = os.path.join(copy, 'bin', name)
    if os.path.lexists(path):
      os.unlink(path)
  os.symlink(os.path.join(python, 'bin', version),
             os.path.join(copy, 'bin', 'python'))
  for name in ('python3', version):
    os.symlink('python', os.path.join(copy, 'bin', name))
  with open(os.path.join(venv, 'pyvenv.cfg'), encoding='utf-8') as f:
    config = [line for line in f if not line.startswith('home ')]
  _rewrite(os.path.join(copy, 'pyvenv.cfg'),
           f'home = {os.path.join(python, "bin")}\n' + ''.join(config))
  site = os.path.relpath(sysconfig.get_paths()['purelib'], venv)
  # What names the venv's or the checkout's place: scripts, the finder.
  places = [os.path.join(copy, 'bin', n) for n in os.listdir(
      os.path.join(copy, 'bin'))] + [
          os.path.join(copy, site, n) for n in os.listdir(
              os.path.join(copy, site)) if n.startswith('__editable__')]
  for path in places:
    if os.path.islink(path) or not os.path.isfile(path):
      continue
    try:
      with open(path, encoding='utf-8') as f:
        text = f.read()
    except UnicodeDecodeError:
      continue
    if venv in text or REPO in text:
      _rewrite(path, text.replace(venv, copy).replace(REPO, checkout))
  # The folders the owner's, so that Python writes its compiled files
  # there as it imports (`make setup` compiles the packages of the lock, not
  # this checkout's, nor the interpreter's standard library); the
  # files, root's hard links, are read only: none of root's is changed.
  for folder in (python, copy):
    if owner is not None:
      subprocess.run(['find', folder, '-type', 'd', '-exec', 'chown',
                      f'{owner.pw_uid}:{owner.pw_gid}', '{}', '+'],
                     check=True)
    else:
      os.chmod(folder, 0o755)
  return checkout


def remove(run: str) -> None:
  """Removes a run folder `prepare` made (in the user's HOME, named so)."""
  home = pwd.getpwnam(USER).pw_dir
  if (os.path.dirname(os.path.abspath(run)) != home or
      not os.path.basename(run).startswith('suite-')):
    raise SystemExit(f'suite_user.py: {run} is no run folder of {home}')
  shutil.rmtree(run)


def main(argv) -> int:
  if argv[:1] == ['prepare'] and len(argv) == 1:
    print(prepare())
    return 0
  if argv[:1] == ['remove'] and len(argv) == 2:
    remove(argv[1])
    return 0
  print(__doc__.split('\n\n')[1], file=sys.stderr)
  return 2


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
