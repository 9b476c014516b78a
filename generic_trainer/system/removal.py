"""Removing a tree of ours without following a link: the one way the
package removes a local folder with what it holds.

`tf.io.gfile.rmtree` follows links (a link put at
`.publishing/Format-Serving` made the staging cleanup empty the folder it
pointed to), and `shutil.rmtree` takes its top by path. `remove_tree`
opens every folder with O_NOFOLLOW relative to its parent's descriptor
and removes each entry relative to it (`unlink`/`rmdir` with `dir_fd=`):
a link, where found, is removed itself, and what it points to is never
touched. Object-store paths go to `tf.io.gfile` (there are no links
there).
"""

import errno
import os
import stat
from typing import Optional

from generic_trainer.system import paths
from generic_trainer.system.lazy import tf

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str, dir_fd: Optional[int] = None,
                missing_ok: bool = True, ignore_errors: bool = False) -> None:
  """Removes `path` (relative to the folder `dir_fd` when given): a file or
  a link itself, a folder with all it holds, no link followed at any
  level. An object-store path is removed with `tf.io.gfile.rmtree`.
  `ignore_errors`: what cannot be removed stays, without an error (as
  `shutil.rmtree(ignore_errors=True)`).

  Raises:
    FileNotFoundError: nothing at `path`, unless `missing_ok`.
    OSError: an entry could not be removed.
  """
  if ignore_errors:
    try:
      remove_tree(path, dir_fd)
    except (OSError, tf.errors.OpError if paths.is_remote(path) else OSError):
      pass
    return
  if dir_fd is None and paths.is_remote(path):
    if tf.io.gfile.exists(path):
      tf.io.gfile.rmtree(path)
    elif not missing_ok:
      raise FileNotFoundError(errno.ENOENT, 'No such file or folder', path)
    return
  if dir_fd is None:
    path = os.path.abspath(path)
    parent = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY |
                     os.O_CLOEXEC)
    try:
      _remove_entry(parent, os.path.basename(path), missing_ok)
    finally:
      os.close(parent)
    return
  _remove_entry(dir_fd, path, missing_ok)


def _remove_entry(parent: int, name: str, missing_ok: bool) -> None:
  """Removes the entry `name` of the folder open as `parent`."""
  try:
    info = os.stat(name, dir_fd=parent, follow_symlinks=False)
  except FileNotFoundError:
    if missing_ok:
      return
    raise
  if not stat.S_ISDIR(info.st_mode):
    os.unlink(name, dir_fd=parent)
    return
  try:
    fd = os.open(name, _FOLDER, dir_fd=parent)
  except OSError as e:
    if e.errno in (errno.ELOOP, errno.ENOTDIR):  # Swapped for a link/file.
      os.unlink(name, dir_fd=parent)
      return
    raise
  try:
    if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (info.st_dev,
                                                      info.st_ino):
      raise OSError(errno.EBUSY, 'replaced while it was removed', name)
    for entry in os.listdir(fd):
      _remove_entry(fd, entry, True)
  finally:
    os.close(fd)
  os.rmdir(name, dir_fd=parent)
