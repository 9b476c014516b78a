"""GenericExecutor: trains with the user's run_fn, validates, publishes."""

import json
import os
from typing import Any, Dict, List, Optional

from absl import logging
from tfx.dsl.components.base import base_executor
from tfx.proto import trainer_pb2
from tfx.types import artifact_utils
from tfx.types import standard_component_specs as keys
from tfx.utils import io_utils
from tfx.utils import proto_utils

from generic_trainer.component import failure
from generic_trainer.data.kept import store as kept_store
from generic_trainer.errors import GenericTrainerError
from generic_trainer.export_checks import serving_check
from generic_trainer.fnargs import inputs
from generic_trainer.kubeflow.step_job import record as step_job_record
from generic_trainer.keys import ALLOW_SIGNATURE_CHANGE_KEY
from generic_trainer.keys import PARSED_ROWS_DECISIONS
from generic_trainer.keys import PARSED_ROWS_HITS
from generic_trainer.keys import PARSED_ROWS_MISSES
from generic_trainer.keys import UPDATED_PARSED_ROWS_KEY
from generic_trainer.loop import train_result
from generic_trainer.plan import resume_folder
from generic_trainer.plan.entry_points import COMPONENT
from generic_trainer.plan.request import TrainingRequest
from generic_trainer.publication.staged_export import StagedExport
from generic_trainer.system import console
from generic_trainer.system import machine
from generic_trainer.system import output_folder
from generic_trainer.system import paths
from generic_trainer.system import preemption
from generic_trainer.system import progress
from generic_trainer.training import attempt


class GenericExecutor(base_executor.BaseExecutor):
  """Runs a user `run_fn` and publishes its export only once it is valid.

  `Do` builds the training's request from the input and output artifacts,
  runs the one attempt (`training.attempt`: the plan in this process's
  cluster environment, then train into a staging directory, validate the
  export, check that it keeps the base model's signatures when
  `base_model` is connected, and move it into the Model artifact), and
  reports what was checked and trained as the artifacts' properties. Any
  failure leaves no model in the Model artifact; a rejected export is kept
  in the node's stateful working dir for inspection.

  Where the training runs (here, a child process under the other Keras or
  on another Keras backend, `num_workers` local processes) is the plan's
  decision; `launch.launcher` carries it out. Under a TF_CONFIG (or a
  JobSet) that makes this process a member but not the chief, the same
  attempt trains and publishes nothing (its role decides).

  What `Do` writes is as private as its inputs (the examples, schema,
  transform graph, base model, hyperparameters): the Model and ModelRun
  folders get `output_folder.mode_for` of them, and the process's umask
  is set to match while it runs (`output_folder.as_private_as`), so a
  private base model or dataset never gives a model readable by all,
  and under umask 002 nothing is writable by the group. A local Model or
  ModelRun folder below a folder that others can write without the
  sticky bit (a pipeline root in a team's 2775 folder) is refused before
  anything is made there, as the command's output folder is: the
  `run_fn` writes there by path, and a member could rename a parent
  aside and put hers in its place.

  A Kubeflow Pipelines step compiled with several workers
  (`kubeflow.compile`: `keys.STEP_JOB_ENV` in its container) trains
  nowhere itself: its plan's launcher launches a TrainJob (or TFJob)
  whose pods run this executor, follows it to its end and takes the model
  its chief published (`kubeflow.step_job`); the chief records what it
  attached for the step.

  SIGTERM during `Do` (a pod deleted or preempted) stops the training at
  the next step, saves that step in the resume checkpoint, publishes
  nothing and raises PreemptedError; the same execution again resumes
  there (`generic_trainer.system.preemption`). Outside a TrainSpec's steps
  (a `run_fn`, reading the data, the export) it raises PreemptedError
  where `Do` is, saying where the run was and its last resume checkpoint.

  Run by a TFX orchestrator (given a `Context`), a failed `Do` says its
  reason first: it logs our error's message at ERROR, writes the whole
  traceback to `traceback.txt` in the stateful working dir and raises the
  error again without its chain (`component.failure`). A success logs what
  the export checks validated, in one line.
  """

  def __init__(self, context: Optional[base_executor.BaseExecutor.Context]
               = None, checkpoint_dir: Optional[str] = None):
    """`checkpoint_dir`: where training checkpoints, and resumes from after
    a kill. None (pipelines): the plan names it
    (`plan.resume_folder.pipeline_resume`), keyed by the input artifacts."""
    super().__init__(context)
    self._given_checkpoint_dir = checkpoint_dir

  def Do(self, input_dict: Dict[str, List[Any]],
         output_dict: Dict[str, List[Any]],
         exec_properties: Dict[str, Any]) -> None:
    try:
      # What it writes is as private as its inputs, and no one else may
      # rename a folder above its local outputs, as the command's.
      with preemption.handling(), preemption.stopping_anywhere(), \
          output_folder.as_private_as(
              _uris(input_dict, _PRIVACY_INPUTS),
              _uris(output_dict, (keys.MODEL_KEY, keys.MODEL_RUN_KEY))):
        self._do(input_dict, output_dict, exec_properties)
    except GenericTrainerError as e:
      # Under an orchestrator, the reason first and a short traceback;
      # called directly (no Context), the error as it is.
      short = failure.said_first(e, self._stateful_working_dir())
      if short is None:
        raise
      raise short from None

  def _do(self, input_dict, output_dict, exec_properties) -> None:
    self._log_startup(input_dict, output_dict, exec_properties)
    model_run_uri = artifact_utils.get_single_uri(
        output_dict[keys.MODEL_RUN_KEY])
    logging.info('This pod gives the training %s.', machine.describe())
    plan, entry = attempt.resolve(
        exec_properties, COMPONENT, storage=_storage(input_dict, output_dict),
        checkpoint_dir=self._given_checkpoint_dir,
        resume=resume_folder.pipeline_resume(
            input_dict, exec_properties, model_run_uri,
            self._stateful_working_dir()))
    staged = StagedExport(
        artifact_utils.get_single_uri(output_dict[keys.MODEL_KEY]),
        keep_dir=self._stateful_working_dir() or model_run_uri)
    published = attempt.run(
        TrainingRequest(input_dict, output_dict, exec_properties,
                        staged.serving_dir, staged.eval_dir, plan),
        entry, attempt.Publication(staged, lambda: attempt.ExportChecks(
            eval_files=_eval_file_patterns(input_dict, exec_properties),
            schema_path=_schema_path(input_dict),
            transform_graph_path=_single_uri_or_none(
                input_dict.get(keys.TRANSFORM_GRAPH_KEY)),
            base_model=inputs.base_model_path(
                input_dict.get(keys.BASE_MODEL_KEY)),
            allow_signature_change=bool(
                exec_properties.get(ALLOW_SIGNATURE_CHANGE_KEY)))))
    if published.serving_dir is None:
      return  # A member that is not the chief: the chief publishes.
    progress.log().info('GenericTrainer: %s; published to %s',
                        console.report_line(published.report),
                        published.serving_dir)
    if published.report:
      serving_check.attach(output_dict[keys.MODEL_KEY], published.report)
    if published.trained:
      train_result.attach(output_dict[keys.MODEL_KEY] +
                          output_dict[keys.MODEL_RUN_KEY], published.trained)
    _attach_parsed_rows(output_dict.get(UPDATED_PARSED_ROWS_KEY))
    step_job_record.write_record(plan.cluster.step_record, output_dict)

  def _stateful_working_dir(self):
    """The node's dir that survives a failed execution (None outside TFX)."""
    return self._context.stateful_working_dir if self._context else None


