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

from generic_trainer.system import machine
from generic_trainer.system import paths
from generic_trainer.system import preemption
from generic_trainer import resume
from generic_trainer.system import scratch
from generic_trainer.loop import train_result
from generic_trainer.checks import attempt
from generic_trainer.fnargs import inputs
from generic_trainer.plan import distribution
from generic_trainer.plan import plan as plan_lib
from generic_trainer.checks import serving_check
from generic_trainer.checks.publish import StagedExport
from generic_trainer.plan.request import TrainingRequest
from generic_trainer.data.kept import store as kept_store
from generic_trainer.keys import ALLOW_SIGNATURE_CHANGE_KEY
from generic_trainer.keys import PARSED_ROWS_DECISIONS
from generic_trainer.keys import PARSED_ROWS_HITS
from generic_trainer.keys import PARSED_ROWS_MISSES
from generic_trainer.keys import STOP_FILE_ENV
from generic_trainer.keys import TF_CONFIG_ENV
from generic_trainer.keys import UPDATED_PARSED_ROWS_KEY
from generic_trainer.launch import launcher
from generic_trainer.loop.handlers.preemption_stop import request_file


class GenericExecutor(base_executor.BaseExecutor):
  """Runs a user `run_fn` and publishes its export only once it is valid.

  Steps: resolve the training once (`plan.plan.resolve`: the settings,
  the user module from `module_file`, `module_path` or `run_fn`, where it
  trains), then run the one attempt sequence (`checks.attempt.run`): train
  into a staging directory (FnArgs built from the input artifacts),
  validate the export, check that it keeps the base model's signatures
  (when `base_model` is connected), and move it into the Model artifact.
  Any failure leaves no model in the Model artifact; a rejected export is
  kept in the node's stateful working dir for inspection.

  Where the training runs (here, a child process under the other Keras or
  on another Keras backend, `num_workers` local processes) is the plan's
  decision; `launch.launcher` carries it out. Under a TF_CONFIG that makes
  this process a non-chief worker, it trains and publishes nothing.

  SIGTERM during `Do` (a pod deleted or preempted) stops the training at
  the next step, saves that step in the resume checkpoint, publishes
  nothing and raises PreemptedError; the same execution again resumes
  there (`generic_trainer.system.preemption`).
  """

  def __init__(self, context: Optional[base_executor.BaseExecutor.Context]
               = None, checkpoint_dir: Optional[str] = None):
    """`checkpoint_dir`: where training checkpoints, and resumes from after
    a kill. None (pipelines): the plan names it
    (`plan.plan.pipeline_resume`), keyed by the input artifacts."""
    super().__init__(context)
    self._given_checkpoint_dir = checkpoint_dir

  def Do(self, input_dict: Dict[str, List[Any]],
         output_dict: Dict[str, List[Any]],
         exec_properties: Dict[str, Any]) -> None:
    # What `_do` sets for this execution (a TF_CONFIG built from a JobSet,
    # a cluster's stop file) ends with it: an in-process caller's next
    # execution starts from its own environment.
    before = {name: os.environ.get(name)
              for name in (TF_CONFIG_ENV, STOP_FILE_ENV)}
    try:
      with preemption.handling():
        self._do(input_dict, output_dict, exec_properties)
    finally:
      for name, value in before.items():
        if value is None:
          os.environ.pop(name, None)
        else:
          os.environ[name] = value

  def _do(self, input_dict, output_dict, exec_properties) -> None:
    self._log_startup(input_dict, output_dict, exec_properties)
    logging.info('This pod gives the training %s.', machine.describe())
    tf_config = distribution.cluster_tf_config(os.environ)
    if tf_config and not os.environ.get(TF_CONFIG_ENV):
      # TensorFlow's cluster resolver, and every child, read it from here.
      os.environ[TF_CONFIG_ENV] = tf_config
      logging.info('TF_CONFIG built from the JobSet environment: %s',
                   tf_config)
    model_run_uri = artifact_utils.get_single_uri(
        output_dict[keys.MODEL_RUN_KEY])
    plan, entry = plan_lib.resolve(
        exec_properties, tf_config=tf_config,
        checkpoint_dir=self._given_checkpoint_dir,
        resume=plan_lib.pipeline_resume(input_dict, exec_properties,
                                        model_run_uri,
                                        self._stateful_working_dir()))
    if tf_config and plan.role.num_workers > 1:
      _share_stop_file(plan)
    if not plan.role.is_chief:
      _train_as_worker(TrainingRequest(input_dict, output_dict,
                                       exec_properties, '', '', plan), entry)
      return
    staged = StagedExport(
        artifact_utils.get_single_uri(output_dict[keys.MODEL_KEY]),
        keep_dir=self._stateful_working_dir() or model_run_uri)
    published = attempt.run(
        staged, TrainingRequest(input_dict, output_dict, exec_properties,
                                staged.serving_dir, staged.eval_dir, plan),
        entry,
        lambda: attempt.ExportChecks(
            eval_files=_eval_file_patterns(input_dict, exec_properties),
            schema_path=_schema_path(input_dict),
            transform_graph_path=_single_uri_or_none(
                input_dict.get(keys.TRANSFORM_GRAPH_KEY)),
            base_model=inputs.base_model_path(
                input_dict.get(keys.BASE_MODEL_KEY)),
            allow_signature_change=bool(
                exec_properties.get(ALLOW_SIGNATURE_CHANGE_KEY))))
    resume.remove(plan.checkpoint_dir)
    logging.info('Export validated (%s) and published to %s.',
                 published.report, published.serving_dir)
    if published.report:
      serving_check.attach(output_dict[keys.MODEL_KEY], published.report)
    if published.trained:
      train_result.attach(output_dict[keys.MODEL_KEY] +
                          output_dict[keys.MODEL_RUN_KEY], published.trained)
    _attach_parsed_rows(output_dict.get(UPDATED_PARSED_ROWS_KEY))

  def _stateful_working_dir(self):
    """The node's dir that survives a failed execution (None outside TFX)."""
    return self._context.stateful_working_dir if self._context else None


def _share_stop_file(plan) -> None:
  """Gives the pods of a TF_CONFIG cluster the stop file a local group
  shares (`loop.handlers.preemption_stop`), in the resume checkpoint's
  folder, which every pod reaches (it resumes from it): a pod that gets
  SIGTERM asks the chief for a stop there, the chief writes the step, and
  every pod stops at it, saved, as a local group does. The chief removes
  what a preempted attempt left before it trains: no worker can end a step
  before the chief has started training."""
  if os.environ.get(STOP_FILE_ENV) or not plan.checkpoint_dir:
    return
  stop_file = os.path.join(plan.checkpoint_dir, 'stop-step')
  os.makedirs(plan.checkpoint_dir, exist_ok=True)
  if plan.role.is_chief:
    for stale in (stop_file, request_file(stop_file)):
      if os.path.exists(stale):
        os.remove(stale)
  os.environ[STOP_FILE_ENV] = stop_file


def _train_as_worker(request: TrainingRequest, entry) -> None:
  """Trains as a non-chief member of a TF_CONFIG cluster; publishes nothing.

  The export and logs go to a scratch folder, removed afterwards: only the
  chief's export is validated and published.
  """
  role = request.plan.role
  logging.info('TF_CONFIG: training as worker %d of %d (%s %d); the chief '
               'publishes the model.', role.worker_index, role.num_workers,
               role.task_type, role.task_index)
  with scratch.folder('worker') as root:
    launcher.train(request.with_scratch_outputs(root), entry)


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
