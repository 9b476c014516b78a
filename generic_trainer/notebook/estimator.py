"""Estimator: train, evaluate, predict and export a TrainSpec outside a pipeline.

Not tf.estimator's Estimator (removed from TensorFlow 2.16): the name says
what it offers to those who used that one (train, evaluate, predict,
export), on a TrainSpec instead of a model_fn.

For notebooks and tests. It trains through the same attempt
(`training.attempt`: the plan, the one launcher) and runner (`loop.runner`:
input pipeline, checks, fit loop, handlers) as GenericTrainer in a
pipeline, on local files, in this process (its model stays here for
`evaluate` and `predict`), publishing nothing; `export` runs the attempt's
validation and publication on the trained model:

    est = Estimator(PenguinSpec, model_dir='/tmp/penguin')
    est.train('penguins_train.csv', eval_data='penguins_eval.csv', steps=200)
    est.evaluate('penguins_eval.csv')     # {'loss': ..., 'sparse_categorical_accuracy': ...}
    est.predict('penguins_eval.csv')      # numpy array of model outputs
    est.export()                          # a validated SavedModel directory
"""

import contextlib
import os
from typing import Any, Dict, Iterator, List, Optional, Union
import shutil

import attr
import numpy as np

from generic_trainer.data import local_files
from generic_trainer.data import statistics
from generic_trainer.data.kept import settings as kept_settings
from generic_trainer.errors import ModelFolderError, SpecError
from generic_trainer.keys import RUN_FN_KEY
from generic_trainer.loop import datasets
from generic_trainer.loop import export
from generic_trainer.loop import runner
from generic_trainer.plan.entry_points import NOTEBOOK
from generic_trainer.plan import settings
from generic_trainer.plan.request import LocalInputs, TrainingRequest
from generic_trainer.publication.staged_export import StagedExport
from generic_trainer.system import atomic_files
from generic_trainer.system import manifest
from generic_trainer.system import output_folder
from generic_trainer.system import paths
from generic_trainer.system import progress
from generic_trainer.system import removal
from generic_trainer.system import scratch
from generic_trainer.system import trust
from generic_trainer.trainspec.spec import check_complete
from generic_trainer.training import attempt
from generic_trainer.keys import SAVED_MODEL_FILE
from generic_trainer.keys import SCHEMA_FILE


@attr.s(frozen=True)
class ModelDirLayout:
  """The folder an Estimator trains into (`model_dir`), as the command's
  output folder has its `command.layout.Layout`:

      data/Split-train, data/Split-eval   the data as split folders
      schema.pbtxt                        the schema used (inferred or given)
      run/                                history, checkpoints, TensorBoard,
                                          train_result.json; rejected_export/
      .exporting/                         an export being validated
      export/                             the last export, by default

  Attributes:
    root: The model_dir.
  """
  root = attr.ib(type=str)

  @property
  def data(self) -> str:
    return os.path.join(self.root, 'data')

  def split(self, name: str) -> str:
    """The split folder of `name` ('train', 'eval')."""
    return os.path.join(self.data, statistics.split_folder(name))

  @property
  def schema(self) -> str:
    return os.path.join(self.root, SCHEMA_FILE)

  @property
  def run(self) -> str:
    return os.path.join(self.root, 'run')

  @property
  def exporting(self) -> str:
    return os.path.join(self.root, '.exporting')

  @property
  def export(self) -> str:
    return os.path.join(self.root, 'export')


# What an export held: its listing (`system.manifest.write_listing`, the
# mechanism the command's output folder uses too), inside it. An export
# is ours by the names listed: a listed file changed since stays ours.
EXPORT_MARKER = '.generic-trainer-export.json'


def _held(folder: str) -> List[str]:
  """Every file, link and folder under `folder`, relative to it (links not
  followed)."""
  return sorted(manifest.entries(folder, os.listdir(folder)))


# What an export of a version before the marker held, by name: accepted in
# the Estimator's own `model_dir/export` only.
_SAVED_MODEL_TOPS = (SAVED_MODEL_FILE, 'fingerprint.pb', 'keras_metadata.pb',
                     'variables', 'assets', 'assets.extra')


def _check_replaceable(export_dir: str, own: bool = False) -> None:
  """Raises ModelFolderError unless `export_dir` is missing, empty, or an
  export of ours that holds only what its marker lists (`own`: the
  Estimator's `model_dir/export`, where an export of a version before
  the marker, a SavedModel's names only, is ours too)."""
  if not os.path.lexists(export_dir):
    return
  if os.path.islink(export_dir) or not os.path.isdir(export_dir):
    what = ['it is a link' if os.path.islink(export_dir) else 'it is a file']
  else:
    try:
      listed = set(manifest.listing(os.path.join(export_dir, EXPORT_MARKER)))
    except (OSError, ValueError):
      listed = set()
      if own:  # An export of an earlier version, by the names it wrote.
        listed = {n for n in _held(export_dir)
                  if n.split(os.sep)[0] in _SAVED_MODEL_TOPS}
    what = sorted(set(_held(export_dir)) - listed - {EXPORT_MARKER})
    what = [n for n in what if os.path.dirname(n) not in what]  # Tops.
  if what:
    shown = ', '.join(what[:8]) + (f' and {len(what) - 8} more'
                                   if len(what) > 8 else '')
    raise ModelFolderError(
        f'export_dir {export_dir} holds what no export of an Estimator '
        f'wrote: {shown}. An export replaces the whole folder it is given, '
        'and would delete it. Expected a new or empty folder, or one an '
        f'earlier export() wrote ({EXPORT_MARKER} lists what it held). '
        f'Received: export_dir={export_dir!r}. Choose another folder (by '
        'default, model_dir/export), or move that out of it. Nothing was '
        'exported.')


