"""The output folder of a local run, and how a new model replaces the old.

    model/                  the SavedModel, there only once it is
                            validated: a real folder (`cp -r`, object-store
                            copies and servers see the files themselves)
    eval_model/             an eval SavedModel, when run_fn wrote one
    .models/                a new model before it takes model/'s place, the
                            earlier one after; `listing-<inode>.json`: what
                            a published model folder held when published
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
file a user put in `data/` stays, and nothing is removed through a link),
except `model/` and `eval_model/`: the earlier model stays as it was until
the new one is validated. Then `take_model` moves the new one, complete,
into `.models/`, writes its listing, and exchanges the two folders in one
step (`renameat2(RENAME_EXCHANGE)`, through ctypes), so `model/` never
disappears and a reader sees the old model or the new one; the old one,
now in `.models/`, is deleted after (what its listing names: a file a user
put in `model/` stays, there). Where the filesystem or the kernel cannot
exchange (EINVAL: some network and FUSE filesystems; a kernel before
3.15), two renames: `model/` to `.previous-model`, the new one to
`model/`. For that moment there is no `model/` (a reader retries, as
after a `mv`); a run killed between them leaves the earlier model in
`.previous-model`, which `recover` puts back before anything else uses the
folder. A `model` link of an earlier version (`model -> .models/model-<v>`)
is exchanged the same way, then removed with its version. No step follows
a link: a `model` that is a link no run made, a file, or a mount point is
refused before training (`check_model_place`). A failed run leaves the
earlier model untouched.
"""

import contextlib
import fnmatch
import os
import time
from typing import List, Optional

from generic_trainer.system import atomic_files
from generic_trainer.system import journal
from generic_trainer.system import manifest
from generic_trainer.system import progress
from generic_trainer.system import removal
from generic_trainer.errors import ModelFolderError, UnsafeFolderError
from generic_trainer.data import statistics
from generic_trainer.data.local_files import MISSING_FILE
from generic_trainer.keys import MODEL_RUN_FILES, MODEL_RUN_FOLDERS
from generic_trainer.keys import SCHEMA_FILE, SPLIT_DATA_FILE

from generic_trainer.system import paths
from generic_trainer.errors import InvalidArgumentError

# The output folder's names, spelled here alone (the manifest's patterns
# below, `Layout`'s paths and what the command writes are made of them).
MODEL = 'model'
EVAL_MODEL = 'eval_model'
RUN = 'run'
DATA = 'data'
WHOLE = '.whole'  # In data/: the data before the eval rows are held out.
SCHEMA = 'schema'
HYPERPARAMETERS = 'hyperparameters'
HYPERPARAMETERS_FILE = 'hyperparameters.json'
BASE_MODEL = '.base-model'
PUBLISHING = '.publishing'
PREVIOUS_MODEL = '.previous-model'
PREVIOUS_EVAL_MODEL = '.previous-eval-model'
# + resume_key: one training's checkpoint folder.
RESUME_FOLDER_PREFIX = '.resume-'
MODELS = '.models'  # A model before it is published, and after.
LISTING = '.files.json'  # Beside a version a link pointed to (before 0.x).
LISTING_PREFIX = 'listing-'  # + a published folder's inode + '.json'.

_SPLITS = f'{DATA}/{statistics.split_folder("*")}'
# The split folders the command writes: only those, never another
# `data/Split-*` (a user's `Split-mine/data.gz` is not the run's).
_RUN_SPLITS = tuple(f'{DATA}/{statistics.split_folder(split)}'
                    for split in ('train', 'eval'))
_TEMPORARY = f'{atomic_files.TEMP_PREFIX}*'
_RESUMES = f'{RESUME_FOLDER_PREFIX}*'
# What versions before the manifest wrote, as patterns of relative paths.
LEGACY_NAMES = (RUN, f'{RUN}/*', DATA, _SPLITS, f'{_SPLITS}/*', SCHEMA,
                f'{SCHEMA}/{SCHEMA_FILE}', HYPERPARAMETERS,
                f'{HYPERPARAMETERS}/{HYPERPARAMETERS_FILE}', PUBLISHING,
                f'{PUBLISHING}/*', BASE_MODEL, f'{BASE_MODEL}/*', _RESUMES,
                f'{_RESUMES}/*')
