"""TrainingRequest: everything one training needs, in one object.

The executor, the command and the notebook `Estimator` build it around the
`TrainingPlan`; its inputs are the component's artifacts, or (the command's
and the notebook's TrainSpecs, which need no TFX) local files
(`LocalInputs`, which both build with `LocalInputs.of_splits`);
whichever process trains receives it: this one (`launch.launcher`), a child
under the other Keras or backend, or a local worker (`launch`), as JSON in
between. Keeping it one object is what keeps every path passing the same
things, and the plan in it is what keeps them from deciding again.
"""

import os
from typing import Any, Dict, List, Mapping, Optional

import attr

from generic_trainer.system import paths
from generic_trainer.plan.plan import TrainingPlan
from generic_trainer.system.lazy import artifact_utils
from generic_trainer.system.lazy import json_utils
from generic_trainer.system.lazy import standard_component_specs as keys

# The scratch folder of a member that publishes nothing (a non-chief
# worker): its Model and ModelRun outputs, in folders of these names.
SCRATCH_MODEL = 'model'
SCRATCH_MODEL_RUN = 'model_run'


@attr.s(frozen=True)
class LocalInputs:
  """A training's inputs as local files: what `fnargs.local.LocalFnArgs`
  takes from them, without TFX (the command's and the notebook's
  TrainSpecs). Built by `of_splits`; carried as JSON to the process that
  trains.

  Attributes:
    train_files: File patterns of the train split's files.
    eval_files: File patterns of the eval split's files.
    model_run_dir: Where history, TensorBoard summaries and checkpoints go
      (the ModelRun folder).
    train_steps: Train steps; None reads the train data once per epoch.
    eval_steps: Eval steps; None evaluates on all the eval data.
    schema_path: The schema.pbtxt the data follows, or None.
    hyperparameters: Hyperparameter values, or None.
    base_model: The SavedModel folder to warm-start from, or None.
    parsed_rows_dir: Where the parsed rows of each file are kept for the
      next training, or None (`data.kept`).
    parsed_rows_budget: The most bytes `parsed_rows_dir` keeps; None: the
      default budget.
  """
  train_files = attr.ib(type=List[str])
  eval_files = attr.ib(type=List[str])
  model_run_dir = attr.ib(type=str)
  train_steps = attr.ib(type=Optional[int], default=None)
  eval_steps = attr.ib(type=Optional[int], default=None)
  schema_path = attr.ib(type=Optional[str], default=None)
  hyperparameters = attr.ib(type=Optional[Dict[str, Any]], default=None)
  base_model = attr.ib(type=Optional[str], default=None)
  parsed_rows_dir = attr.ib(type=Optional[str], default=None)
  parsed_rows_budget = attr.ib(type=Optional[int], default=None)

  @classmethod
  def of_splits(cls, splits: Mapping[str, List[str]], model_run_dir: str,
                **fields) -> 'LocalInputs':
    """The inputs of a training on the split folders' files `splits`
    ({'train': [...], 'eval': [...]}, read as patterns: `paths.as_pattern`)
    writing its run records in `model_run_dir`; `fields`: the others."""
    return cls(train_files=[paths.as_pattern(f) for f in splits['train']],
               eval_files=[paths.as_pattern(f) for f in splits['eval']],
               model_run_dir=model_run_dir, **fields)

  def to_json(self) -> Dict[str, Any]:
    return attr.asdict(self)

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> 'LocalInputs':
    return cls(**value)


