"""The local folder where one training keeps parsed rows on disk.

A folder of the system's temporary directory (TMPDIR), named after the
process (`generic-trainer-cache-<pid>-...`), removed when the training ends.
A process killed before that (SIGKILL, out of memory) leaves its folder;
the next training on the machine removes the folders of processes that no
longer run, so a crash does not eat the disk the next run would cache on.
"""

import os
import re
import shutil
import tempfile
from typing import Optional

PREFIX = 'generic-trainer-cache-'
_OWNED = re.compile(re.escape(PREFIX) + r'(\d+)-')


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

  def claim(self, nbytes: int) -> None:
    """Records that a dataset will keep `nbytes` of parsed rows here."""
    self.claimed += nbytes

  def __enter__(self) -> 'CacheFolder':
    remove_stale()
    self.path = tempfile.mkdtemp(prefix=f'{PREFIX}{os.getpid()}-')
    return self

  def __exit__(self, *unused) -> None:
    if self.path:
      shutil.rmtree(self.path, ignore_errors=True)


def remove_stale(parent: Optional[str] = None) -> None:
  """Removes the cache folders in `parent` (default: TMPDIR) whose process
  no longer runs."""
  parent = parent or tempfile.gettempdir()
  try:
    names = os.listdir(parent)
  except OSError:
    return
  for name in names:
    owner = _OWNED.match(name)
    if owner and not _running(int(owner.group(1))):
      shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _running(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Another user's process.
    return True
  return True
