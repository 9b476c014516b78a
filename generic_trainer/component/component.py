"""GenericTrainer: a drop-in replacement for `tfx.components.Trainer`."""

import os
from typing import Any, Dict, Optional, Tuple, Union

from tfx import types
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.orchestration import data_types
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.utils import json_utils

from generic_trainer.component import channels
from generic_trainer.component.spec import GenericTrainerSpec
from generic_trainer.usercode import module_loader
from generic_trainer.plan import settings
from generic_trainer.usercode import static_spec
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import UserModuleError
from generic_trainer.data.kept.artifact import ParsedRows
from generic_trainer.component.executor import GenericExecutor
from generic_trainer.keys import MODULE_FILE_KEY, MODULE_PATH_KEY
from generic_trainer.kubeflow import pod_settings as pod_settings_lib
from generic_trainer.kubeflow import resources as resources_lib
from generic_trainer.kubeflow import tfjob
from generic_trainer.kubeflow import trainjob
from tfx.components.util import udf_utils


class GenericTrainer(base_component.BaseComponent):
  """Trains a model with a user `run_fn` and publishes it only if it serves.

  Takes the same arguments as `tfx.components.Trainer` and the same module
  files. In addition it validates the export deeply (loads it, finds a
  `serving_default` signature and predicts on eval examples) before anything
  downstream can see it, fills `fn_args.num_examples` from an optional
  `statistics` input, and can run the training under Keras 3 or tf.keras 2
  per component (`keras_version`), on TensorFlow or JAX (`backend`), and
  on several workers (`num_workers`), which restart from the last
  checkpoint when one dies (`max_restarts`).

  Outputs: `model` (Model; the SavedModel is in `Format-Serving`) and
  `model_run` (ModelRun; logs, TensorBoard, checkpoints, the training
  record). A rejected export is kept in the node's stateful working dir;
  so is `traceback.txt` of a failed execution, whose reason is logged
  first and raised without the chained traceback (`component.failure`).
  The module may provide `run_fn(fn_args)` or a `generic_trainer.TrainSpec`
  subclass (`run_fn='pkg.module.SpecName'` names one).
  """

  SPEC_CLASS = GenericTrainerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(GenericExecutor)

  def __init__(
      self,
      examples: Optional[types.BaseChannel] = None,
      transform_graph: Optional[types.BaseChannel] = None,
      schema: Optional[types.BaseChannel] = None,
      base_model: Optional[types.BaseChannel] = None,
      hyperparameters: Optional[types.BaseChannel] = None,
      statistics: Optional[types.BaseChannel] = None,
      module_file: Optional[Union[str, data_types.RuntimeParameter]] = None,
      module_path: Optional[str] = None,
      run_fn: Optional[Union[str, data_types.RuntimeParameter]] = None,
      train_args: Optional[Union[trainer_pb2.TrainArgs,
                                 data_types.RuntimeParameter]] = None,
      eval_args: Optional[Union[trainer_pb2.EvalArgs,
                                data_types.RuntimeParameter]] = None,
      custom_config: Optional[Union[Dict[str, Any],
                                    data_types.RuntimeParameter]] = None,
      keras_version: Optional[str] = None,
      num_workers: Union[int, str, Tuple[int, int], None] = None,
      strategy: Optional[str] = None,
      allow_signature_change: Optional[bool] = None,
      max_restarts: Optional[int] = None,
      backend: Optional[str] = None,
      parsed_rows: Optional[types.BaseChannel] = None,
      keep_parsed_rows: Optional[bool] = None,
      resources: Optional[Dict[str, Any]] = None,
      pod_settings: Optional[Dict[str, Any]] = None):
    """Constructs a GenericTrainer.

    Args:
      examples: Channel of Examples to train and evaluate on (required).
      transform_graph: Optional Channel of TransformGraph; its path reaches
        run_fn as `fn_args.transform_graph_path`.
      schema: Optional Channel of Schema (`fn_args.schema_path`).
      base_model: Optional Channel of Model, for warm start
        (`fn_args.base_model`).
      hyperparameters: Optional Channel of HyperParameters, e.g. Tuner's
        best (`fn_args.hyperparameters`).
      statistics: Optional Channel of ExampleStatistics; fills
        `fn_args.num_examples` per split.
      module_file: Path of a Python file with a top-level `run_fn(fn_args)`
        or a `TrainSpec` subclass (a model, an optimizer and a loss, with no
        training loop of yours; docs/guides/train-spec.md).
      module_path: Importable module with a top-level `run_fn(fn_args)`.
      run_fn: Dotted path of the function, e.g. 'my_pkg.my_module.run_fn'.
        Exactly one of module_file, module_path and run_fn must be given.
      train_args: trainer_pb2.TrainArgs: splits (default ['train']) and
        num_steps (`fn_args.train_steps`; unset means None).
      eval_args: trainer_pb2.EvalArgs: splits (default ['eval']) and
        num_steps (`fn_args.eval_steps`).
      custom_config: JSON-serialisable dict passed as `fn_args.custom_config`.
      keras_version: 'keras3' or 'tf_keras' (legacy tf.keras 2). None runs
        under whatever `TF_USE_LEGACY_KERAS` selects in the pipeline's
        process; a value that differs runs training in a child process.
      num_workers: How many processes train together. N > 1 starts N local
        workers training with MultiWorkerMirroredStrategy; under a TF_CONFIG
        set by the cluster (Training Operator, Vertex AI) the cluster's
        replicas are the workers, and N, if set, must match their number.
        None or 1: one process. A range 'MIN:MAX' (or (MIN, MAX)) starts
        MAX local workers (as many as the machine can run), restarts with
        fewer, down to MIN, when one cannot come back, and grows back to
        MAX (docs/guides/elastic-workers.md); a TF_CONFIG cluster's size
        must lie within it.
      strategy: 'multi_worker_mirrored' (picked when several workers train),
        'mirrored' (one process, all its devices) or 'default'. run_fn
        gets it as `fn_args.strategy`.
      allow_signature_change: With a `base_model`, the new model must keep
        the signatures the base serves (names, inputs, dtypes, shapes,
        outputs), or nothing is published; True publishes it anyway, when
        the serving clients change with the model.
      max_restarts: How many times a multi-worker training restarts its
        workers from the last checkpoint after one died without an error
        (SIGKILL, OOM): the local workers, or the TFJob's pods
        (`to_tfjob`). 0 fails the execution at the first death; None
        means 2. A worker that raises an error is never restarted.
      backend: The Keras 3 backend the training computes with: 'tensorflow'
        or 'jax'. None: the TrainSpec's `backend`, else TensorFlow. A JAX
        training runs in a child process with KERAS_BACKEND=jax; its
        export is a TensorFlow SavedModel (docs/guides/jax.md). JAX
        trains in one process only: not with tf_keras, several workers or
        a tf.distribute strategy.
      parsed_rows: Optional Channel of ParsedRows: the parsed rows an
        earlier execution kept (a resolver of the latest one). A TrainSpec
        reads the rows of every file whose entry is there and unchanged
        instead of parsing the file again (docs/guides/parsed-rows-cache.md).
      keep_parsed_rows: Whether this execution keeps the parsed rows of
        the files it reads for the next one, in the output
        `updated_parsed_rows` (ParsedRows). None: True when `parsed_rows`
        is connected.
      resources: What each trainer pod asks the cluster for: 'cpu',
        'memory', 'accelerator_type', 'accelerator_count', 'node_selector',
        'tolerations' (`generic_trainer.kubeflow.resources`). The compiled
        Kubeflow step carries CPU, memory and the accelerator; every
        replica of `to_tfjob` and `to_trainjob` carries all of them. A
        local run ignores them.
      pod_settings: What a cluster needs on each trainer pod besides its
        resources: 'service_account', 'annotations', 'labels', 'env',
        'volumes', 'volume_mounts', 'security_context', as Kubernetes
        spells them (`generic_trainer.kubeflow.pod_settings`). Every pod of
        `to_tfjob` and `to_trainjob` carries all of them (and Istio's
        sidecar off unless the annotations say otherwise); the compiled
        Kubeflow step carries those KFP can (`generic_trainer.kubeflow.
        compile` says which it cannot). A local run ignores them.

    Raises:
      InvalidArgumentError: an argument is wrong; the message says which.
      UserModuleError: module_file is missing, does not parse, or has no
        top-level run_fn.
    """
    module_loader.check_one_source(module_file=module_file, module_path=module_path,
                          run_fn=run_fn)
    if examples is None:
      raise InvalidArgumentError(
          "'examples' is required: GenericTrainer trains on them. Expected "
          'a channel of Examples artifacts. Received: examples=None. Pass '
          "the Examples channel, e.g. examples=example_gen.outputs['examples']"
          '.')
    channels.check_inputs(
        GenericTrainerSpec.INPUTS, examples=examples,
        transform_graph=transform_graph, schema=schema, base_model=base_model,
        hyperparameters=hyperparameters, statistics=statistics,
        parsed_rows=parsed_rows)
    if isinstance(module_file, os.PathLike):  # pathlib.Path: read as meant.
      module_file = os.fspath(module_file)
    if isinstance(module_file, str):
      try:
        module_loader.check_module_source(module_file)
      except UserModuleError as e:
        # Its cause (ast's SyntaxError) says nothing the message does not:
        # the traceback ends at the script's line, not 25 lines later.
        raise e.with_traceback(None) from None
    # The part of the training plan the settings alone decide; the rest
    # (the TrainSpec's backend...) is resolved by the same code at run time.
    settings.check_settings(keras_version=keras_version, backend=backend,
                        num_workers=num_workers, strategy=strategy,
                        max_restarts=max_restarts)
    # What the module's source says plainly: a head on JAX (row 222).
    static_spec.check_heads_on_jax(module_file, backend,
                                   f'backend={backend!r}')
    settings.check_flag('allow_signature_change', allow_signature_change)
    settings.check_flag('keep_parsed_rows', keep_parsed_rows)
    if keep_parsed_rows is None:
      keep_parsed_rows = parsed_rows is not None
    self.resources = resources_lib.from_value(resources)
    self.pod_settings = pod_settings_lib.from_value(pod_settings)
    train_args = _checked_args('train_args', train_args, trainer_pb2.TrainArgs)
    eval_args = _checked_args('eval_args', eval_args, trainer_pb2.EvalArgs)
    try:
      spec = GenericTrainerSpec(
          examples=examples,
          transform_graph=transform_graph,
          schema=schema,
          base_model=base_model,
          hyperparameters=hyperparameters,
          statistics=statistics,
          parsed_rows=parsed_rows,
          train_args=train_args,
          eval_args=eval_args,
          module_file=module_file,
          module_path=module_path,
          run_fn=run_fn,
          custom_config=_serialized_custom_config(custom_config),
          keras_version=keras_version,
          num_workers=settings.worker_range_text(
              settings.worker_range(num_workers)) if num_workers is not None
          else None,
          strategy=strategy,
          allow_signature_change=allow_signature_change,
          max_restarts=max_restarts,
          backend=backend,
          pod_settings=(self.pod_settings.to_json()
                        if self.pod_settings is not None else None),
          model=types.Channel(type=standard_artifacts.Model),
          model_run=types.Channel(type=standard_artifacts.ModelRun),
          updated_parsed_rows=types.Channel(type=ParsedRows)
          if keep_parsed_rows else None)
    except TypeError as e:
      raise channels.parameter_error(e) from e
    super().__init__(spec=spec)
    if self.resources is not None:
      # KubeflowV2DagRunner copies it into the step's container.
      self.with_platform_config(self.resources.platform_config())
    if udf_utils.should_package_user_modules():
      # As tfx.components.Trainer does: at run time module_file becomes
      # module_path='name@wheel', installed by the executor.
      udf_utils.add_user_module_dependency(self, MODULE_FILE_KEY,
                                           MODULE_PATH_KEY)

  def to_tfjob(self, name: str, image: str, executor_input: Dict[str, Any],
               **kwargs) -> Dict[str, Any]:
    """A TFJob (Kubeflow Training Operator) that runs this trainer on
    `num_workers` replicas; see `generic_trainer.kubeflow.tfjob.render_for_component`.
    """
    return tfjob.render_for_component(self, name, image, executor_input,
                                      **kwargs)

  def to_trainjob(self, name: str, image: str, executor_input: Dict[str, Any],
                  **kwargs) -> Dict[str, Any]:
    """A Kubeflow Trainer v2 TrainJob and the TrainingRuntime it names,
    running this trainer on `num_workers` nodes; see
    `generic_trainer.kubeflow.trainjob.render_for_component`."""
    return trainjob.render_for_component(self, name, image, executor_input,
                                         **kwargs)


def _checked_args(name: str, value, proto_class):
  if value is None:
    return proto_class()
  if isinstance(value, data_types.RuntimeParameter):
    return value
  if not isinstance(value, proto_class):
    raise InvalidArgumentError(
        f"'{name}' must be a trainer_pb2.{proto_class.__name__}, e.g. "
        f'trainer_pb2.{proto_class.__name__}(num_steps=100). Received: '
        f'{name} that is a {type(value).__name__}. Pass '
        f'trainer_pb2.{proto_class.__name__}(...) instead.')
  settings.steps(value.num_steps, f"'{name}.num_steps'",
                 f'num_steps={value.num_steps}')
  return value


def _serialized_custom_config(custom_config):
  if isinstance(custom_config, data_types.RuntimeParameter):
    return custom_config
  settings.check_custom_config(custom_config)
  try:
    return json_utils.dumps(custom_config)
  except (TypeError, ValueError) as e:
    raise InvalidArgumentError(
        f"'custom_config' must be JSON-serialisable: {e}. Received: a value "
        'JSON cannot hold (see above). Convert values to str, int, float, '
        'bool, list or dict.') from e
