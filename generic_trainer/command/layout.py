"""The output folder of a local run, and how a new model replaces the old.

    model -> .models/model-<version>        the SavedModel, there only once
                                            it is validated (a link we make)
    eval_model -> .models/eval_model-<v>    an eval SavedModel, when run_fn
                                            wrote one
    run/                    history.json, tensorboard/, checkpoints/,
                            train_result.json; rejected_export/ after a
                            rejected export
    .resume-<key>/          an interrupted training's checkpoint
    data/Split-train, data/Split-eval   the data as ExampleGen lays it out
    schema/schema.pbtxt     the schema used (inferred or given)
    hyperparameters/        the --hparams JSON, when given
    .publishing/            the export being staged and validated
    .generic-trainer        what the last run wrote (`manifest`)
    .generic-trainer.lock   held by the run in progress (`output_folder`)

A new run removes what the earlier run wrote, and only that (`manifest`: a
file a user put in `data/` stays), except `model/` and `eval_model/`: the
earlier model stays as it was until the new one is validated. Then
`take_model` moves the new one into `.models/` and swaps the `model` link
to it in one rename, so `model/` never disappears and a reader sees the old
model or the new one; the old version is deleted after. No step follows a
link: a `model/` that is a link we did not make, a file, or a mount point is
refused before training (`check_model_place`). A `model/` folder of an
older version is swapped with the link by `renameat2(RENAME_EXCHANGE)`
where the kernel has it, else by two renames that `recover` completes if
the run is killed between them. A failed run leaves the earlier model
untouched.
"""

import json
import os
import shutil
import time
from typing import List, Optional

from generic_trainer.system import atomic_files
from generic_trainer.errors import ModelFolderError, UnsafeFolderError
from generic_trainer.command import manifest

from generic_trainer.keys import EVAL_MODEL_DIR, SERVING_MODEL_DIR
from generic_trainer.errors import InvalidArgumentError

MODELS = '.models'  # The versions `model` and `eval_model` link to.
LISTING = '.files.json'  # Beside a version: what it held when published.


