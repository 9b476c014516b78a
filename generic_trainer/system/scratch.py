"""Folders of the temporary directory (TMPDIR) that one process uses for a
while: the disk cache of parsed rows, the local workers' requests and
outputs, a child's request, a worker's scratch export.

Each holds `LOCK_FILE`, locked by its process for as long as it uses the
folder (`owner_lock`). The process removes its folder when done; one
killed first (SIGKILL, out of memory) leaves it, and the next process that
makes a scratch folder removes it: a folder is stale when its lock can be
taken, and only folders of this user alone (`trust`) are touched. A
folder without a lock file (one made a moment ago, whose lock is not yet
there: `locked`; one of a version before the lock) is stale once
`UNLOCKED_STALE_S` old. A lock file appears already locked
(`owner_lock.OwnerLock.acquire`), and a lock a sweeper's probe holds at
that moment is waited for, never ignored.

TMPDIR must be a folder this user can write: Python's `tempfile` would
silently fall back to /tmp, which may be small, shared or in memory. And
no one else may rename what this user makes there (`trust.parent_problems`:
this user's or root's, not writable by group or others without the sticky
bit), nor any folder above it (`trust.check_ancestors`): in a
group-writable team folder a member could move a scratch folder (or
TMPDIR itself) aside and put one of theirs in its place, with a child's
`request.json` that names a module of theirs. Refused, with the fix named.
The verdict is the parent's: in the local workers' user namespace root's
/tmp shows as owned by the overflow uid, like any other user's folder, so
the parent, which sees the real owner, passes the folders it found safe
down (`trust.verified_env`), and the workers accept those.

What this process made is recorded here (`made`: each folder with its
lock, held by this process), so that the SIGTERM last resort
(`preemption`) removes exactly those, never folders found by a name with
this PID in it: in PID namespaces that share TMPDIR (two containers, two
pods on one volume) another training has the same PID, often 1.
"""

import contextlib
import os
import stat
import tempfile
import time
from typing import Dict, Iterator, List, Optional, Tuple

from generic_trainer.system import owner_lock
from generic_trainer.system import removal
from generic_trainer.system import trust
from generic_trainer.errors import FolderInUseError, InvalidArgumentError
from generic_trainer.errors import UnsafeFolderError

PREFIX = 'generic-trainer-'  # + kind + '-' + pid + '-' + random.
LOCK_FILE = '.owner.lock'
# Names of the versions before the lock, found by the age rule only.
LEGACY_PREFIXES = ('generic_trainer_workers_', 'generic_trainer_worker_')
UNLOCKED_STALE_S = 24 * 3600.0


def parent() -> str:
  """The temporary directory, checked.

  Raises:
    InvalidArgumentError: TMPDIR names a folder that does not exist or this
      user cannot write.
    UnsafeFolderError: someone else may rename what this user makes there
      (`trust.parent_problems`), or rename a folder above it
      (`trust.check_ancestors`).
  """
  given = os.environ.get('TMPDIR')
  if given and not (os.path.isdir(given) and
                    os.access(given, os.W_OK | os.X_OK)):
    what = ('does not exist' if not os.path.exists(given) else
            'is not a folder' if not os.path.isdir(given) else
            'is not writable by this user')
    relative = ('' if os.path.isabs(given) else
                f' (a relative path: {os.path.abspath(given)} from the '
                'folder this runs in)')
    raise InvalidArgumentError(
        f'TMPDIR {what}{relative}. Expected a folder this user can write, '
        'for the disk cache and the workers\' files (Python would silently '
        f'use /tmp instead). Received: TMPDIR={given!r}. Create it (`mkdir '
        '-m 700 DIR`, an absolute path), fix its permissions, or unset '
        'TMPDIR.')
  where = tempfile.gettempdir()
  info = os.stat(where)
  found = trust.parent_problems(info)
  if found:
    raise UnsafeFolderError(
        f'The temporary folder {where} (TMPDIR) is not safe for scratch '
        f'folders: {"; and ".join(found)}. Whoever else can write it could '
        'move a training\'s scratch folder aside and put one of their own in '
        'its place: a child process would read their request (and import '
        'the module it names), a training their cached rows. Expected a '
        'folder that only you can write, or one with the sticky bit as /tmp '
        f'has. Received: TMPDIR={given or where!r}. Set TMPDIR to a folder '
        'of your own (`mkdir -m 700 ~/tmp && export TMPDIR=~/tmp`), or ask '
        f'its owner to `chmod +t {where}`.')
  trust.check_ancestors(where, 'TMPDIR')
  trust.record_verified(info)
  return where


