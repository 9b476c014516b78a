"""Runs a module file on local data into one folder, as GenericTrainer would.

What the `generic-trainer` command does once its arguments are checked
(`generic_trainer.command.cli`), into the output folder `command.layout`
describes.

The training is resolved once, as in a pipeline (`training.attempt.resolve`,
with the settings named as flags), and runs through the one attempt
sequence (`training.attempt.run`, as in the executor), whose launcher trains it where
the plan says. A TrainSpec trains on `LocalFnArgs` (`fnargs.local`: the
same checks, fit loop, handlers and export as in a pipeline), without
importing TFX's pipeline code or Apache Beam, so it starts training soon
after TensorFlow is imported. A `run_fn` module gets the component's FnArgs
on artifacts under the folder, unchanged.

The attempt stages the export in `.publishing/` (a Model artifact), validates
it, and only then the layout puts it in place of `model/`. A failed run
leaves `model/` as an earlier run published it. A new run into the same
folder starts by removing the rest of what an earlier run wrote there
(`.generic-trainer` marks a folder a run wrote; the command refuses a
folder whose `data/`, `run/`... no run wrote).

A training that did not finish (killed, interrupted, or failed after a
checkpoint) resumes as in a pipeline: the same command again continues from the
last epoch checkpoint (TrainSpec modules; a `run_fn` that uses
`resume.keras_callback` or `resume.checkpoint_manager`) in `.resume-<key>/`.
The key hashes what defines the training (`resume_at`, through the plan's
`resume_key`, the pipeline's too): the module's and the schema's
contents, the data files' paths, sizes and modification times, and the flags.
The folder paths of a local run never change, so the key is taken from the data
itself, not from the artifacts' URIs as in a pipeline. A run with another key,
or with `resume=False`, removes it; a published model removes its own.
"""

import hashlib
import json
import os
from typing import Any, Callable, Dict, Optional

import attr

from generic_trainer.command import holdout
from generic_trainer.command.cli_args import Request
from generic_trainer.command.layout import Layout
from generic_trainer.data import local_files
from generic_trainer.data import schema_file
from generic_trainer.data import statistics
from generic_trainer.keys import BACKEND_KEY, KERAS_VERSION_KEY
from generic_trainer.keys import MODULE_FILE_KEY, NUM_WORKERS_KEY
from generic_trainer.keys import INFERRED_SCHEMA
from generic_trainer.keys import RUN_FN_KEY
from generic_trainer.plan import plan as plan_lib
from generic_trainer.plan import resume_folder
from generic_trainer.plan.entry_points import COMMAND
from generic_trainer.plan.request import LocalInputs, TrainingRequest
from generic_trainer.publication.staged_export import StagedExport
from generic_trainer.system import atomic_files
from generic_trainer.system import output_folder
from generic_trainer.system import paths
from generic_trainer.system import progress
from generic_trainer.system import removal
from generic_trainer.system.lazy import standard_artifacts
from generic_trainer.system.lazy import standard_component_specs as keys
from generic_trainer.training import attempt
from generic_trainer.keys import SAVED_MODEL_FILE


def resume_at(request: Request) -> resume_folder.ResumeAt:
  """What names the checkpoint folder of `request`'s training, which the
  plan decides (`plan.resume_folder.checkpoint_folder`): in the output folder,
  keyed by the data files' paths, sizes and modification times (a file
  that cannot be read counts as missing, which changes the key), the
  schema's content and the flags that change the training."""

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

  return resume_folder.ResumeAt(
      base=request.output_dir, prefix=Layout.CHECKPOINT_PREFIX,
      inputs={'schema': content(request.schema),
              'train': files(request.train_data),
              'eval': files(request.eval_data),
              'base_model': files(
                  [os.path.join(request.base_model, SAVED_MODEL_FILE)]
                  if request.base_model else [])},
      settings={RUN_FN_KEY: request.run_fn, 'steps': request.steps,
                'eval_steps': request.eval_steps, 'hparams': request.hparams,
                'eval_on_train': request.eval_on_train,
                KERAS_VERSION_KEY: request.keras_version,
                BACKEND_KEY: request.backend,
                'csv_delimiter': request.csv_delimiter})


def resume_key(request: Request) -> str:
  """A short hash of what defines the training of `request`
  (`plan.resume_folder.resume_key` of `resume_at`)."""
  at = resume_at(request)
  return resume_folder.resume_key(at.inputs, request.module_file, at.settings)


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