# What a run writes, as patterns: what a killed run's successor removes
# (`manifest.named`: a `*` never spans a `/`; a last `/*`, all below). In
# run/ and in split folders, only the names the package writes there (the
# links to TFRecord files a split folder holds: `_a_runs_link`).
RUN_NAMES = (
    (RUN, f'{RUN}/{_TEMPORARY}') +
    tuple(f'{RUN}/{name}' for name in MODEL_RUN_FILES) +
    tuple(f'{RUN}/{name}{tail}' for name in MODEL_RUN_FOLDERS
          for tail in ('', '/*')) +
    (DATA,) + tuple(f'{split}{tail}' for split in _RUN_SPLITS for tail in (
        '', f'/{SPLIT_DATA_FILE}', f'/{_TEMPORARY}')) +
    (f'{DATA}/{MISSING_FILE}', f'{DATA}/{WHOLE}', f'{DATA}/{WHOLE}/*',
     f'{DATA}/{_TEMPORARY}', SCHEMA, f'{SCHEMA}/{SCHEMA_FILE}',
     f'{SCHEMA}/{_TEMPORARY}', HYPERPARAMETERS,
     f'{HYPERPARAMETERS}/{HYPERPARAMETERS_FILE}',
     f'{HYPERPARAMETERS}/{_TEMPORARY}', PUBLISHING, f'{PUBLISHING}/*',
     BASE_MODEL, f'{BASE_MODEL}/*', _RESUMES, f'{_RESUMES}/*'))


def _named_as_a_run_names(root: str, rel: str) -> bool:
  """Whether `rel`, left by a run killed before its end, is named as a run
  names what it writes (`RUN_NAMES`), or is a link in a split folder, as
  a run links TFRecord files there (removing a link never touches what it
  points to)."""
  if any(manifest.named(rel, p) for p in RUN_NAMES):
    return True
  return len(rel.split(os.sep)) == 3 and (
      os.sep.join(rel.split(os.sep)[:2]) in _RUN_SPLITS) and (
          os.path.islink(os.path.join(root, rel)))


def _named_as_a_legacy_run_names(rel: str) -> bool:
  """Whether `rel` is named as a version before the manifest named what it
  wrote (`LEGACY_NAMES`, and all under its own folders)."""
  return any(fnmatch.fnmatchcase(rel, p) for p in LEGACY_NAMES) or (
      rel.startswith((f'{RUN}/', f'{PUBLISHING}/', f'{BASE_MODEL}/',
                      RESUME_FOLDER_PREFIX))) or _under_split(rel)


def _under_split(rel: str) -> bool:
  parts = rel.split(os.sep)
  return len(parts) >= 2 and parts[0] == DATA and (
      statistics.is_split_folder(parts[1]))