class Estimator:
  """A TrainSpec with a model directory; methods mirror tf.estimator's."""

  def __init__(self, spec_class: type, model_dir: str,
               hparams: Optional[Dict[str, Any]] = None,
               schema_path: Optional[str] = None,
               base_model: Optional[str] = None,
               parsed_rows_cache: Union[str, bool] = True):
    """A TrainSpec class and the folder its training writes to.

    Args:
      spec_class: A complete TrainSpec subclass.
      model_dir: Where data, run outputs (history, checkpoints, TensorBoard)
        and exports go.
      hparams: Hyperparameter values, available as `spec.hparams`.
      schema_path: A schema.pbtxt; inferred from the train data if None.
      base_model: A SavedModel folder to warm-start from (as the component's
        base_model input; see `TrainSpec.warm_start`).
      parsed_rows_cache: Where the parsed rows of each TFRecord file are
        kept for the next training, which reads them back instead of
        parsing the file again: a local folder, True for the user's cache
        folder (`~/.cache/tfx-generic-trainer/parsed-rows`), False for
        nowhere (docs/guides/parsed-rows-cache.md).
    """
    check_complete(spec_class)
    self.model_dir = os.path.abspath(model_dir)
    self.layout = ModelDirLayout(self.model_dir)
    output_folder.check(self.model_dir, 'model_dir')
    self.spec = spec_class(hparams=hparams)
    self._schema_path = schema_path
    self._base_model = base_model
    self._parsed_rows_dir = kept_settings.checked_folder(
        parsed_rows_cache, self.model_dir, name='parsed_rows_cache',
        inputs=[schema_path, base_model])
    self.checkpoint_dir: Optional[str] = None  # Set to resume when killed.
    self._fn_args = None
    self._keys = None
    self._trained = False
    self._inputs: List[str] = []  # What the model was trained from.

  @property
  def run_dir(self) -> str:
    """The ModelRun folder: history, checkpoints, TensorBoard."""
    return self.layout.run

  def train(self, train_data, eval_data=None,
            steps: Optional[int] = None) -> Dict[str, Any]:
    """Trains on `train_data` (CSV/TFRecord path, glob or list).

    Evaluates on `eval_data` every epoch (default: the train data, said
    in a warning: training-set figures, not held-out ones). Returns
    the result record: final train and eval metrics, steps, epochs, time.
    Holds `model_dir`'s lock meanwhile: one training per folder at a time
    (`output_folder`). `steps` 0 is unset, as everywhere
    (`plan.settings.steps`).
    """
    steps = settings.steps(steps, "'steps'", f'steps={steps!r}')
    inputs = [f for d in (train_data, eval_data) if d is not None
              for p in ([d] if isinstance(d, str) else d)
              for f in paths.user_files(p)] + [
                  p for p in (self._schema_path, self._base_model) if p]
    if self._parsed_rows_dir:  # Not where the data is.
      kept_settings.checked_folder(self._parsed_rows_dir, self.model_dir,
                                   'parsed_rows_cache', inputs)
    with output_folder.hold(self.model_dir, 'model_dir', inputs=inputs):
      result = self._train(train_data, eval_data, steps)
    self._inputs = inputs  # Its exports are as private (`export`).
    return result

  def _train(self, train_data, eval_data, steps):
    kept = self._parsed_rows_dir
    if eval_data is None:
      progress.log().warning(settings.eval_on_train_line(NOTEBOOK))
    splits = {'train': local_files.to_split(
        train_data, self.layout.split('train'),
        kept_rows=kept)}
    splits['eval'] = (local_files.to_split(
        eval_data, self.layout.split('eval'),
        kept_rows=kept) if eval_data is not None else splits['train'])
    spec_class = type(self.spec)
    entry = runner.SpecRun(spec_class, spec=self.spec, export=False)
    # The same plan as a pipeline's and the command's, for a training that
    # must run in this process (its model stays here): refused, as they
    # refuse one, when this process cannot train it.
    plan, entry = attempt.resolve(
        {RUN_FN_KEY: f'{spec_class.__module__}.{spec_class.__qualname__}'},
        NOTEBOOK, checkpoint_dir=self.checkpoint_dir, entry=entry)
    request = TrainingRequest(
        {}, {}, {}, self.layout.exporting, '', plan,
        local_inputs=self._local_inputs(splits, steps))
    result = attempt.run(request, entry).trained
    self._fn_args = self.spec.fn_args
    self._keys = entry.prepared.keys
    self._trained = True
    return result

  def evaluate(self, data) -> Dict[str, float]:
    """Loss and metrics over all examples of `data`."""
    self._require_trained('evaluate')
    with self._scratch('evaluate', data) as files, datasets.read_to_its_end():
      values = self.spec.model.evaluate(self._dataset(files), verbose=0,
                                        return_dict=True)
    return {k: float(v) for k, v in values.items()}

  def predict(self, data):
    """Model outputs for every example of `data` (label not needed)."""
    self._require_trained('predict')
    with self._scratch('predict', data) as files:
      outputs = [self.spec.model(features, training=False)
                 for features in self._dataset(files, with_label=False)]
    return np.concatenate([np.asarray(o) for o in outputs])

  def export(self, export_dir: Optional[str] = None) -> str:
    """Exports and validates a SavedModel as GenericTrainer does (the same
    attempt sequence, `training.attempt`); its path. An export that fails
    validation is kept in `run/rejected_export` and never reaches
    `export_dir`, which keeps what an earlier export put there.

    `export_dir` is replaced only when it is new, empty, or an export of
    ours holding nothing else (`EXPORT_MARKER` lists what it held). It is
    no more open than the data and base model the model was trained from
    (`output_folder.mode_for`): its weights and warm-up file carry them.

    Raises:
      ModelFolderError: `export_dir` holds what no export wrote; nothing
        was exported.
      UnsafeFolderError: a folder above `export_dir` lets someone else
        rename what it holds (`trust.check_ancestors`); nothing was
        exported.
    """
    self._require_trained('export')
    export_dir = os.path.abspath(
        export_dir or self.layout.export)
    own = export_dir == self.layout.export
    # A folder others may rename in (a team's 2775 folder) would let them
    # swap the sealed export beside it before it is put in place (row 571).
    trust.check_ancestors(export_dir, 'export_dir')
    _check_replaceable(export_dir, own)
    fn_args = self._fn_args
    # As private as what the model was trained from: its weights and its
    # warm-up file (rows of the eval data) carry them.
    mode = output_folder.mode_for(self._inputs)
    with output_folder.hold(self.model_dir, 'model_dir', inputs=self._inputs):
      staged = StagedExport(self.layout.exporting,
                            keep_dir=self.run_dir)
      published = attempt.export(
          staged, lambda: export.export(
              self.spec, self.spec.model, self._keys, staged.serving_dir,
              fn_args.schema_path, None),
          lambda: attempt.ExportChecks(eval_files=fn_args.eval_files,
                                       schema_path=fn_args.schema_path))
      output_folder.create(os.path.dirname(export_dir), mode)
      new = f'{export_dir}.new-{os.getpid()}'
      shutil.move(published.serving_dir, new)  # Beside: one filesystem.
      manifest.write_listing(os.path.join(new, EXPORT_MARKER), new,
                             indent=1)
      output_folder.seal(new, mode)
      _check_replaceable(export_dir, own)  # Nothing of yours added since.
      atomic_files.replace_folder(new, export_dir)
      removal.remove_tree(staged.model_uri)
    return export_dir

  def _local_inputs(self, splits, steps):
    """The training's inputs as local files (`plan.request.LocalInputs`),
    the schema inferred from the train data unless given."""
    schema_path = local_files.write_schema(
        local_files.infer_schema(splits['train']) if not self._schema_path
        else None, self.layout.schema,
        self._schema_path)
    return LocalInputs.of_splits(
        splits, self.run_dir, train_steps=steps, schema_path=schema_path,
        hyperparameters=self.spec.hparams, base_model=self._base_model,
        parsed_rows_dir=self._parsed_rows_dir)

  def _dataset(self, files, with_label=True):
    spec, fn_args = self.spec, self._fn_args
    schema = datasets.load_schema(fn_args)
    if not with_label:  # Data to predict on needs the model's features only.
      keep = [f for f in schema.feature if f.name in self._keys]
      del schema.feature[:]
      schema.feature.extend(keep)
    return datasets.make_dataset(
        spec, fn_args, schema, files, self._keys,
        spec.eval_batch_size or spec.batch_size, num_epochs=1, shuffle=False,
        with_label=with_label)

  @contextlib.contextmanager
  def _scratch(self, name: str, data) -> Iterator[List[str]]:
    """`data` as a split folder of a private scratch folder (`scratch`),
    removed after the block; yields its files as patterns."""
    with scratch.folder(name) as folder:
      files = local_files.to_split(
          data, os.path.join(folder, statistics.split_folder(name)),
          kept_rows=self._parsed_rows_dir)
      yield [paths.as_pattern(f) for f in files]

  def _require_trained(self, what):
    if not self._trained:
      raise SpecError(f'Call train() before {what}(): the model has no '
                      f'trained weights yet. Expected train() before {what}(). '
                      f'Received: {what}() on an untrained Estimator.')