class Layout:
  """The paths of the output folder."""

  MARKER = manifest.FILE  # Says a run wrote the folders below, and what.
  CHECKPOINT_PREFIX = '.resume-'  # + resume_key: one training's checkpoint.

  def __init__(self, output_dir: str):
    self.root = output_dir
    self.marker = os.path.join(output_dir, self.MARKER)
    self.model = os.path.join(output_dir, 'model')
    self.eval_model = os.path.join(output_dir, 'eval_model')
    self.models = os.path.join(output_dir, MODELS)
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
    self._roots: List[str] = []
    self._foreign = set()

  def managed(self) -> List[str]:
    """What a run writes."""
    return [self.model, self.eval_model, self.models] + self.replaced()

  def replaced(self) -> List[str]:
    """What a new run replaces as it starts: all it writes but the model."""
    return [self.run, self.data, self.schema_dir, self.hparams_dir,
            self.publishing, self.base_model]

  @staticmethod
  def holds_checkpoint(path: str) -> bool:
    """Whether an earlier, unfinished run left a checkpoint in `path`."""
    return os.path.isdir(path) and bool(os.listdir(path))

  def resume_dir(self, key: str) -> str:
    """The checkpoint folder of the training with `resume_key` `key`."""
    return os.path.join(self.root, self.CHECKPOINT_PREFIX + key)

  def foreign(self) -> List[str]:
    """The folders a run writes that exist but no earlier run wrote."""
    if os.path.lexists(self.marker):
      return []
    return [p for p in self.managed() if os.path.lexists(p)]

  def clear(self, keep: Optional[str] = None,
            checkpoint: Optional[str] = None) -> None:
    """Removes what the earlier run wrote (`manifest`), except the
    checkpoint folder `keep`, and records this run's start: it writes the
    `replaced` folders and `checkpoint`. Call `record` when the run ends.

    Raises:
      InvalidArgumentError: the folder holds folders a run writes that no
        run wrote (the command checks it first, with its flag name).
      ModelFolderError: see `check_model_place`.
      UnsafeFolderError: a folder the run writes (`data`, `run`...) is a
        link that no run made.
    """
    if self.foreign():
      raise InvalidArgumentError(
          f'{self.root} already holds {self.foreign()}, which no run wrote '
          'and a run would replace. Expected a new or empty folder, or one '
          f'an earlier run wrote. Received: {self.foreign()}. Choose another '
          'output folder.')
    self.check_model_place()
    self.recover()
    os.makedirs(self.root, exist_ok=True)
    manifest.remove(self.root, manifest.ours(self.root,
                                             manifest.read(self.root)), keep)
    for name in os.listdir(self.root):  # Named by us: `.resume-<key>`.
      path = os.path.join(self.root, name)
      if name.startswith(self.CHECKPOINT_PREFIX) and path != keep:
        _remove(path)
    self._remove_unused_versions()
    for path in self.replaced():
      if os.path.islink(path):
        name = os.path.basename(path)
        raise UnsafeFolderError(
            f'{path} is a link to {os.readlink(path)!r}, which no run made. '
            f'A run writes its {name}/ there, and would write through the '
            'link. Expected it to be absent, or a folder a run made. '
            f'Received: {path} -> {os.readlink(path)}. Remove the link, or '
            'choose another output folder. Nothing was trained.')
    self._roots = [os.path.relpath(p, self.root) for p in self.replaced()]
    for extra in (keep, checkpoint):
      if extra and os.path.relpath(extra, self.root) not in self._roots:
        self._roots.append(os.path.relpath(extra, self.root))
    kept = manifest.entries(self.root, [os.path.relpath(keep, self.root)]
                            ) if keep else set()
    self._foreign = manifest.entries(self.root, self._roots) - kept
    manifest.start(self.root, self._roots, self._foreign)

  def record(self) -> None:
    """Records what this run wrote (after `clear`), for the next run."""
    if self._roots:
      try:
        manifest.finish(self.root, self._roots, self._foreign)
      except OSError:
        pass  # A full disk: the start record still says what to remove.

  def link_base_model(self, saved_model_dir: str) -> str:
    """A Model artifact folder whose Format-Serving is `saved_model_dir`
    (a link), for the executor's base_model input; returns the folder."""
    os.makedirs(self.base_model, exist_ok=True)
    link = os.path.join(self.base_model, SERVING_MODEL_DIR)
    target = os.path.realpath(saved_model_dir)  # Also when it is `link`.
    if os.path.islink(link):
      os.unlink(link)
    os.symlink(target, link)
    return self.base_model

  def check_model_place(self) -> None:
    """Raises ModelFolderError when `model/` or `eval_model/` cannot be
    replaced safely: a mount point, a link no run made, or a file."""
    for final in (self.model, self.eval_model):
      name = os.path.basename(final)
      if os.path.ismount(final):
        raise ModelFolderError(
            f'{final} is a mount point. A run publishes a model by swapping '
            f'{name}/ in one rename, which cannot replace a mount point (and '
            'deleting inside it would delete the model served from it). '
            f'Expected {name}/ to be absent, or a folder or link a run made. '
            f'Received: a mount at {final}. Unmount it, and mount the output '
            'folder, or a folder above it, instead; or copy the published '
            'model where it is served. Nothing was trained.')
      if os.path.islink(final) and not self._our_link(final):
        raise ModelFolderError(
            f'{final} is a link to {os.readlink(final)!r}, which no run '
            f'made. A run replaces {name} by replacing the link itself, never '
            'what it points to, so the link would be lost. Expected '
            f'{name} to be absent, or a link to {MODELS}/ made by a run. '
            f'Received: {final} -> {os.readlink(final)}. Remove the link '
            '(the run then publishes there), or point your server at '
            f'{final} after the run. Nothing was trained.')
      if os.path.lexists(final) and not os.path.isdir(final):
        raise ModelFolderError(
            f'{final} is a file. Expected {name} to be absent, or a folder '
            'or link a run made. Received: a file. Remove or rename the '
            'file. Nothing was trained.')

  def take_model(self) -> None:
    """Puts the validated export in `publishing` in place of model/ (and
    eval_model/): the commit point of a run."""
    self.check_model_place()
    self.recover()
    os.makedirs(self.models, exist_ok=True)
    version = f'{time.time_ns():x}-{os.getpid()}'
    # The serving model goes last: its link swap is the commit point.
    for final, staged in (
        (self.eval_model, os.path.join(self.publishing, EVAL_MODEL_DIR)),
        (self.model, os.path.join(self.publishing, SERVING_MODEL_DIR))):
      kind = os.path.basename(final)
      if not os.path.isdir(staged):
        if os.path.islink(final):
          os.unlink(final)  # This run wrote no eval model.
        elif os.path.isdir(final):
          os.rename(final, os.path.join(self.models, f'{kind}-old-{version}'))
        continue
      name = f'{kind}-{version}'
      os.rename(staged, os.path.join(self.models, name))
      # What the version holds now: only that is deleted with it.
      atomic_files.write_json(
          os.path.join(self.models, name + LISTING),
          sorted(manifest.entries(self.models, [name])))
      self._swap_link(final, os.path.join(MODELS, name))
    self._remove_unused_versions()

  def recover(self) -> None:
    """Puts back the earlier model if a run was killed while replacing it
    (between the two renames); drops it if the new one is in place."""
    for final, previous in ((self.model, self.previous_model),
                            (self.eval_model, self.previous_eval_model)):
      if os.path.lexists(previous):
        if os.path.lexists(final):
          _remove(previous)
        else:
          os.rename(previous, final)

  def _our_link(self, link: str) -> bool:
    """Whether `link` points where a run points it: .models/<kind>-..."""
    target = os.readlink(link)
    folder, name = os.path.split(target)
    return folder == MODELS and name.startswith(
        os.path.basename(link) + '-')

  def _swap_link(self, final: str, target: str) -> None:
    """Makes `final` a link to `target` in one rename (a folder of an
    older version: exchanged, or two renames that `recover` completes)."""
    temp = os.path.join(self.root, f'.tmp-link-{os.getpid()}')
    if os.path.lexists(temp):
      os.unlink(temp)
    os.symlink(target, temp)
    if os.path.islink(final) or not os.path.lexists(final):
      os.replace(temp, final)  # Replaces the link itself, never its target.
      return
    aside = os.path.join(self.models, f'{os.path.basename(final)}-old-'
                         f'{time.time_ns():x}')
    if atomic_files.exchange(temp, final):
      os.rename(temp, aside)  # `temp` now names the earlier folder.
      return
    previous = (self.previous_model if final == self.model else
                self.previous_eval_model)
    os.rename(final, previous)
    os.replace(temp, final)
    os.rename(previous, aside)

  def _remove_unused_versions(self) -> None:
    """Deletes the versions in .models/ that no link points to: what their
    listing names (a file a user put in `model/` stays, in its version's
    folder), or all of a version that never had one (never published)."""
    if not os.path.isdir(self.models) or os.path.islink(self.models):
      return
    used = {os.path.basename(os.readlink(l)) for l in (self.model,
                                                        self.eval_model)
            if os.path.islink(l)}
    for name in os.listdir(self.models):
      path = os.path.join(self.models, name)
      if name.endswith(LISTING):
        if os.path.lexists(path) and not os.path.lexists(
            path[:-len(LISTING)]):
          os.unlink(path)  # Its version is gone.
        continue
      if name in used or not name.startswith(('model-', 'eval_model-')):
        continue
      listing = path + LISTING
      if not os.path.isfile(listing):
        _remove(path)
        continue
      with open(listing, encoding='utf-8') as f:
        manifest.remove(self.models, json.load(f))
      if not os.path.lexists(path):
        os.unlink(listing)


def _remove(path: str) -> None:
  """Removes a file, a link (not what it points to) or a folder."""
  if os.path.islink(path) or not os.path.isdir(path):
    os.unlink(path)
  else:
    shutil.rmtree(path)