def run(request: Request,
        starting: Optional[Callable[[plan_lib.TrainingPlan], None]] = None
        ) -> Outcome:
  """Trains, validates and publishes into `request.output_dir`, holding
  the folder's lock throughout (`holding_folder`): resolves the training
  (its plan chooses the checkpoint folder, `resume_at`), calls
  `starting(plan)` (the command says there whether it resumes), then runs
  the attempt.

  Keras's environment is chosen, and TensorFlow imported, once, before
  this module is (`command.cli`): this module's imports import TensorFlow.

  Raises:
    FolderInUseError: another run holds the folder; nothing was changed.
    GenericTrainerError: the module, the data, the training or the export
      failed; `model/` is as an earlier run left it (or absent).
  """
  with holding_folder(request):
    plan, entry = attempt.resolve(
        _settings(request), COMMAND, resume=resume_at(request),
        entry_name=None if request.run_fn in (None, RUN_FN_KEY)
        else request.run_fn)
    if starting is not None:
      starting(plan)
    return _run_holding_folder(request, plan, entry)


def holding_folder(request: Request):
  """A context that holds the output folder of `request` (created as
  private as its inputs, the base model's files among them;
  `output_folder.hold`)."""
  inputs = (list(request.train_data) + list(request.eval_data or []) +
            ([request.schema] if request.schema else []) +
            ([request.base_model] if request.base_model else []))
  return output_folder.hold(request.output_dir, inputs=inputs)


def _run_holding_folder(request: Request, plan: plan_lib.TrainingPlan,
                        entry) -> Outcome:
  layout = Layout(request.output_dir)
  checkpoint = plan.checkpoint_dir
  layout.clear(keep=checkpoint if request.resume else None,
               checkpoint=checkpoint)
  if request.base_model and paths.is_pattern(request.base_model):
    # TensorFlow globs a SavedModel's variables prefix: load it through a
    # link whose path holds no glob character.
    request = attr.evolve(request, base_model=layout.link_base_model(
        request.base_model))
  try:
    splits, evaluation = _write_inputs(request, layout,
                                       getattr(entry, 'train_spec', None))
    eval_steps = _run_fn_steps(
        request.eval_steps, plan, entry,
        lambda: holdout.eval_rows(evaluation, splits['eval']),
        holdout.run_fn_eval_steps, holdout.eval_steps_line)
    train_steps = _run_fn_steps(
        request.steps, plan, entry,
        lambda: holdout.train_rows(evaluation, splits['train']),
        holdout.run_fn_train_steps, holdout.train_steps_line)
    record = {'evaluation': evaluation}
    missing = local_files.missing_values(layout.data)
    if missing:  # And what was read as missing.
      record['missing_values'] = missing
    staged = StagedExport(layout.publishing, keep_dir=layout.run)
    published = attempt.run(
        _training_request(request, layout, splits, staged, plan, record,
                          eval_steps, train_steps),
        entry, attempt.Publication(staged, lambda: attempt.ExportChecks(
            eval_files=splits['eval'], schema_path=layout.schema,
            base_model=request.base_model,
            allow_signature_change=request.allow_signature_change),
            commit=layout.take_model))
  finally:
    if os.path.lexists(layout.publishing):
      removal.remove_tree(layout.publishing)
    layout.record()
  name = (f'TrainSpec {plan.spec_class}' if plan.spec_class else
          f'`{request.run_fn or RUN_FN_KEY}`')
  return Outcome(name, published.trained, published.report, layout,
                 evaluation)