# What this process made: {path: (its lock, held), this process's id}.
_MADE: Dict[str, Tuple[owner_lock.OwnerLock, int]] = {}


@contextlib.contextmanager
def folder(kind: str) -> Iterator[str]:
  """A new folder `generic-trainer-<kind>-<pid>-...` in TMPDIR, private to
  this user and locked by this process until the block ends, then removed
  with what it holds. Stale folders are removed first (`remove_stale`)."""
  where = parent()
  remove_stale(where)
  path = tempfile.mkdtemp(prefix=f'{PREFIX}{kind}-{os.getpid()}-', dir=where)
  try:
    lock = locked(path)
  except OSError:
    removal.remove_tree(path, ignore_errors=True)
    raise
  _MADE[path] = (lock, os.getpid())
  try:
    yield path
  finally:
    removal.remove_tree(path, ignore_errors=True)
    _MADE.pop(path, None)
    lock.release()


def made() -> List[str]:
  """The scratch folders this process made and still holds: its own
  record, each folder's lock held by this process (not a forked copy)."""
  return [path for path, (lock, pid) in list(_MADE.items())
          if lock.held and pid == os.getpid()]


def remove_made() -> None:
  """Removes the folders of `made` (the SIGTERM last resort: the process
  ends at once after); nothing else of TMPDIR."""
  for path in made():
    removal.remove_tree(path, ignore_errors=True)


def locked(path: str) -> owner_lock.OwnerLock:
  """The owner lock of the new folder `path`, held. Until then the folder
  has no lock file, and a sweeper takes it for in use (`is_stale`).

  Raises:
    FolderInUseError: the lock stays taken (no process but a sweeper's
      probe, held for a moment, should hold the lock of a new folder).
  """
  lock = owner_lock.OwnerLock(os.path.join(path, LOCK_FILE))
  if not lock.acquire(wait_s=_LOCK_WAIT_S):
    raise FolderInUseError(
        f'The new scratch folder {path} is locked by {lock.holder()}. '
        'Expected a new folder of this process, unlocked but for a moment. '
        f'Received: its lock still taken after {_LOCK_WAIT_S:g} s. Run again; '
        'if it happens again, see which process holds the folder.')
  return lock


_LOCK_WAIT_S = 5.0


def remove_stale(where: Optional[str] = None) -> None:
  """Removes this user's scratch folders in `where` (default: TMPDIR) that
  no process uses: their lock can be taken (or, without a lock, they are
  older than UNLOCKED_STALE_S)."""
  where = where or tempfile.gettempdir()
  try:
    names = os.listdir(where)
  except OSError:
    return
  for name in names:
    if name.startswith(PREFIX) or name.startswith(LEGACY_PREFIXES):
      path = os.path.join(where, name)
      if is_stale(path):
        remove_unused(path)


def is_stale(path: str) -> bool:
  """Whether `path` is a scratch folder of this user that no process uses."""
  try:
    info = os.lstat(path)
  except OSError:
    return False
  if not stat.S_ISDIR(info.st_mode) or trust.problems(info):
    return False  # Not this user's alone: never deleted.
  lock = os.path.join(path, LOCK_FILE)
  if os.path.lexists(lock):
    return not owner_lock.in_use(lock)
  return time.time() - info.st_mtime > UNLOCKED_STALE_S


def remove_unused(path: str) -> None:
  """Removes `path` while holding its lock, so that two processes cleaning
  up at once, or a late owner, do not race."""
  lock = owner_lock.OwnerLock(os.path.join(path, LOCK_FILE))
  try:
    if os.path.lexists(lock.path) and not lock.acquire():
      return
  except OSError:
    return
  try:
    removal.remove_tree(path, ignore_errors=True)
  finally:
    lock.release()
