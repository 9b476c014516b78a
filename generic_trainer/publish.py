"""Atomic publication of the exported model into the Model artifact.

`run_fn` writes into a staging directory inside the Model artifact's URI.
Only after the export is validated is the staged `Format-Serving` directory
renamed to its final place, the last step of a successful execution, so a
Pusher never finds a half-written or rejected model there. A rejected export
is moved to `keep_dir/rejected_export/` for inspection. In a pipeline
`keep_dir` is the node's stateful working dir: TFX's launcher deletes the
output artifact folders of a failed execution, but keeps that one.
"""

import os

STAGING_DIR_NAME = '.staging'
REJECTED_DIR_NAME = 'rejected_export'


class StagedExport:
  """The staging and final locations of one execution's export."""

  def __init__(self, model_uri: str, keep_dir: str):
    from tfx.utils import path_utils  # pylint: disable=g-import-not-at-top
    self.model_uri = model_uri
    self.keep_dir = keep_dir
    self.root = os.path.join(model_uri, STAGING_DIR_NAME)
    self.serving_dir = path_utils.serving_model_dir(self.root)
    self.eval_dir = path_utils.eval_model_dir(self.root)
    self.final_serving_dir = path_utils.serving_model_dir(model_uri)
    self.final_eval_dir = path_utils.eval_model_dir(model_uri)

  def prepare(self) -> None:
    """Clears what an earlier, killed attempt left and creates staging."""
    from tfx.dsl.io import fileio  # pylint: disable=g-import-not-at-top
    for path in (self.root, self.final_serving_dir, self.final_eval_dir):
      if fileio.exists(path):
        fileio.rmtree(path)
    fileio.makedirs(self.root)

  def publish(self) -> str:
    """Moves the staged export into place; returns the serving model dir."""
    from tfx.dsl.io import fileio  # pylint: disable=g-import-not-at-top
    # The serving dir goes last: its appearance is the commit point.
    for staged, final in ((self.eval_dir, self.final_eval_dir),
                          (self.serving_dir, self.final_serving_dir)):
      if fileio.exists(staged):
        fileio.rename(staged, final)
    fileio.rmtree(self.root)
    return self.final_serving_dir

  def reject(self) -> str:
    """Moves whatever was staged to keep_dir; returns where, or ''."""
    from tfx.dsl.io import fileio  # pylint: disable=g-import-not-at-top
    if not fileio.exists(self.root):
      return ''
    if not fileio.listdir(self.root):
      fileio.rmtree(self.root)
      return ''
    target = os.path.join(self.keep_dir, REJECTED_DIR_NAME)
    if fileio.exists(target):
      fileio.rmtree(target)
    fileio.makedirs(self.keep_dir)
    fileio.rename(self.root, target)
    return target
