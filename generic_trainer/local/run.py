"""Runs a module file on local data into one folder, as GenericTrainer would.

What the `generic-trainer` command does once its arguments are checked
(`generic_trainer.local.cli`), into the output folder `local.layout`
describes.

The training is resolved once, as in a pipeline (`core.plan.resolve`, with
the settings named as flags). A TrainSpec module that trains in this
process runs the pipeline's TrainSpec path (`loop.runner`: the same checks,
fit loop, handlers and export) on `LocalFnArgs`, without importing TFX's
pipeline code or Apache Beam, so it starts training soon after TensorFlow is
imported. A `run_fn` module imports TFX itself; it trains through
`launch.dispatch` on artifacts under the folder, so it gets the component's
FnArgs, Keras choice and resume, unchanged; so does a TrainSpec that trains
in a child process (a spec whose `backend = 'jax'`, where --backend did not
set KERAS_BACKEND before Keras was imported).

Either way the one attempt sequence (`core.attempt.run`, as in the
executor) stages the export in `.publishing/` (a Model artifact), validates
it, and only then the layout puts it in place of `model/`. A failed run
leaves `model/` as an earlier run published it. A new run into the same
folder starts by removing the rest of what an earlier run wrote there
(`.generic-trainer` marks a folder a run wrote; the command refuses a
folder whose `data/`, `run/`... no run wrote).

A training that did not finish (killed, interrupted, or failed after a
checkpoint) resumes as in a pipeline: the same command again continues from the
last epoch checkpoint (TrainSpec modules; a `run_fn` that uses
`resume.keras_callback` or `resume.checkpoint_manager`) in `.resume-<key>/`.
The key hashes what defines the training (`resume_key`, through
`resume.fingerprint`, the pipeline's too): the module's and the schema's
contents, the data files' paths, sizes and modification times, and the flags.
The folder paths of a local run never change, so the key is taken from the data
itself, not from the artifacts' URIs as in a pipeline. A run with another key,
or with `resume=False`, removes it; a published model removes its own.
"""

import hashlib
import json
import os
import shutil
from typing import Any, Callable, Dict, List, Optional

import attr

from generic_trainer import atomic_files
from generic_trainer import paths
from generic_trainer import resume
from generic_trainer.core import attempt
from generic_trainer.core import keras_env
from generic_trainer.core import plan as plan_lib
from generic_trainer.core.plan import Where
from generic_trainer.core.publish import StagedExport
from generic_trainer.data import statistics
from generic_trainer.keys import BACKEND_KEY, KERAS_VERSION_KEY
from generic_trainer.keys import MODULE_FILE_KEY, RUN_FN_KEY
from generic_trainer.keys import NUM_WORKERS_KEY
from generic_trainer.local import console
from generic_trainer.local import data as local_data
from generic_trainer.local import holdout
from generic_trainer.local.layout import Layout
from generic_trainer.local import output_folder
from generic_trainer.core.user_code import user_code


@attr.s(frozen=True)
class Request:
  """A checked command line.

  Attributes:
    module_file: Absolute path of the module file.
    train_data: Train files (CSV, or TFRecords of tf.Example).
    eval_data: Eval files; None means a held-out third of the train data
      (`local.holdout`), or the train data itself with `eval_on_train`.
    schema: A schema.pbtxt to use, or None to infer one.
    output_dir: Absolute path of the output folder.
    steps, eval_steps: Train and eval steps, or None.
    hparams: Hyperparameters (a dict), or None.
    run_fn: The module's entry point by name, or None to find it.
    keras_version: 'keras3', 'tf_keras', or None.
    backend: 'tensorflow', 'jax', or None (the TrainSpec's, else TensorFlow).
    num_workers: Local worker processes: N, a range 'MIN:MAX', or None
      (one process). Not part of `resume_key`: the data order does not
      depend on it, so a run resumed with another count is still exact.
    interactive: True for a progress bar, False for log lines, None for a
      bar on a terminal.
    resume: Whether to resume from the checkpoint an unfinished run with
      the same `resume_key` left (False: remove it and start over).
    base_model: A SavedModel folder to warm-start from, or None; the new
      model must keep its signatures unless `allow_signature_change`.
    allow_signature_change: Publish though the base model's signatures differ.
    started: `time.monotonic()` when the process started.
    csv_delimiter: What separates the fields of CSV data; None: commas.
    parsed_rows: `parsed_rows_flags.KeptRows`, or None: nothing kept.
  """
  module_file = attr.ib(type=str)
  train_data = attr.ib(type=List[str])
  output_dir = attr.ib(type=str)
  started = attr.ib(type=float)
  eval_data = attr.ib(type=Optional[List[str]], default=None)
  schema = attr.ib(type=Optional[str], default=None)
  steps = attr.ib(type=Optional[int], default=None)
  eval_steps = attr.ib(type=Optional[int], default=None)
  hparams = attr.ib(type=Optional[Dict[str, Any]], default=None)
  run_fn = attr.ib(type=Optional[str], default=None)
  keras_version = attr.ib(type=Optional[str], default=None)
  backend = attr.ib(type=Optional[str], default=None)
  num_workers = attr.ib(type=Any, default=None)
  interactive = attr.ib(type=Optional[bool], default=None)
  resume = attr.ib(type=bool, default=True)
  base_model = attr.ib(type=Optional[str], default=None)
  allow_signature_change = attr.ib(type=bool, default=False)
  eval_on_train = attr.ib(type=bool, default=False)
  csv_delimiter = attr.ib(type=Optional[str], default=None)
  parsed_rows = attr.ib(default=None)