def _attach_parsed_rows(artifacts) -> None:
  """What the training decided for each file's parsed rows (hit, or miss
  and why), as custom properties of the ParsedRows output (ML Metadata):
  `hits`, `misses` and `decisions` (JSON, by span)."""
  for artifact in artifacts or ():
    summary = kept_store.read_decisions(artifact.uri)
    if summary is None:
      continue
    artifact.set_int_custom_property(PARSED_ROWS_HITS, summary['hits'])
    artifact.set_int_custom_property(PARSED_ROWS_MISSES, summary['misses'])
    artifact.set_string_custom_property(
        PARSED_ROWS_DECISIONS, json.dumps(summary['spans'], sort_keys=True))
    logging.info('Parsed rows: %d files read back, %d parsed; kept in %s.',
                 summary['hits'], summary['misses'], artifact.uri)


# The inputs whose privacy decides the outputs' modes: the data, what is
# made of it, and the base model (not the parsed rows: a cache, private
# by design).
_PRIVACY_INPUTS = (keys.EXAMPLES_KEY, keys.SCHEMA_KEY,
                   keys.TRANSFORM_GRAPH_KEY, keys.BASE_MODEL_KEY,
                   keys.HYPERPARAMETERS_KEY)


def _uris(artifacts_by_key, names) -> List[str]:
  """The URIs of the artifacts of `names` in `artifacts_by_key`."""
  return [artifact.uri for name in names
          for artifact in artifacts_by_key.get(name) or ()]


def _storage(input_dict, output_dict) -> Dict[str, str]:
  """Every artifact's URI, named for messages ('the model output')."""
  return {f'the {key} {direction}' + (f' {i}' if i else ''): artifact.uri
          for direction, artifacts_by_key in (('output', output_dict),
                                              ('input', input_dict))
          for key, artifacts in sorted(artifacts_by_key.items())
          for i, artifact in enumerate(artifacts or ())}


def _single_uri_or_none(artifacts):
  return artifact_utils.get_single_uri(artifacts) if artifacts else None


def _schema_path(input_dict):
  uri = _single_uri_or_none(input_dict.get(keys.SCHEMA_KEY))
  return io_utils.get_only_uri_in_dir(uri) if uri else None


def _eval_file_patterns(input_dict, exec_properties) -> List[str]:
  """File patterns of the eval split(s), as FnArgs.eval_files has them."""
  eval_args = trainer_pb2.EvalArgs()
  proto_utils.json_to_proto(exec_properties[keys.EVAL_ARGS_KEY], eval_args)
  return [os.path.join(paths.as_pattern(uri), '*')
          for split in (list(eval_args.splits) or ['eval'])
          for uri in artifact_utils.get_split_uris(
              input_dict[keys.EXAMPLES_KEY], split)]
