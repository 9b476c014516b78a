"""What a TrainSpec receives as `fn_args` in a local run, without TFX.

The command (`generic_trainer.command.cli`) and the Estimator train TrainSpecs on
local files. `LocalFnArgs` has the fields of `generic_trainer.FnArgs` (those
of TFX's FnArgs and ours), with the defaults of a one-process run, and a data
accessor that reads tf.Example TFRecords as TFXIO does. It is not a subclass
of TFX's FnArgs: the module defining that one imports Apache Beam, seconds of
start-up a local run does not need. `run_fn` modules, which may check
`isinstance(fn_args, tfx.components.FnArgs)`, get the real FnArgs from the
executor.
"""

from typing import Any, Callable, Dict, List, NamedTuple, Optional

import attr

from generic_trainer.fnargs import strategies
from generic_trainer.fnargs.fields import GenericFnArgsFields
from generic_trainer.data.input_pipeline import DatasetFactory
from generic_trainer.system.lazy import tfxio


class DataAccessor(NamedTuple):
  """TFX's `DataAccessor` for tf.Example TFRecords, with the same fields.

  `tf_dataset_factory(file_pattern, options, schema)` is
  `input_pipeline.DatasetFactory`, which makes what TFXIO's `TFExampleRecord`
  makes, faster; `record_batch_factory` imports TFXIO (and Apache Beam) when called.
  """
  tf_dataset_factory: Callable[..., Any]
  record_batch_factory: Callable[..., Any]
  data_view_decode_fn: Optional[Callable[..., Any]] = None


def _record_batches(file_pattern, options, schema):
  return tfxio.TFExampleRecord(file_pattern,
                               schema=schema).RecordBatches(options)


def tf_example_accessor() -> DataAccessor:
  """A DataAccessor for TFRecord files of tf.Example."""
  return DataAccessor(tf_dataset_factory=DatasetFactory(['GenericTrainer']),
                      record_batch_factory=_record_batches)


@attr.s
class _TfxFnArgsFields:
  """The fields of TFX's FnArgs (`tfx.components.FnArgs`), without its
  module's imports."""
  working_dir = attr.ib(type=str, default=None)
  train_files = attr.ib(type=List[str], default=None)
  eval_files = attr.ib(type=List[str], default=None)
  train_steps = attr.ib(type=int, default=None)
  eval_steps = attr.ib(type=int, default=None)
  schema_path = attr.ib(type=str, default=None)
  schema_file = attr.ib(type=str, default=None)
  transform_graph_path = attr.ib(type=str, default=None)
  transform_output = attr.ib(type=str, default=None)
  data_accessor = attr.ib(type=DataAccessor, factory=tf_example_accessor)
  serving_model_dir = attr.ib(type=str, default=None)
  eval_model_dir = attr.ib(type=str, default=None)
  model_run_dir = attr.ib(type=str, default=None)
  base_model = attr.ib(type=str, default=None)
  hyperparameters = attr.ib(type=Dict[str, Any], default=None)
  custom_config = attr.ib(type=Dict[str, Any], default=None)


@attr.s
class LocalFnArgs(_TfxFnArgsFields, GenericFnArgsFields):
  """Args of a local run, named and ordered as in `generic_trainer.FnArgs`.

  TFX's FnArgs fields, then `GenericFnArgsFields` (num_examples, strategy,
  is_chief, worker_index, num_workers, checkpoint_dir, statistics_path),
  with the defaults of a one-process run.

  Attributes:
    working_dir: Unused; kept for parity with TFX's FnArgs.
    train_files: File patterns of the train data (TFRecords of tf.Example).
    eval_files: File patterns of the eval data.
    train_steps: Train steps; None reads the train data once per epoch.
    eval_steps: Eval steps; None evaluates on all the eval data.
    schema_path: Path of the schema.pbtxt.
    schema_file: Deprecated, use `schema_path` (filled from it).
    transform_graph_path: Always None: local runs have no Transform graph.
    transform_output: Deprecated, use `transform_graph_path`.
    data_accessor: `DataAccessor` whose `tf_dataset_factory` reads the files.
    serving_model_dir: Where the serving SavedModel is exported.
    eval_model_dir: Where an eval SavedModel may go; usually unused.
    model_run_dir: Where history, TensorBoard summaries and checkpoints go.
    base_model: The base model's SavedModel folder, or None.
    hyperparameters: Hyperparameter values, a dict, or None.
    custom_config: A dict, or None.
  """

  def __attrs_post_init__(self):
    if self.schema_file is None:
      self.schema_file = self.schema_path
    if self.transform_output is None:
      self.transform_output = self.transform_graph_path


def from_request(request) -> LocalFnArgs:
  """The LocalFnArgs of a `plan.request.TrainingRequest` whose inputs are
  local files (`request.local_inputs`, a `plan.request.LocalInputs`): its
  fields, the export folders
  and checkpoint folder of the request, and its plan's strategy and role
  (`strategies.fn_args_fields`)."""
  return LocalFnArgs(
      **attr.asdict(request.local_inputs),
      serving_model_dir=request.serving_dir,
      eval_model_dir=request.eval_dir, checkpoint_dir=request.checkpoint_dir,
      **strategies.fn_args_fields(request.plan))