@attr.s(frozen=True)
class TrainingRequest:
  """The inputs, settings and output places of one training.

  Attributes:
    input_dict: The component's input artifacts, by key.
    output_dict: Its output artifacts (Model, ModelRun), by key.
    exec_properties: Its execution properties (train_args, module_file...).
    serving_dir: Where the entry point exports the serving SavedModel: the
      staging folder of the Model artifact for the chief, scratch for the
      other workers.
    eval_dir: Where an eval SavedModel may go, beside it.
    plan: The resolved training (`plan.plan.TrainingPlan`): source,
      backend, Keras version, role, strategy, where it runs, checkpoint
      folder.
    local_inputs: For a TrainSpec, its inputs as local files
      (`LocalInputs`), so that the process that trains builds its FnArgs
      without TFX; None: from the artifacts. A `run_fn` always gets FnArgs
      from the artifacts.
    interactive: How the TrainSpec's progress shows: True a bar, False log
      lines, None a bar on a terminal.
    started: `time.monotonic()` when the process that asked for the
      training started: the training record then says how long it took
      to the first step (`time_to_first_step_s`); None: not said.
    record: Entries the training record (train_result.json) carries
      besides the training's own (the command's `evaluation`, what it read
      as missing); written with it, once.
  """
  input_dict = attr.ib(type=Dict[str, List[Any]])
  output_dict = attr.ib(type=Dict[str, List[Any]])
  exec_properties = attr.ib(type=Dict[str, Any])
  serving_dir = attr.ib(type=str)
  eval_dir = attr.ib(type=str)
  plan = attr.ib(type=TrainingPlan)
  local_inputs = attr.ib(type=Optional[LocalInputs], default=None)
  interactive = attr.ib(type=Optional[bool], default=None)
  started = attr.ib(type=Optional[float], default=None)
  record = attr.ib(type=Dict[str, Any], factory=dict)

  @property
  def checkpoint_dir(self) -> Optional[str]:
    """Where the training checkpoints, and resumes from after a kill
    (`generic_trainer.resume`); None: no resume."""
    return self.plan.checkpoint_dir

  def with_plan(self, plan: TrainingPlan) -> 'TrainingRequest':
    """This request with `plan` (completed where the module loaded)."""
    return attr.evolve(self, plan=plan)

  def in_child(self) -> 'TrainingRequest':
    """This request for the child process that trains it."""
    return attr.evolve(self, plan=self.plan.in_child())

  def with_workers(self, count: int) -> 'TrainingRequest':
    """This request for a local group of `count` workers
    (`TrainingPlan.with_workers`)."""
    return attr.evolve(self, plan=self.plan.with_workers(count))

  def for_member(self, member) -> 'TrainingRequest':
    """This request for `member` of the local group it starts (a
    `plan.cluster.LocalGroup`; its index 0 is the chief)."""
    return attr.evolve(self, plan=self.plan.for_member(member))

  def with_scratch_outputs(self, root: str) -> 'TrainingRequest':
    """This request with its Model and ModelRun outputs in `root`
    (`SCRATCH_MODEL`, `SCRATCH_MODEL_RUN`), for a member whose export and
    logs are thrown away: copies of the output artifacts, or of the local
    inputs' ModelRun folder."""
    model = os.path.join(root, SCRATCH_MODEL)
    model_run = os.path.join(root, SCRATCH_MODEL_RUN)
    serving_dir, eval_dir = paths.model_dirs(model)
    outputs = self.output_dict
    if outputs:
      outputs = _artifact_copies(outputs, root, model, model_run)
    local = self.local_inputs
    if local is not None:
      local = attr.evolve(local, model_run_dir=model_run)
    return attr.evolve(self, output_dict=outputs, serving_dir=serving_dir,
                       eval_dir=eval_dir, local_inputs=local)

  def to_json(self) -> Dict[str, Any]:
    """A JSON-able dict: artifacts as TFX serialises them (a request of
    local files alone carries none, and loads no TFX)."""
    value = {
        'serving_dir': self.serving_dir,
        'eval_dir': self.eval_dir,
        'plan': self.plan.to_json(),
        'local_inputs': (self.local_inputs.to_json()
                         if self.local_inputs is not None else None),
        'interactive': self.interactive,
        'started': self.started,
        'record': self.record,
    }
    if self.input_dict or self.output_dict or self.exec_properties:
      # TFX's artifact serialisation imports TFX (seconds, at the first
      # use of the lazy modules): only a request of artifacts pays for it.
      value.update(
          input_dict=artifact_utils.jsonify_artifact_dict(self.input_dict),
          output_dict=artifact_utils.jsonify_artifact_dict(self.output_dict),
          exec_properties=json_utils.dumps(self.exec_properties))
    return value

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> 'TrainingRequest':
    artifacts = ({}, {}, {})
    if 'input_dict' in value:
      artifacts = (artifact_utils.parse_artifact_dict(value['input_dict']),
                   artifact_utils.parse_artifact_dict(value['output_dict']),
                   json_utils.loads(value['exec_properties']))
    return cls(
        *artifacts, serving_dir=value['serving_dir'],
        eval_dir=value['eval_dir'], plan=TrainingPlan.from_json(value['plan']),
        local_inputs=(LocalInputs.from_json(value['local_inputs'])
                      if value.get('local_inputs') is not None else None),
        interactive=value.get('interactive'), started=value.get('started'),
        record=value.get('record') or {})

  def model_uri(self) -> str:
    """The Model artifact's URI (a request of artifacts)."""
    return artifact_utils.get_single_uri(self.output_dict[keys.MODEL_KEY])

  def model_run_dir(self) -> str:
    """The ModelRun artifact's URI (logs, history, workers.json)."""
    if self.local_inputs is not None:
      return self.local_inputs.model_run_dir
    return artifact_utils.get_single_uri(self.output_dict[keys.MODEL_RUN_KEY])



def _artifact_copies(output_dict: Dict[str, List[Any]], root: str,
                     model: str, model_run: str) -> Dict[str, List[Any]]:
  """Copies of the artifacts of `output_dict`: the Model's at `model`, the
  ModelRun's at `model_run`, any other output's in `root`, in a folder
  named by its key."""
  uris = {keys.MODEL_KEY: model, keys.MODEL_RUN_KEY: model_run}
  copies = {}
  for key, artifacts in output_dict.items():
    copies[key] = []
    for artifact in artifacts:
      copy = type(artifact)()
      copy.mlmd_artifact.CopyFrom(artifact.mlmd_artifact)
      copy.uri = uris.get(key) or os.path.join(root, key)
      copies[key].append(copy)
  return copies