class Layout:
  """The paths of the output folder."""

  MARKER = manifest.FILE  # Says a run wrote the folders below, and what.
  CHECKPOINT_PREFIX = RESUME_FOLDER_PREFIX

  def __init__(self, output_dir: str):
    self.root = output_dir
    self.marker = os.path.join(output_dir, self.MARKER)
    self.model = os.path.join(output_dir, MODEL)
    self.eval_model = os.path.join(output_dir, EVAL_MODEL)
    self.models = os.path.join(output_dir, MODELS)
    self.run = os.path.join(output_dir, RUN)
    self.data = os.path.join(output_dir, DATA)
    self.whole = os.path.join(self.data, WHOLE)
    self.schema_dir = os.path.join(output_dir, SCHEMA)
    self.schema = os.path.join(self.schema_dir, SCHEMA_FILE)
    self.hparams_dir = os.path.join(output_dir, HYPERPARAMETERS)
    self.hparams = os.path.join(self.hparams_dir, HYPERPARAMETERS_FILE)
    self.base_model = os.path.join(output_dir, BASE_MODEL)
    self.publishing = os.path.join(output_dir, PUBLISHING)
    # The earlier model, for the moment between two renames (take_model).
    self.previous_model = os.path.join(output_dir, PREVIOUS_MODEL)
    self.previous_eval_model = os.path.join(output_dir, PREVIOUS_EVAL_MODEL)
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
    for path in self.replaced():  # Before anything is removed.
      if os.path.islink(path):
        name = os.path.basename(path)
        raise UnsafeFolderError(
            f'{path} is a link to {os.readlink(path)!r}, which no run made. '
            f'A run writes its {name}/ there, and would write through the '
            'link. Expected it to be absent, or a folder a run made. '
            f'Received: {path} -> {os.readlink(path)}. Remove the link, or '
            'choose another output folder. Nothing was trained, nothing '
            'removed.')
    self.recover()
    atomic_files.make_folders(self.root)
    record = manifest.read(self.root)
    earlier = manifest.ours(self.root, record, _named_as_a_run_names,
                            _named_as_a_legacy_run_names)
    records = self._records_of(keep, record)
    manifest.remove(self.root, {rel: ident for rel, ident in earlier.items()
                                if rel not in records}, keep)
    self._name_what_stays(record, keep, records)
    for name in os.listdir(self.root):  # Named by us: `.resume-<key>`.
      path = os.path.join(self.root, name)
      if name.startswith(self.CHECKPOINT_PREFIX) and path != keep:
        _remove(path)
    self._remove_unused_versions()
    self._roots = [os.path.relpath(p, self.root) for p in self.replaced()]
    for extra in (keep, checkpoint):
      if extra and os.path.relpath(extra, self.root) not in self._roots:
        self._roots.append(os.path.relpath(extra, self.root))
    kept = manifest.entries(self.root, [os.path.relpath(keep, self.root)]
                            ) if keep else set()
    self._foreign = manifest.entries(self.root, self._roots) - kept - records
    manifest.start(self.root, self._roots, self._foreign)

  def _name_what_stays(self, record, keep: Optional[str], records) -> None:
    """Names once, in the log, what the earlier run's folders hold that is
    not provably that run's (a user's file, one a `run_fn` wrote under a
    name of its own after a kill) and was not there before it: it stays,
    and the next run counts it as the user's."""
    keep_rel = os.path.relpath(keep, self.root) if keep else None
    stays = [rel for rel in manifest.left(self.root, record)
             if rel not in records and not (
                 keep_rel and (rel + os.sep).startswith(keep_rel + os.sep))]
    if stays:
      progress.log().warning(
          '%s: kept %s, which the earlier run did not provably write (not '
          'a name a run gives its files, or changed since); a run removes '
          'only its own files. Delete %s yourself if you do not need %s.',
          self.root, ', '.join(stays[:20]) + (
              f' and {len(stays) - 20} more' if len(stays) > 20 else ''),
          'it' if len(stays) == 1 else 'them',
          'it' if len(stays) == 1 else 'them')

  def _records_of(self, keep: Optional[str], record) -> set:
    """The earlier run's records in run/ (history.json, the checkpoints,
    train_result.json...) when this run resumes that run's training from
    `keep`: they are this training's, kept (a resumed training that had
    finished trains no epoch, and would write none of them again)."""
    if not (keep and self.holds_checkpoint(keep) and isinstance(record, dict)
            and os.path.relpath(keep, self.root) in record.get('roots', [])):
      return set()
    name = os.path.relpath(self.run, self.root)
    return {e for e in manifest.entries(self.root, [name])
            if e not in set(record.get('foreign', []))}

  def record(self) -> None:
    """Records what this run wrote (after `clear`), for the next run: at
    the end of the attempt, a SIGTERM's included. First the run claims
    what TensorFlow and a `run_fn` wrote by path in its own folders (the
    `run/` folders of `MODEL_RUN_FOLDERS`, its resume checkpoint:
    `journal.claim`), which were not there when it started; a file
    elsewhere is the run's only if the journal noted it as written."""
    if self._roots:
      own = [f'{RUN}/{name}' for name in MODEL_RUN_FOLDERS] + [
          rel for rel in self._roots
          if rel.startswith(RESUME_FOLDER_PREFIX)]
      try:
        journal.claim(self.root, own, self._foreign)
        manifest.finish(self.root, self._roots, self._foreign,
                        _named_as_a_run_names)
      except OSError:
        pass  # A full disk: the start record still says what to remove.

  def link_base_model(self, saved_model_dir: str) -> str:
    """A Model artifact folder whose serving folder
    (`paths.model_dirs`) is `saved_model_dir` (a link), for the
    executor's base_model input; returns the serving folder's path
    through the link."""
    atomic_files.make_folders(self.base_model)
    link, _ = paths.model_dirs(self.base_model)
    target = os.path.realpath(saved_model_dir)  # Also when it is `link`.
    if os.path.islink(link):
      os.unlink(link)
    os.symlink(target, link)
    return link

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
            f'{name} to be absent, a folder a run made, or a link to '
            f'{MODELS}/ made by a run of an earlier version. '
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
    atomic_files.make_folders(self.models)  # Not user code's umask.
    version = f'{time.time_ns():x}-{os.getpid()}'
    # The serving model goes last: its exchange is the commit point.
    serving, evaluation = paths.model_dirs(self.publishing)
    for final, staged in ((self.eval_model, evaluation),
                          (self.model, serving)):
      kind = os.path.basename(final)
      if not os.path.isdir(staged):
        if os.path.lexists(final):  # This run wrote no eval model.
          old = os.path.join(self.models, f'{kind}-old-{version}')
          os.rename(final, old)
          self._discard_earlier(old, final)
        continue
      new = os.path.join(self.models, f'{kind}-{version}')
      os.rename(staged, new)
      # What the folder holds now: only that is deleted with it, later.
      manifest.write_listing(self._listing(new), new)
      self._replace(final, new, kind, version)
    atomic_files.sync_folder(self.root)
    self._remove_unused_versions()

  def recover(self) -> None:
    """Puts back the earlier model if a run was killed while replacing it
    (between the two renames); drops it if the new one is in place."""
    for final, previous in ((self.model, self.previous_model),
                            (self.eval_model, self.previous_eval_model)):
      if os.path.lexists(previous):
        if os.path.lexists(final):
          self._discard(previous)
        else:
          os.rename(previous, final)

  def _our_link(self, link: str) -> bool:
    """Whether `link` points where a run of an earlier version pointed it:
    .models/<kind>-..."""
    target = os.readlink(link)
    folder, name = os.path.split(target)
    return folder == MODELS and name.startswith(
        os.path.basename(link) + '-')

  def _replace(self, final: str, new: str, kind: str, version: str) -> None:
    """Puts the complete folder `new` (in .models/) in place of `final`:
    one exchange where the filesystem has it, else two renames that
    `recover` completes; the earlier model is discarded after."""
    if not os.path.lexists(final):
      os.rename(new, final)
      return
    if atomic_files.exchange(new, final):
      self._discard_earlier(new, final)  # `new` names it now.
      return
    # No exchange here: model/ is absent between these two renames; a kill
    # then leaves the earlier model in `previous`, which `recover` puts
    # back. The new model is complete before the first.
    previous = (self.previous_model if final == self.model else
                self.previous_eval_model)
    os.rename(final, previous)
    os.rename(new, final)
    old = os.path.join(self.models, f'{kind}-old-{version}')
    os.rename(previous, old)
    self._discard_earlier(old, final)

  def _discard_earlier(self, old: str, final: str) -> None:
    """Deletes the earlier model `old`, which was at `final`, when a run
    published it (`_discard`). A real folder without its listing is none
    a run published: a user put it in `final`'s place (a copy, with their
    notes), so it is kept, whole, beside `final`, and named once."""
    if os.path.isdir(old) and not os.path.islink(old) and (
        not os.path.isfile(self._listing(old))):
      kept = f'{final}.kept-{time.time_ns():x}'
      os.rename(old, kept)
      progress.log().warning(
          '%s: the folder in place of %s/ was not one a run published (a '
          'copy you put there: a new folder, without the listing of what a '
          'run published), so it was kept, with its files, in %s. Delete it '
          'yourself if you do not need it.', self.root,
          os.path.basename(final), kept)
      return
    self._discard(old)

  def _listing(self, folder: str) -> str:
    """Where the listing of the model folder `folder` is: named by its
    inode, which a rename keeps."""
    return os.path.join(self.models,
                        f'{LISTING_PREFIX}{os.lstat(folder).st_ino}.json')

  def _discard(self, old: str) -> None:
    """Deletes an earlier model: a link (of an earlier version) itself;
    a folder, what its listing names (a user's file stays, in it); a folder
    without a listing, all of it."""
    if os.path.islink(old) or not os.path.isdir(old):
      os.unlink(old)
      return
    listing = self._listing(old)
    if not os.path.isfile(listing):
      removal.remove_tree(old)
      return
    manifest.remove(old, manifest.listing(listing))
    with contextlib.suppress(OSError):
      os.rmdir(old)
    if not os.path.lexists(old):
      os.unlink(listing)  # Else kept: the folder keeps a user's file.

  def _remove_unused_versions(self) -> None:
    """Deletes what .models/ holds that model/ and eval_model/ do not use:
    earlier models (what their listing names), new ones never published
    (all of them), the versions an earlier version's links pointed to, and
    listings of folders that are gone."""
    if not os.path.isdir(self.models) or os.path.islink(self.models):
      return
    used = {os.path.basename(os.readlink(l)) for l in (self.model,
                                                        self.eval_model)
            if os.path.islink(l)}
    live = {f'{LISTING_PREFIX}{os.lstat(p).st_ino}.json'
            for p in (self.model, self.eval_model)
            if os.path.isdir(p) and not os.path.islink(p)}
    names = os.listdir(self.models)
    for name in names:
      path = os.path.join(self.models, name)
      if name in used or not name.startswith((f'{MODEL}-', f'{EVAL_MODEL}-')):
        continue
      if name.endswith(LISTING):
        if not os.path.lexists(path[:-len(LISTING)]):
          os.unlink(path)  # Its version is gone.
        continue
      legacy = path + LISTING
      if os.path.isfile(legacy):  # A version an earlier version linked to.
        manifest.remove(self.models, manifest.listing(legacy))
        if not os.path.lexists(path):
          os.unlink(legacy)
        continue
      self._discard(path)
    for name in os.listdir(self.models):
      if name.startswith(LISTING_PREFIX) and name not in live:
        inode = name[len(LISTING_PREFIX):-len('.json')]
        if not any(str(os.lstat(os.path.join(self.models, n)).st_ino) ==
                   inode for n in os.listdir(self.models)
                   if not n.startswith(LISTING_PREFIX)):
          os.unlink(os.path.join(self.models, name))


def _remove(path: str) -> None:
  """Removes a file, a link (not what it points to) or a folder."""
  removal.remove_tree(path)

