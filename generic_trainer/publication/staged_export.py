"""Atomic publication of the exported model into the Model artifact.

`run_fn` writes into a staging directory inside the Model artifact's URI.
Only after the export is validated is the staged `Format-Serving` directory
renamed to its final place, the last step of a successful execution, so a
Pusher never finds a half-written or rejected model there. A rejected export
is moved to `keep_dir/rejected_export/` for inspection. In a pipeline
`keep_dir` is the node's stateful working dir: TFX's launcher deletes the
output artifact folders of a failed execution, but keeps that one.

File operations use `tf.io.gfile` (what TFX's `fileio` uses when TensorFlow
is installed), so local and remote (gs://...) URIs work, and the local
command does not import TFX; removals go through `system.removal`, which
never follows a local link (gfile's rmtree does).

A local staging folder is the run's alone from birth (issue 55): made 0700
whatever the umask, and held by its identity (device, inode). User code
may set `os.umask(0)` (some libraries do), and TensorFlow then writes the
export 0777/0666; inside a folder no one else may enter, a teammate who
can reach the output folder can neither change the export's files in
place nor replace them while it is validated. `publish` seals the export
and renames it out of the folder it opened again without following a
link (`os.rename` with `src_dir_fd`/`dst_dir_fd`), after checking that
folder is the one it made.
"""

import contextlib
import errno
import os
import stat
from typing import Optional, Tuple

from generic_trainer.errors import ExportValidationError
from generic_trainer.system import output_folder
from generic_trainer.system import paths
from generic_trainer.system import removal
from generic_trainer.system import trust
from generic_trainer.errors import InvalidArgumentError, UnsafeFolderError
import tensorflow as tf
from absl import logging
from generic_trainer.keys import REJECTED_DIR_NAME

STAGING_DIR_NAME = '.staging'
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class StagedExport:
  """The staging and final locations of one execution's export."""

  def __init__(self, model_uri: str, keep_dir: str):
    self.model_uri = model_uri
    self.keep_dir = keep_dir
    self.root = os.path.join(model_uri, STAGING_DIR_NAME)
    self.serving_dir, self.eval_dir = paths.model_dirs(self.root)
    self.final_serving_dir, self.final_eval_dir = paths.model_dirs(model_uri)
    # The local staging folder made by `prepare`: (device, inode).
    self._made: Optional[Tuple[int, int]] = None

  def prepare(self) -> None:
    """Clears what an earlier, killed attempt left and creates staging.

    Raises:
      InvalidArgumentError: the Model artifact's folder cannot be written,
        found before any training.
    """
    gfile = _gfile()
    try:
      for path in (self.root, self.final_serving_dir, self.final_eval_dir):
        if gfile.exists(path):
          removal.remove_tree(path)
      if paths.is_remote(self.root):
        gfile.makedirs(self.root)
        probe = os.path.join(self.root, '.writable')
        with gfile.GFile(probe, 'w') as f:
          f.write('')
        gfile.remove(probe)
      else:
        gfile.makedirs(self.model_uri)
        self._made = _make_private(self.model_uri, STAGING_DIR_NAME)
    except (OSError, tf.errors.OpError) as e:
      raise InvalidArgumentError(
          f"Cannot write the model's folder {self.model_uri}: "
          f'{type(e).__name__}: {e}. Received: a folder this process cannot '
          'write to. Expected a folder this process can '
          'write (the pipeline root, or --output-dir). Check its permissions '
          'and free space. Nothing was trained.') from e

  @contextlib.contextmanager
  def attempt(self):
    """Prepares staging; if the block raises, moves what it staged away.

    The block trains into `serving_dir` and validates the export. An
    `ExportValidationError` is raised again with where the rejected export
    is kept; any other error propagates unchanged. Call `publish` after the
    block.
    """
    self.prepare()
    try:
      yield self
    except ExportValidationError as e:
      kept = self.reject()
      where = (f'the rejected export is kept in {kept} for inspection' if kept
               else 'nothing was staged')
      raise type(e)(f'{e}\nNothing was published; {where}.') from e
    except BaseException:
      kept = self.reject()
      if kept:
        logging.error('Training failed; what it staged is kept in %s.', kept)
      raise

  def publish(self) -> str:
    """Moves the staged export into place, no more open than the run's
    inputs (`output_folder.seal`); returns the serving model dir."""
    gfile = _gfile()
    if not paths.is_remote(self.root):
      self._publish_held()
      return self.final_serving_dir
    # The serving dir goes last: its appearance is the commit point.
    for staged, final in ((self.eval_dir, self.final_eval_dir),
                          (self.serving_dir, self.final_serving_dir)):
      if gfile.exists(staged):
        gfile.rename(staged, final)
    removal.remove_tree(self.root)
    return self.final_serving_dir

  def _publish_held(self) -> None:
    """`publish` of a local export: the staging folder and the Model
    folder opened without following a link, the staging folder checked
    to be the one `prepare` made, each staged model sealed and renamed
    by descriptor, its identity the same after as before.

    Raises:
      UnsafeFolderError: the staging folder, or a model in it, was
        replaced since it was made (row 570); nothing is published.
    """
    parent = os.open(self.model_uri, _FOLDER)
    try:
      root = _open_made(parent, self.root, self._made)
      try:
        # The serving dir goes last: its appearance is the commit point.
        for staged, final in ((self.eval_dir, self.final_eval_dir),
                              (self.serving_dir, self.final_serving_dir)):
          name = os.path.basename(staged)
          try:
            info = os.stat(name, dir_fd=root, follow_symlinks=False)
          except FileNotFoundError:
            continue
          if not stat.S_ISDIR(info.st_mode):
            raise _replaced(staged, 'is no folder (a link or a file)')
          # Whatever the umask user code set (`os.umask(0)`).
          output_folder.seal(os.path.join(trust.fd_path(root, self.root),
                                          name))
          os.rename(name, os.path.basename(final), src_dir_fd=root,
                    dst_dir_fd=parent)
          moved = os.stat(os.path.basename(final), dir_fd=parent,
                          follow_symlinks=False)
          if (moved.st_dev, moved.st_ino) != (info.st_dev, info.st_ino):
            raise _replaced(final, 'changed while it was moved into place')
      finally:
        os.close(root)
      removal.remove_tree(STAGING_DIR_NAME, dir_fd=parent)
    finally:
      os.close(parent)

  def reject(self) -> str:
    """Moves whatever was staged to keep_dir; returns where, or ''."""
    gfile = _gfile()
    if not gfile.exists(self.root):
      return ''
    if not gfile.listdir(self.root):
      removal.remove_tree(self.root)
      return ''
    target = os.path.join(self.keep_dir, REJECTED_DIR_NAME)
    if gfile.exists(target):
      removal.remove_tree(target)
    gfile.makedirs(self.keep_dir)
    gfile.rename(self.root, target)
    return target


