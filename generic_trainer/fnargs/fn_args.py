"""What user code receives: `FnArgs`, built from the component's artifacts.

`FnArgs` extends TFX's own `tfx.components.FnArgs`, so a module file written
for `tfx.components.Trainer` gets every field it expects (and
`isinstance(fn_args, tfx.components.FnArgs)` holds).
"""

from typing import Any, Dict, Optional

import attr
from tfx.components.trainer import fn_args_utils
from tfx.proto import trainer_pb2
from tfx.types import artifact_utils
from tfx.types import standard_component_specs as keys
from tfx.utils import json_utils
from tfx.utils import proto_utils

from generic_trainer.system import paths
from generic_trainer.plan import settings
from generic_trainer.fnargs import inputs
from generic_trainer.fnargs import strategies
from generic_trainer.fnargs.fields import GenericFnArgsFields
from generic_trainer.plan.request import TrainingRequest
from generic_trainer.errors import InputArtifactError, InvalidArgumentError
from generic_trainer.keys import PARSED_ROWS_BUDGET
from generic_trainer.keys import PARSED_ROWS_KEY
from generic_trainer.keys import STATISTICS_KEY
from generic_trainer.keys import UPDATED_PARSED_ROWS_KEY
from generic_trainer.data.input_pipeline import DatasetFactory
from tfx.components.util import tfxio_utils
from tfx.proto import example_gen_pb2


@attr.s
class FnArgs(fn_args_utils.FnArgs, GenericFnArgsFields):
  """Args passed to the user's `run_fn`: TFX's FnArgs, plus
  `GenericFnArgsFields` (num_examples, strategy, is_chief, worker_index,
  num_workers, checkpoint_dir, statistics_path; see there).

  Attributes:
    working_dir: Working dir (unused by the trainer; kept for TFX parity).
    train_files: File patterns of the train split(s).
    eval_files: File patterns of the eval split(s).
    train_steps: Train steps from `train_args.num_steps`; None when unset.
    eval_steps: Eval steps from `eval_args.num_steps`; None when unset.
    schema_path: Path of the schema file; None without a schema input.
    schema_file: Deprecated, use `schema_path`.
    transform_graph_path: Path of the Transform output; None without one.
    transform_output: Deprecated, use `transform_graph_path`.
    data_accessor: TFXIO factories (`tf_dataset_factory`,
      `record_batch_factory`) that read the examples whatever their format.
    serving_model_dir: Where `run_fn` must save the serving SavedModel.
      GenericTrainer checks it, then publishes it into the Model artifact.
    eval_model_dir: Where an (estimator-only) eval SavedModel may go.
    model_run_dir: Where logs, TensorBoard summaries and checkpoints go.
    base_model: Serving model path of the `base_model` input, or None.
    hyperparameters: The `hyperparameters` input as a dict, or None.
    custom_config: The component's `custom_config` dict, or None.
  """


def _parse_args(exec_properties: Dict[str, Any], key: str, proto):
  try:
    proto_utils.json_to_proto(exec_properties[key], proto)
  except Exception as e:  # pylint: disable=broad-except
    raise InvalidArgumentError(
        f"'{key}' is not a valid {type(proto).__name__}: {e}. Expected "
        f'trainer_pb2.{type(proto).__name__} as JSON. Received: '
        f'{key}={exec_properties.get(key)!r}. Pass '
        f'trainer_pb2.{type(proto).__name__}(num_steps=...) to the '
        'component.') from e
  settings.steps(proto.num_steps, f"'{key}.num_steps'",
                 f'num_steps={proto.num_steps}')
  return proto


