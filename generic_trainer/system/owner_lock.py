"""Who uses a folder, told by a lock the kernel holds for its owner.

A process that uses a folder holds an exclusive `flock` on a file in it for
as long as it uses it. The kernel drops the lock when the process ends,
however it ends (SIGKILL, out of memory), so a folder whose lock can be
taken has no user: it is stale. Unlike a PID in a name, this works across
PID namespaces that share the folder (containers, pods sharing a volume:
PID 1 in one is not PID 1 in another), and a reused PID cannot keep a dead
process's folder alive.

The lock file holds a line saying who holds it (process, host, command,
since when), for the message another process shows when it cannot take it.
It is written in place under the lock: replacing the file would replace
the inode the lock is on.
"""

import errno
import fcntl
import json
import os
import socket
import sys
import time
from typing import Optional
import pwd


class OwnerLock:
  """An exclusive flock on `path`, held from `acquire` to `release` (or the
  process's end)."""

  def __init__(self, path: str):
    self.path = path
    self._fd: Optional[int] = None

  def acquire(self, wait_s: float = 0.0) -> bool:
    """Takes the lock and writes who holds it; False when another process
    holds it (see `holder`), after trying for `wait_s` seconds (a
    sweeper's probe holds a free lock for a moment: `in_use`).

    A missing file is made locked: a new file is locked under a name of
    its own, then linked to `path`, so that no sweeper finds `path`
    unlocked while its owner lives."""
    deadline = time.monotonic() + wait_s
    while True:
      fd = self._made_locked() if not os.path.lexists(self.path) else None
      if fd is None:
        fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
          fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
          os.close(fd)
          if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
          if time.monotonic() >= deadline:
            return False
          time.sleep(0.01)
          continue
      os.ftruncate(fd, 0)
      os.pwrite(fd, (json.dumps(_me()) + '\n').encode(), 0)
      self._fd = fd
      return True

  def _made_locked(self) -> Optional[int]:
    """A new lock file at `path`, locked before it is there; None when a
    file is there already."""
    fresh = f'{self.path}.{os.getpid()}.{time.monotonic_ns()}'
    fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                 os.O_CLOEXEC, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # Nobody knows it yet.
      os.link(fresh, self.path)
    except FileExistsError:
      os.close(fd)
      return None
    except BaseException:
      os.close(fd)
      raise
    finally:
      os.unlink(fresh)
    return fd

  def release(self) -> None:
    if self._fd is not None:
      os.close(self._fd)  # Closing the file drops its lock.
      self._fd = None

  @property
  def held(self) -> bool:
    return self._fd is not None

  def holder(self) -> str:
    """Who holds the lock, as the file says: 'process 4242 on host-a
    (generic-trainer --output-dir out), since 2026-11-25 16:03:01 UTC'."""
    try:
      with open(self.path, encoding='utf-8') as f:
        who = json.loads(f.read() or '{}')
    except (OSError, ValueError):
      return 'another process (the lock file does not say which)'
    return (f"process {who.get('pid')} of user {who.get('user')} on "
            f"{who.get('host')} ({who.get('command')}), since "
            f"{who.get('since')}")


def in_use(path: str) -> bool:
  """Whether a process holds the lock file `path` (False when it is missing
  or free). Probes with a shared lock for a moment: probes do not fail
  each other, and an owner taking the lock meanwhile retries
  (`OwnerLock.acquire`)."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
  except OSError:
    return False
  try:
    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
  except OSError:
    return True
  finally:
    os.close(fd)
  return False


def _me() -> dict:
  command = ' '.join([os.path.basename(sys.argv[0] or 'python')] +
                     sys.argv[1:])[:300]
  try:
    user = pwd.getpwuid(os.geteuid()).pw_name
  except (ImportError, KeyError):
    user = str(os.geteuid())
  return {'pid': os.getpid(), 'user': user, 'host': socket.gethostname(),
          'command': command,
          'since': time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}