def _gfile():
  return tf.io.gfile


def _make_private(parent_path: str, name: str) -> Tuple[int, int]:
  """Makes the folder `name` in `parent_path`, 0700 whatever the umask,
  without following a link at either; returns its (device, inode)."""
  parent = os.open(parent_path, _FOLDER)
  try:
    os.mkdir(name, 0o700, dir_fd=parent)
    fd = os.open(name, _FOLDER, dir_fd=parent)
    try:
      os.fchmod(fd, 0o700)  # The folder made, not a link put there since.
      info = os.fstat(fd)
      return info.st_dev, info.st_ino
    finally:
      os.close(fd)
  finally:
    os.close(parent)


def _open_made(parent: int, path: str,
               made: Optional[Tuple[int, int]]) -> int:
  """A descriptor of the staging folder `path` (in the folder open as
  `parent`), not followed if a link, when it is the one `made`."""
  try:
    fd = os.open(os.path.basename(path), _FOLDER, dir_fd=parent)
  except OSError as e:
    if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
      raise _replaced(path, 'is no longer the folder it made') from e
    raise
  info = os.fstat(fd)
  if made is None or (info.st_dev, info.st_ino) != made:
    os.close(fd)
    raise _replaced(path, 'is no longer the folder it made')
  return fd


def _replaced(path: str, what: str) -> UnsafeFolderError:
  """Row 570: what a run staged was replaced before it was published."""
  return UnsafeFolderError(
      f'The export staged in {path} {what}: the run made its staging folder '
      '0700, its own alone, and a process with the right to rename in a '
      'folder above it (another process of yours, root, or whoever else can '
      'write there) replaced it. Expected the folder the run made, holding the export it validated. '
      f'Received: {path}, replaced since it was made. Nothing was '
      'published. Check who else can write the output folder and the '
      'folders above it, then run again.')
