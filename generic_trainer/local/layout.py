"""The output folder of a local run, and how a new model replaces the old.

    model/                  the SavedModel, there only once it is validated
    eval_model/             an eval SavedModel, when run_fn wrote one
    run/                    history.json, tensorboard/, checkpoints/,
                            train_result.json; rejected_export/ after a
                            rejected export
    .resume-<key>/          an interrupted training's checkpoint
    data/Split-train, data/Split-eval   the data as ExampleGen lays it out
    schema/schema.pbtxt     the schema used (inferred or given)
    hyperparameters/        the --hparams JSON, when given
    .publishing/            the export being staged and validated

A new run clears what an earlier run wrote, except `model/` and
`eval_model/`: the earlier model stays as it was until the new one is
validated, and then `take_model` replaces it (a rename aside, then a rename
into place; a run killed between the two puts the earlier model back when
the folder is next used). A failed run leaves the earlier model untouched.
"""

import os
import shutil
from typing import List, Optional


class Layout:
  """The paths of the output folder."""

  MARKER = '.generic-trainer'  # Says a run wrote the folders below.
  CHECKPOINT_PREFIX = '.resume-'  # + resume_key: one training's checkpoint.

  def __init__(self, output_dir: str):
    self.root = output_dir
    self.marker = os.path.join(output_dir, self.MARKER)
    self.model = os.path.join(output_dir, 'model')
    self.eval_model = os.path.join(output_dir, 'eval_model')
    self.run = os.path.join(output_dir, 'run')
    self.data = os.path.join(output_dir, 'data')
    self.schema_dir = os.path.join(output_dir, 'schema')
    self.schema = os.path.join(self.schema_dir, 'schema.pbtxt')
    self.hparams_dir = os.path.join(output_dir, 'hyperparameters')
    self.base_model = os.path.join(output_dir, '.base-model')
    self.publishing = os.path.join(output_dir, '.publishing')
    # The earlier model, for the moment between two renames (take_model).
    self.previous_model = os.path.join(output_dir, '.previous-model')
    self.previous_eval_model = os.path.join(output_dir,
                                            '.previous-eval-model')
    self.rejected = os.path.join(self.run, 'rejected_export')

  def managed(self) -> List[str]:
    """What a run writes."""
    return [self.model, self.eval_model] + self.replaced()

  def replaced(self) -> List[str]:
    """What a new run replaces as it starts: all it writes but the model."""
    return [self.run, self.data, self.schema_dir, self.hparams_dir,
            self.publishing, self.base_model]

  def resume_dir(self, key: str) -> str:
    """The checkpoint folder of the training with `resume_key` `key`."""
    return os.path.join(self.root, self.CHECKPOINT_PREFIX + key)

  def foreign(self) -> List[str]:
    """The folders a run writes that exist but no earlier run wrote."""
    if os.path.exists(self.marker):
      return []
    return [p for p in self.managed() if os.path.lexists(p)]

  def clear(self, keep: Optional[str] = None) -> None:
    """Removes what an earlier run wrote, except the checkpoint folder
    `keep`; marks the folder as a run's."""
    if self.foreign():  # The command checks it first, with its flag name.
      from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
      raise InvalidArgumentError(
          f'{self.root} already holds {self.foreign()}, which no run wrote '
          'and a run would replace. Expected a new or empty folder, or one '
          'an earlier run wrote. Choose another output folder.')
    self.recover()
    stale = [os.path.join(self.root, name) for name in (
        os.listdir(self.root) if os.path.isdir(self.root) else ())
             if name.startswith(self.CHECKPOINT_PREFIX)]
    for path in self.replaced() + stale:
      if os.path.lexists(path) and path != keep:
        shutil.rmtree(path)
    os.makedirs(self.root, exist_ok=True)
    with open(self.marker, 'w') as f:
      f.write('Written by generic-trainer; a new run replaces run/, data/, '
              'schema/ and hyperparameters/ as it starts, and model/ once '
              'its own model is validated.\n')

  def link_base_model(self, saved_model_dir: str) -> str:
    """A Model artifact folder whose Format-Serving is `saved_model_dir`
    (a link), for the executor's base_model input; returns the folder."""
    from generic_trainer.core.publish import SERVING_MODEL_DIR  # pylint: disable=g-import-not-at-top
    os.makedirs(self.base_model, exist_ok=True)
    os.symlink(saved_model_dir, os.path.join(self.base_model,
                                             SERVING_MODEL_DIR))
    return self.base_model

  def take_model(self) -> None:
    """Puts the validated export in `publishing` in place of model/ (and
    eval_model/): the commit point of a run."""
    from generic_trainer.core.publish import EVAL_MODEL_DIR, SERVING_MODEL_DIR  # pylint: disable=g-import-not-at-top
    self.recover()
    new_eval = os.path.join(self.publishing, EVAL_MODEL_DIR)
    for final, previous in ((self.model, self.previous_model),
                            (self.eval_model, self.previous_eval_model)):
      if os.path.lexists(final):
        os.rename(final, previous)
    if os.path.isdir(new_eval):
      os.rename(new_eval, self.eval_model)
    os.rename(os.path.join(self.publishing, SERVING_MODEL_DIR), self.model)
    for previous in (self.previous_model, self.previous_eval_model):
      if os.path.lexists(previous):
        shutil.rmtree(previous)

  def recover(self) -> None:
    """Puts back the earlier model if a run was killed while replacing it
    (between the two renames); drops it if the new one is in place."""
    for final, previous in ((self.model, self.previous_model),
                            (self.eval_model, self.previous_eval_model)):
      if os.path.lexists(previous):
        if os.path.lexists(final):
          shutil.rmtree(previous)
        else:
          os.rename(previous, final)