def resume_key(request: Request) -> str:
  """A short hash of what defines the training of `request` (a file that
  cannot be read counts as missing, which changes the key)."""

  def content(path):
    try:
      with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()
    except (OSError, TypeError):
      return None

  def files(paths):
    found = []
    for path in paths or []:
      try:
        info = os.stat(path)
        found.append((path, info.st_size, info.st_mtime_ns))
      except OSError:
        found.append((path, None))
    return found

  return resume.fingerprint(
      inputs={'schema': content(request.schema),
              'train': files(request.train_data),
              'eval': files(request.eval_data),
              'base_model': files(
                  [os.path.join(request.base_model, 'saved_model.pb')]
                  if request.base_model else [])},
      module_file=request.module_file,
      settings={RUN_FN_KEY: request.run_fn, 'steps': request.steps,
                'eval_steps': request.eval_steps, 'hparams': request.hparams,
                'eval_on_train': request.eval_on_train,
                KERAS_VERSION_KEY: request.keras_version,
                BACKEND_KEY: request.backend,
                'csv_delimiter': request.csv_delimiter})


def checkpoint_dir(request: Request) -> str:
  """Where the training of `request` checkpoints, and resumes from."""
  return Layout(request.output_dir).resume_dir(resume_key(request))


def holds_checkpoint(path: str) -> bool:
  """Whether an earlier, unfinished run left a checkpoint in `path`."""
  return os.path.isdir(path) and bool(os.listdir(path))


@attr.s
class Outcome:
  """What a finished run produced.

  Attributes:
    entry_point: 'TrainSpec PenguinSpec' or '`run_fn`'.
    result: The training record (train_result.json), or None when a run_fn
      wrote none.
    report: What `validate_export` checked.
    layout: Where everything is.
    evaluation: What the eval figures were measured on (`holdout.evaluation`;
      also the `evaluation` entry of train_result.json).
  """
  entry_point = attr.ib(type=str)
  result = attr.ib(type=Optional[Dict[str, Any]])
  report = attr.ib(type=Optional[Dict[str, Any]])
  layout = attr.ib(type=Layout)
  evaluation = attr.ib(type=Optional[Dict[str, Any]], default=None)


def run(request: Request, checkpoint: Optional[str] = None) -> Outcome:
  """Trains, validates and publishes into `request.output_dir`, holding
  the folder's lock throughout (`output_folder.hold`).

  `checkpoint` is `checkpoint_dir(request)`, when the caller has it.

  Raises:
    FolderInUseError: another run holds the folder; nothing was changed.
    GenericTrainerError: the module, the data, the training or the export
      failed; `model/` is as an earlier run left it (or absent).
  """
  with holding_folder(request):
    return _run_holding_folder(request, checkpoint)


def holding_folder(request: Request):
  """A context that holds the output folder of `request` (created as
  private as its inputs; `output_folder.hold`), which a caller may take
  before `run` (which then finds it held)."""
  inputs = (list(request.train_data) + list(request.eval_data or []) +
            ([request.schema] if request.schema else []))
  return output_folder.hold(request.output_dir, inputs=inputs)