def build_fn_args(request: TrainingRequest) -> FnArgs:
  """Builds FnArgs from a request: its artifacts and properties, the
  staging dirs run_fn exports to, and its plan's role and strategy."""
  input_dict, output_dict = request.input_dict, request.output_dict
  exec_properties = request.exec_properties
  # First: MultiWorkerMirroredStrategy must exist before TF runs any op
  # (the checks below read TFRecords).
  distributed = strategies.fn_args_fields(request.plan)
  if not input_dict.get(keys.EXAMPLES_KEY):
    raise InputArtifactError(
        "The trainer needs an 'examples' input with at least one Examples "
        'artifact. Received none. Connect ExampleGen\'s (or Transform\'s) '
        "examples to GenericTrainer(examples=...).")
  train_args = _parse_args(exec_properties, keys.TRAIN_ARGS_KEY,
                           trainer_pb2.TrainArgs())
  eval_args = _parse_args(exec_properties, keys.EVAL_ARGS_KEY,
                          trainer_pb2.EvalArgs())
  kept_rows = _single_uri(input_dict.get(PARSED_ROWS_KEY))
  for examples in input_dict[keys.EXAMPLES_KEY]:
    inputs.check_splits(examples, train_args, eval_args, kept_rows)
  inputs.check_base_model(input_dict.get(keys.BASE_MODEL_KEY))
  custom_config = json_utils.loads(
      exec_properties.get(keys.CUSTOM_CONFIG_KEY) or 'null')
  settings.check_custom_config(custom_config)

  common = fn_args_utils.get_common_fn_args(input_dict, exec_properties)
  fields = attr.asdict(common, recurse=False)
  fields.update(
      # TFX's `uri/*` patterns, with a literal `uri` (`exp[1]/...`).
      train_files=[paths.folder_pattern(p) for p in common.train_files],
      eval_files=[paths.folder_pattern(p) for p in common.eval_files],
      data_accessor=_data_accessor(common.data_accessor,
                                   input_dict[keys.EXAMPLES_KEY]),
      schema_file=common.schema_path,
      transform_output=common.transform_graph_path,
      serving_model_dir=request.serving_dir,
      eval_model_dir=request.eval_dir,
      model_run_dir=artifact_utils.get_single_uri(
          output_dict[keys.MODEL_RUN_KEY]),
      hyperparameters=inputs.read_hyperparameters(
          input_dict.get(keys.HYPERPARAMETERS_KEY)),
      custom_config=custom_config,
      num_examples=inputs.read_num_examples(
          input_dict.get(STATISTICS_KEY), input_dict[keys.EXAMPLES_KEY]),
      statistics_path=inputs.statistics_path(input_dict.get(STATISTICS_KEY)),
      checkpoint_dir=request.checkpoint_dir,
      parsed_rows_dir=_single_uri(output_dict.get(UPDATED_PARSED_ROWS_KEY)),
      parsed_rows_from=kept_rows,
      parsed_rows_budget=_budget(output_dict.get(UPDATED_PARSED_ROWS_KEY)),
      **distributed)
  return FnArgs(**fields)


def _budget(artifacts) -> Optional[int]:
  """The ParsedRows output's budget (bytes), when it has one."""
  if not artifacts or not artifacts[0].has_custom_property(PARSED_ROWS_BUDGET):
    return None
  return artifacts[0].get_int_custom_property(PARSED_ROWS_BUDGET)


def _single_uri(artifacts) -> Optional[str]:
  """The URI of the one artifact of `artifacts`, or None without one."""
  return artifact_utils.get_single_uri(artifacts) if artifacts else None


def _data_accessor(tfx_accessor, examples):
  """TFX's DataAccessor, with `input_pipeline.DatasetFactory` as the
  tf_dataset_factory for tf.Example payloads (same datasets, faster)."""
  payload_format, data_view_uri = (
      tfxio_utils.resolve_payload_format_and_data_view_uri(examples))
  if (payload_format != example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE or
      data_view_uri):
    return tfx_accessor
  return fn_args_utils.DataAccessor(
      tf_dataset_factory=DatasetFactory(['GenericTrainer']),
      record_batch_factory=tfx_accessor.record_batch_factory,
      data_view_decode_fn=tfx_accessor.data_view_decode_fn)
