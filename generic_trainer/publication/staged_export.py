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
"""

import contextlib
import os

from generic_trainer.errors import ExportValidationError
from generic_trainer.system import output_folder
from generic_trainer.system import paths
from generic_trainer.system import removal
from generic_trainer.errors import InvalidArgumentError
import tensorflow as tf
from absl import logging
from generic_trainer.keys import REJECTED_DIR_NAME

STAGING_DIR_NAME = '.staging'


class StagedExport:
  """The staging and final locations of one execution's export."""

  def __init__(self, model_uri: str, keep_dir: str):
    self.model_uri = model_uri
    self.keep_dir = keep_dir
    self.root = os.path.join(model_uri, STAGING_DIR_NAME)
    self.serving_dir, self.eval_dir = paths.model_dirs(self.root)
    self.final_serving_dir, self.final_eval_dir = paths.model_dirs(model_uri)

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
      gfile.makedirs(self.root)
      probe = os.path.join(self.root, '.writable')
      with gfile.GFile(probe, 'w') as f:
        f.write('')
      gfile.remove(probe)
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
    # The serving dir goes last: its appearance is the commit point.
    for staged, final in ((self.eval_dir, self.final_eval_dir),
                          (self.serving_dir, self.final_serving_dir)):
      if gfile.exists(staged):
        output_folder.seal(staged)  # Whatever the umask user code set.
        gfile.rename(staged, final)
    removal.remove_tree(self.root)
    return self.final_serving_dir

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