def _run_fn_steps(given: Optional[int], plan: plan_lib.TrainingPlan, entry,
                  rows: Callable[[], int], steps_of: Callable[[int], int],
                  line: Callable[[int, int], str]) -> Optional[int]:
  """The train or eval steps of the training: the flag's value `given`;
  else, for a run_fn (or an entry point this process did not load),
  `steps_of` the `rows()` of the split, said in a `line`; else (a
  TrainSpec) None: the split once (per epoch, for train)."""
  if given is not None:
    return given
  if plan.spec_class or getattr(entry, 'train_spec', None) is not None:
    return None
  count = rows()
  steps = steps_of(count)
  progress.log().info(line(steps, count))
  return steps


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
  schema, source = None, INFERRED_SCHEMA
  if request.schema:
    schema, source = schema_file.read(request.schema), (
        f'the schema {request.schema}')
  required = local_files.required_columns(spec_class)
  if spec_class is None and not request.schema:  # A run_fn module.
    required = local_files.run_fn_required()
  split_options = {'delimiter': request.csv_delimiter,
                   'required': required,
                   'kept_rows': getattr(request.parsed_rows, 'folder', None)}
  train_dir = os.path.join(layout.data, statistics.split_folder('train'))
  held_out = not request.eval_data and not request.eval_on_train
  # Held out: all of it first, in a folder named like the split it is
  # checked as, then split into the train and eval folders.
  whole = layout.whole
  splits = {'train': local_files.to_split(
      request.train_data, os.path.join(whole, os.path.basename(train_dir))
      if held_out else train_dir, schema, source, **split_options)}
  if schema is None:
    schema = local_files.infer_schema(splits['train'])
    schema_file.write(layout.schema, schema)
  else:
    atomic_files.copy(request.schema, layout.schema)
  eval_dir = os.path.join(layout.data, statistics.split_folder('eval'))
  if held_out:
    parts = holdout.split(splits['train'], train_dir, eval_dir)
    removal.remove_tree(whole)
    splits = {'train': parts.train_files, 'eval': parts.eval_files}
    evaluation = holdout.evaluation(holdout.HELD_OUT,
                                    train_rows=parts.train_rows,
                                    eval_rows=parts.eval_rows)
  elif request.eval_data:
    splits['eval'] = local_files.to_split(request.eval_data, eval_dir, schema,
                                         source, **split_options)
    evaluation = holdout.evaluation(holdout.FILES, files=request.eval_data)
  else:
    splits['eval'] = local_files.link_split(splits['train'], eval_dir)
    evaluation = holdout.evaluation(holdout.TRAIN)
  if request.hparams is not None:
    atomic_files.write_json(
        layout.hparams,
        request.hparams, mode=0o600, indent=1)
  return splits, evaluation


def _training_request(request: Request, layout: Layout, splits, staged,
                      plan: plan_lib.TrainingPlan, record: Dict[str, Any],
                      eval_steps: Optional[int] = None,
                      train_steps: Optional[int] = None) -> TrainingRequest:
  """The training request of the command: its inputs as local files (what
  a TrainSpec trains on, without TFX) and, unless the plan knows the entry
  point is a TrainSpec, as the component's artifacts under the folder too
  (a `run_fn` gets the component's FnArgs, its `eval_steps` and
  `train_steps` those of `_eval_steps` and `_train_steps`)."""
  local_inputs = LocalInputs.of_splits(
      splits, layout.run, train_steps=request.steps,
      eval_steps=request.eval_steps, schema_path=layout.schema,
      hyperparameters=request.hparams, base_model=request.base_model,
      **(request.parsed_rows.fn_args_fields() if request.parsed_rows else {}))
  artifacts = ({}, {}, {}) if plan.spec_class else _artifacts(
      request, layout, splits, eval_steps, train_steps)
  return TrainingRequest(
      *artifacts, staged.serving_dir, staged.eval_dir, plan,
      local_inputs=local_inputs, interactive=request.interactive,
      started=request.started, record=record)


def _artifacts(request: Request, layout: Layout, splits,
               eval_steps: Optional[int], train_steps: Optional[int]):
  """(input_dict, output_dict, exec_properties) of the component, on
  artifacts in the output folder; `eval_args.num_steps` is `eval_steps`,
  `train_args.num_steps` `train_steps`."""
  examples = local_files.examples_artifact(layout.data, splits)
  input_dict = {keys.EXAMPLES_KEY: [examples],
                keys.SCHEMA_KEY: [_artifact(standard_artifacts.Schema,
                                            layout.schema_dir)]}
  if request.hparams is not None:
    input_dict[keys.HYPERPARAMETERS_KEY] = [_artifact(
        standard_artifacts.HyperParameters, layout.hparams_dir)]
  if request.base_model:  # A Model artifact whose serving folder links it.
    layout.link_base_model(request.base_model)
    input_dict[keys.BASE_MODEL_KEY] = [_artifact(standard_artifacts.Model,
                                                 layout.base_model)]
  output_dict = {
      keys.MODEL_KEY: [_artifact(standard_artifacts.Model, layout.publishing)],
      keys.MODEL_RUN_KEY: [_artifact(standard_artifacts.ModelRun,
                                     layout.run)]}
  if request.parsed_rows:  # Every worker reads it; the chief writes.
    request.parsed_rows.add_artifacts(input_dict, output_dict)
  exec_properties = {
      **_settings(request),
      keys.TRAIN_ARGS_KEY: json.dumps(
          {'num_steps': train_steps} if train_steps else {}),
      keys.EVAL_ARGS_KEY: json.dumps(
          {'num_steps': eval_steps} if eval_steps else {}),
      keys.CUSTOM_CONFIG_KEY: 'null'}
  return input_dict, output_dict, exec_properties


def _artifact(artifact_class, uri: str):
  artifact = artifact_class()
  artifact.uri = uri
  return artifact