def _run_holding_folder(request: Request,
                        checkpoint: Optional[str]) -> Outcome:
  # Before TensorFlow and Keras are imported (by the module, usually):
  # tf.keras and Keras's backend are decided once per process.
  keras_env.choose_before_import(request.keras_version, request.backend)
  console.import_tensorflow()  # Without its start-up lines.
  layout = Layout(request.output_dir)
  checkpoint = checkpoint or layout.resume_dir(resume_key(request))
  plan, entry = plan_lib.resolve(
      _settings(request), plan_lib.COMMAND, checkpoint_dir=checkpoint,
      entry_name=None if request.run_fn in (None, RUN_FN_KEY)
      else request.run_fn)
  layout.clear(keep=checkpoint if request.resume else None,
               checkpoint=checkpoint)
  if request.base_model and paths.is_pattern(request.base_model):
    # TensorFlow globs a SavedModel's variables prefix: load it through a
    # link whose path holds no glob character.
    from generic_trainer.core.publish import SERVING_MODEL_DIR  # pylint: disable=g-import-not-at-top
    request = attr.evolve(request, base_model=os.path.join(
        layout.link_base_model(request.base_model), SERVING_MODEL_DIR))
  try:
    splits, evaluation = _write_inputs(request, layout,
                                       getattr(entry, 'train_spec', None))
    staged = StagedExport(layout.publishing, keep_dir=layout.run)
    if plan.spec_class is not None and plan.where == Where.HERE:
      train = _spec_training(request, layout, splits, staged, entry,
                             checkpoint)
    else:  # A run_fn, or a TrainSpec that trains in a child process.
      train = _request_training(request, layout, splits, staged, plan,
                                entry)
    published = attempt.run(staged, train, lambda: attempt.ExportChecks(
        eval_files=splits['eval'], schema_path=layout.schema,
        base_model=request.base_model,
        allow_signature_change=request.allow_signature_change))
    layout.take_model()
    if os.path.lexists(checkpoint):
      shutil.rmtree(checkpoint)
  finally:
    if os.path.lexists(layout.publishing):
      shutil.rmtree(layout.publishing)
    layout.record()
  from generic_trainer import train_result  # pylint: disable=g-import-not-at-top
  name = (f'TrainSpec {plan.spec_class}' if plan.spec_class else
          f'`{request.run_fn or RUN_FN_KEY}`')
  result = published.trained or train_result.read(layout.run)
  if result is not None:  # What the eval figures were measured on.
    result['evaluation'] = evaluation
    missing = local_data.missing_values(layout.data)
    if missing:  # And what was read as missing.
      result['missing_values'] = missing
    train_result.write(layout.run, result)
  return Outcome(name, result, published.report, layout, evaluation)


def _settings(request: Request) -> Dict[str, Any]:
  """The command's settings as the component's execution properties."""
  settings = {MODULE_FILE_KEY: request.module_file,
              KERAS_VERSION_KEY: request.keras_version,
              BACKEND_KEY: request.backend}
  if request.num_workers is not None:
    settings[NUM_WORKERS_KEY] = request.num_workers
  return settings


def _write_inputs(request: Request, layout: Layout, spec_class=None):
  """The split folders, the schema and the hyperparameters file; returns
  the splits' files and the `evaluation` entry (`holdout.evaluation`).
  CSV data is read with `request.csv_delimiter`; the labels of
  `spec_class` (a TrainSpec, or None) cannot be missing.

  The data after the schema (all of it with --schema; the eval data when
  the schema is inferred from the train data) is checked against it.
  Without eval data, a third of the train data is held out for eval.
  """
  from generic_trainer.data import schema_file  # pylint: disable=g-import-not-at-top
  schema, source = None, 'the schema inferred from the train data'
  if request.schema:
    schema, source = schema_file.read(request.schema), (
        f'the schema {request.schema}')
  split_options = {'delimiter': request.csv_delimiter,
                   'required': local_data.required_columns(spec_class),
                   'kept_rows': getattr(request.parsed_rows, 'folder', None)}
  train_dir = os.path.join(layout.data, statistics.split_folder('train'))
  held_out = not request.eval_data and not request.eval_on_train
  # Held out: all of it first, in a folder named like the split it is
  # checked as, then split into the train and eval folders.
  whole = os.path.join(layout.data, '.whole')
  splits = {'train': local_data.to_split(
      request.train_data, os.path.join(whole, os.path.basename(train_dir))
      if held_out else train_dir, schema, source, **split_options)}
  if schema is None:
    schema = local_data.infer_schema(splits['train'])
    schema_file.write(layout.schema, schema)
  else:
    atomic_files.copy(request.schema, layout.schema)
  eval_dir = os.path.join(layout.data, statistics.split_folder('eval'))
  if held_out:
    parts = holdout.split(splits['train'], train_dir, eval_dir)
    shutil.rmtree(whole)
    splits = {'train': parts.train_files, 'eval': parts.eval_files}
    evaluation = holdout.evaluation(holdout.HELD_OUT,
                                    train_rows=parts.train_rows,
                                    eval_rows=parts.eval_rows)
  elif request.eval_data:
    splits['eval'] = local_data.to_split(request.eval_data, eval_dir, schema,
                                         source, **split_options)
    evaluation = holdout.evaluation(holdout.FILES, files=request.eval_data)
  else:
    splits['eval'] = local_data.link_split(splits['train'], eval_dir)
    evaluation = holdout.evaluation(holdout.TRAIN)
  if request.hparams is not None:
    atomic_files.write_json(
        os.path.join(layout.hparams_dir, 'hyperparameters.json'),
        request.hparams, mode=0o600, indent=1)
  return splits, evaluation


