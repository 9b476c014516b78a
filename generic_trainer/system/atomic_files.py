"""Every file GenericTrainer writes, replaced whole: the old file or the new,
never half of one.

Locally a file is written to a temporary file in the same folder, flushed
and fsynced, then renamed over its name (`os.replace`, atomic on POSIX) and
the folder fsynced, as Orbax's `AtomicRenameTemporaryPath` does for a
checkpoint. A writer that needs a path rather than a file object (h5py,
TFRecordWriter) gets the temporary path from `replacing_path`. On an
object store (`gs://`, `s3://`) an object appears whole when its upload
completes, so it is written directly.

A new file gets `mode` when one is given (`copy` passes the source's:
outputs keep their input's permissions), else what `open` would give it
(0666); the umask applies to both (while a run holds its output folder,
`output_folder.hold` sets it from the inputs: 022, or 077 for a private
input). That run's umask applies even when user code has lifted the
process's (`os.umask(0)`: a checkpoint 0666 in a 0777 folder, which a
teammate could change in place), and so do the folders `replacing_path`
makes, each made with its mode, not the umask's (issue 55). `tests/test_shared_machine.py` scans the package for
writes that bypass this module.
"""

import contextlib
import json
import os
import shutil
import tempfile
from typing import Any, Iterator, Optional
import errno

from generic_trainer.system import journal
from generic_trainer.system import output_folder
from generic_trainer.system import removal
from generic_trainer.system import trust
from generic_trainer.system.lazy import ctypes
from generic_trainer.system.lazy import tf

TEMP_PREFIX = '.tmp-'  # Temporary files start so: leftovers are ours.


def write_text(path: str, text: str, mode: Optional[int] = None) -> str:
  """Replaces `path` with `text` (UTF-8); returns `path`."""
  return write_bytes(path, text.encode('utf-8'), mode)


def write_json(path: str, value: Any, mode: Optional[int] = None,
               **dump_args) -> str:
  """Replaces `path` with `value` as JSON (`json.dumps(value, **dump_args)`)."""
  return write_text(path, json.dumps(value, **dump_args), mode)


def write_bytes(path: str, data: bytes, mode: Optional[int] = None) -> str:
  """Replaces `path` with `data`; returns `path`."""
  if _remote(path):
    with tf.io.gfile.GFile(path, 'wb') as f:
      f.write(data)
    return path
  with replacing_path(path, mode) as temp:
    fd = os.open(temp, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    try:
      view = memoryview(data)
      while view:
        view = view[os.write(fd, view):]
    finally:
      os.close(fd)
  return path


def copy(source: str, target: str) -> str:
  """Replaces `target` with a copy of `source`, which keeps its permissions."""
  with replacing_path(target, os.stat(source).st_mode & 0o777) as temp:
    with open(source, 'rb') as src, open(temp, 'r+b') as dst:
      shutil.copyfileobj(src, dst)
  return target


@contextlib.contextmanager
def replacing_path(path: str, mode: Optional[int] = None,
                   suffix: str = '') -> Iterator[str]:
  """Yields a new, empty temporary file beside `path` for the block to
  write (by its path; its name ends in `suffix`, for writers that read the
  format from the name); when the block ends without an error, the file is
  fsynced and put in place of `path`. On an error it is removed and `path`
  is as it was.

  An object-store `path` is yielded as it is (its upload is atomic).
  """
  if _remote(path):
    yield path
    return
  folder = os.path.dirname(os.path.abspath(path))
  make_folders(folder)
  fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX + os.path.basename(path)[:64]
                              + '-', suffix=suffix, dir=folder)
  try:
    try:  # Through the descriptor made: a link put at `temp` is not followed.
      os.fchmod(fd, _umasked(0o666 if mode is None else mode))
    finally:
      os.close(fd)
    yield temp
    put_in_place(temp, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.unlink(temp)
    raise


def make_folders(folder: str) -> None:
  """Makes the local folder `folder` and its missing parents, each with
  the mode `os.makedirs` gives under the run's umask (`_umasked`), set
  explicitly: user code's `os.umask(0)` makes none of them writable by
  others. An object-store folder is made with `tf.io.gfile`."""
  if _remote(folder):
    tf.io.gfile.makedirs(folder)
    return
  trust.make_private(folder, _umasked(0o777))


def put_in_place(temp: str, path: str) -> None:
  """fsyncs the complete file `temp` and renames it over `path` (the same
  folder), then fsyncs the folder."""
  sync_file(temp)
  made = os.lstat(temp)
  os.replace(temp, path)
  sync_folder(os.path.dirname(os.path.abspath(path)))
  journal.note(path, made)  # The run's, by its identity (`journal`).


def replace_folder(new: str, target: str) -> None:
  """Puts the folder `new` in place of `target` (same filesystem) so that
  `target` never disappears: a rename when it is absent, else an exchange
  (renameat2 RENAME_EXCHANGE), the old one deleted after; where the kernel
  cannot exchange, two renames. A link at `target` is replaced itself,
  never followed."""
  if not os.path.lexists(target):
    os.rename(new, target)
    return
  if exchange(new, target):
    old = new  # It names the earlier folder (or link) now.
  else:
    old = f'{new}.old'
    os.rename(target, old)
    os.rename(new, target)
  removal.remove_tree(old)


def exchange(first: str, second: str) -> bool:
  """Swaps two paths in one step (renameat2 RENAME_EXCHANGE); False when
  the kernel, the C library or the filesystem cannot."""
  try:
    renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
  except (OSError, AttributeError):
    return False
  at_fdcwd, rename_exchange = -100, 2
  if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second),
               rename_exchange) == 0:
    return True
  code = ctypes.get_errno()
  if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
    return False
  raise OSError(code, os.strerror(code), second)


def sync_file(path: str) -> None:
  """fsyncs a complete file (before a rename makes it visible)."""
  fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def sync_folder(folder: str) -> None:
  """fsyncs a folder, so that a rename in it survives a power cut."""
  try:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass  # Some filesystems cannot fsync a folder; the rename still holds.
  finally:
    os.close(fd)


def _umasked(mode: int) -> int:
  """`mode` less the process's umask (read from /proc, so that no other
  thread sees the umask change; else by setting it back) and less the
  umask of the run that holds its folder (`output_folder.held_umask`)."""
  return mode & ~(_process_umask() | output_folder.held_umask())


def _process_umask() -> int:
  try:
    with open('/proc/self/status') as f:
      for line in f:
        if line.startswith('Umask:'):
          return int(line.split()[1], 8)
  except (OSError, ValueError):
    pass
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


def _remote(path: str) -> bool:
  return '://' in path
