"""The local folder where one training keeps parsed rows on disk.

A scratch folder of the system's temporary directory (TMPDIR), named after
the process (`generic-trainer-cache-<pid>-...`), locked by it while it
trains and removed when the training ends (`scratch`). A process killed
before that (SIGKILL, out of memory) leaves its folder; the next training
on the machine removes it once its lock is free, so a crash does not eat
the disk the next run would cache on, and a live training's cache is never
taken for a dead one's (another PID namespace sharing TMPDIR included).
"""

import contextlib
import errno
import os
from typing import List, Optional

from generic_trainer.system import removal
from generic_trainer.system import scratch

KIND = 'cache'
PREFIX = f'{scratch.PREFIX}{KIND}-'


class CacheFolder:
  """One training's folder for parsed rows on disk, and its share of the
  disk: the bytes its datasets have claimed, and how many processes of the
  training (workers on one machine) cache beside it.

  Use as a context manager: entering removes stale folders and creates this
  one (`path`), leaving removes it with everything in it.
  """

  def __init__(self, sharers: int = 1):
    self.sharers = max(1, int(sharers or 1))
    self.claimed = 0
    self.path: Optional[str] = None
    self.on_disk: List[str] = []  # The datasets' cache prefixes in `path`.
    self._stack = contextlib.ExitStack()

  def claim(self, nbytes: int) -> None:
    """Records that a dataset will keep `nbytes` of parsed rows here."""
    self.claimed += nbytes

  def __enter__(self) -> 'CacheFolder':
    self.path = self._stack.enter_context(scratch.folder(KIND))
    return self

  def __exit__(self, *unused) -> None:
    self._stack.close()

  def clear(self) -> None:
    """Removes what the datasets wrote (the folder stays)."""
    for name in os.listdir(self.path) if self.path else ():
      if name != scratch.LOCK_FILE:
        removal.remove_tree(os.path.join(self.path, name), ignore_errors=True)
    self.on_disk = []
    self.claimed = 0


# What a write says when the disk is full, or this process may write no
# more (quota, RLIMIT_FSIZE): TensorFlow's errors carry the text only.
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_FULL_TEXT = tuple(os.strerror(code) for code in _FULL)


def disk_full(error: BaseException) -> bool:
  """Whether `error` (or an error it was raised from) says the disk is
  full."""
  while error is not None:
    if getattr(error, 'errno', None) in _FULL or any(
        text in str(error) for text in _FULL_TEXT):
      return True
    error = error.__cause__ or error.__context__
  return False


def remove_stale(parent: Optional[str] = None) -> None:
  """Removes the scratch folders in `parent` (default: TMPDIR) that no
  process uses (see `scratch.remove_stale`)."""
  scratch.remove_stale(parent)
