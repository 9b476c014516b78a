"""A full disk, recognised in whatever error a writer raised.

Writers report a full disk each in its own words: Python's OSError
(errno ENOSPC, or EDQUOT for a quota), h5py's `OSError: [Errno 28] Unable
to synchronously create file` or, when the disk fills between the first
write and the close, `RuntimeError: ... Disable slist on flush dest
failure` (HDF5 cannot flush its metadata), TensorFlow's
ResourceExhaustedError or InternalError from a file write. None of them
says what the user can do. `error_for` turns any of them, found anywhere in
the chain of causes, into a StorageError that does; the original stays as
its `__cause__`.
"""

import errno
import os
import re
import shutil
from typing import Optional

from generic_trainer.errors import StorageError
from generic_trainer.errors import summarize

_CODES = (errno.ENOSPC, errno.EDQUOT)
_WORDS = ('No space left on device', 'Disk quota exceeded', 'errno = 28',
          'Disable slist on flush dest failure', 'ENOSPC')
_FILENAME = re.compile(r"filename = '([^']+)'")


def find(error: BaseException) -> Optional[BaseException]:
  """The error of the chain (`error`, its causes and contexts) that says
  the disk is full, or None."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno in _CODES:
      return error
    text = str(getattr(error, 'message', None) or error)
    if any(word in text for word in _WORDS):
      return error
    error = error.__cause__ or error.__context__
  return None


def error_for(error: BaseException, what: str,
              folder: Optional[str] = None) -> Optional[StorageError]:
  """A StorageError for `error` if it comes from a full disk, else None.

  Args:
    error: What the writer raised.
    what: What was being written, for the message ('TrainSpec Spec
      (module_file=...)').
    folder: A folder on the disk that filled, when known.
  """
  full = find(error)
  if full is None:
    return None
  path = getattr(full, 'filename', None)
  match = _FILENAME.search(str(full))
  text = str(getattr(full, 'message', None) or full)
  if not path and '; No space left on device' in text:  # TensorFlow's form.
    path = text.split('; No space left on device')[0].strip() or None
  path = path or (match.group(1) if match else None) or folder
  where = f' ({path})' if path else ''
  free = _free(path)
  return StorageError(
      f'The disk filled while {what} wrote{where}: {type(full).__name__}: '
      f'{summarize(full)}. Expected free space for the checkpoints and the '
      f'export. Received: no space left{free}. Free space on that disk, or '
      'point the output (--output-dir, or the pipeline root) at a disk with '
      'room, and run again; nothing was published, and an earlier model is '
      'unchanged.')


def _free(path: Optional[str]) -> str:
  """' (12 MiB free on that disk now)', or '' if unknown."""
  while path and not os.path.isdir(path):
    parent = os.path.dirname(path)
    if parent == path:
      return ''
    path = parent
  if not path:
    return ''
  try:
    free = shutil.disk_usage(path).free
  except OSError:
    return ''
  return f' ({free / 2**20:.0f} MiB free on that disk now)'