def _spec_training(request: Request, layout: Layout, splits, staged,
                   entry, checkpoint: str) -> Callable[[], Dict[str, Any]]:
  """The TrainSpec path: loop.runner on LocalFnArgs; no TFX, no Beam.
  Returns the training, which returns its record."""
  from generic_trainer import train_result  # pylint: disable=g-import-not-at-top
  from generic_trainer.local.fn_args import LocalFnArgs  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import runner as spec_runner  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers.first_step import FirstStepTime  # pylint: disable=g-import-not-at-top
  spec_class = entry.train_spec
  fn_args = LocalFnArgs(
      train_files=[paths.as_pattern(f) for f in splits['train']],
      eval_files=[paths.as_pattern(f) for f in splits['eval']],
      train_steps=request.steps, eval_steps=request.eval_steps,
      schema_path=layout.schema, serving_model_dir=staged.serving_dir,
      eval_model_dir=staged.eval_dir, model_run_dir=layout.run,
      hyperparameters=request.hparams, checkpoint_dir=checkpoint,
      base_model=request.base_model,
      **(request.parsed_rows.fn_args_fields() if request.parsed_rows else {}))

  def train() -> Dict[str, Any]:
    timer = FirstStepTime(request.started)
    with user_code(f'TrainSpec {spec_class.__name__}',
                   f'module_file={request.module_file!r}'):
      result = spec_runner.run(spec_class, fn_args,
                               interactive=request.interactive,
                               extra_handlers=[timer])
    if timer.seconds is not None:
      result['time_to_first_step_s'] = round(timer.seconds, 3)
    train_result.write(layout.run, result)
    return result

  return train


def _request_training(request: Request, layout: Layout, splits, staged,
                      plan, entry) -> Callable[[], None]:
  """The pipeline's path (`launch.dispatch`) on artifacts in the output
  folder: a run_fn gets the component's FnArgs; a TrainSpec on another
  backend than this process's trains in a child process."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_component_specs as keys  # pylint: disable=g-import-not-at-top
  from generic_trainer.core.request import TrainingRequest  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import dispatch  # pylint: disable=g-import-not-at-top
  examples = local_data.examples_artifact(layout.data, splits)
  input_dict = {keys.EXAMPLES_KEY: [examples],
                keys.SCHEMA_KEY: [_artifact(standard_artifacts.Schema,
                                            layout.schema_dir)]}
  if request.hparams is not None:
    input_dict[keys.HYPERPARAMETERS_KEY] = [_artifact(
        standard_artifacts.HyperParameters, layout.hparams_dir)]
  if request.base_model:
    input_dict[keys.BASE_MODEL_KEY] = [_artifact(
        standard_artifacts.Model, layout.link_base_model(request.base_model))]
  output_dict = {
      keys.MODEL_KEY: [_artifact(standard_artifacts.Model, layout.publishing)],
      keys.MODEL_RUN_KEY: [_artifact(standard_artifacts.ModelRun,
                                     layout.run)]}
  if request.parsed_rows:  # Every worker reads it; the chief writes.
    request.parsed_rows.add_artifacts(input_dict, output_dict)
  exec_properties = {
      **_settings(request),
      keys.TRAIN_ARGS_KEY: json.dumps(
          {'num_steps': request.steps} if request.steps else {}),
      keys.EVAL_ARGS_KEY: json.dumps(
          {'num_steps': request.eval_steps} if request.eval_steps else {}),
      keys.CUSTOM_CONFIG_KEY: 'null'}
  training = TrainingRequest(input_dict, output_dict, exec_properties,
                             staged.serving_dir, staged.eval_dir, plan)
  return lambda: dispatch.train(training, entry)


def _artifact(artifact_class, uri: str):
  artifact = artifact_class()
  artifact.uri = uri
  return artifact
