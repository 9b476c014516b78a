"""TrainingPlan: what a training is, decided once and carried everywhere.

Every entry point (the component at construction, the executor, the
`generic-trainer` command, a child process, each local worker) reaches a
training through this module, as Lightning's accelerator connector resolves
a Trainer's settings once:
  - `check_settings` refuses what the settings alone show to be wrong (an
    unknown `keras_version` or `backend`, JAX with tf.keras 2, several
    workers or a tf.distribute strategy...). The component calls it at
    construction, the command on its flags, `resolve` at run time: one
    check, one message, named the way the entry point spells it (`Names`);
  - `resolve` builds the `TrainingPlan`: the source of the user code, the
    backend (the setting, else the TrainSpec's), the Keras version, this
    process's place in the cluster, the strategy, where it trains
    (`Where`), the checkpoint folder. It loads the user module once, when
    this process is the one that can (not for local workers, nor under the
    other tf.keras: their processes load it, through `complete`);
  - `complete` adds what only the loaded module tells (a TrainSpec's own
    backend) in the process that trains, and refuses a process that cannot
    give what the plan says.
Child processes receive the plan (`to_json`) and never decide again.
"""

import hashlib
import json
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import attr

from generic_trainer.errors import InvalidArgumentError, SpecError
from generic_trainer.errors import TrainingProcessError
from generic_trainer.keys import BACKENDS, BACKEND_KEY, DEFAULT_MAX_RESTARTS
from generic_trainer.keys import DEFAULT_STRATEGY, JAX_BACKEND, KERAS3
from generic_trainer.keys import KERAS_VERSIONS, KERAS_VERSION_KEY
from generic_trainer.keys import MAX_RESTARTS_KEY, NUM_WORKERS_KEY
from generic_trainer.keys import SOURCE_KEYS, STRATEGY_KEY
from generic_trainer.keys import TF_KERAS
from generic_trainer.plan import distribution
from generic_trainer.plan import keras_env
from generic_trainer.trainspec import spec as spec_lib
from generic_trainer.usercode import module_loader

# A pipeline's resume folders: `resume-<key>`, beside the node's stateful
# working dirs.
RESUME_PREFIX = 'resume-'


def resume_key(inputs: Dict[str, Any], module_file: Optional[str],
               settings: Dict[str, Any]) -> str:
  """A short hash of what defines a training: what identifies its inputs,
  the content of its module file, and its settings. The one resume key:
  a pipeline passes its input artifacts' URIs (`pipeline_resume`), the
  command its files' paths, sizes and modification times (its folders'
  paths never change)."""
  module_hash = ''
  if module_file and os.path.isfile(module_file):
    with open(module_file, 'rb') as f:
      module_hash = hashlib.sha256(f.read()).hexdigest()
  blob = json.dumps({'inputs': inputs, 'module': module_hash,
                     'settings': settings}, sort_keys=True, default=str)
  return hashlib.sha256(blob.encode()).hexdigest()[:16]


@attr.s(frozen=True)
class ResumeAt:
  """What names a training's checkpoint folder, which the plan decides
  (`checkpoint_folder`): the folder's parent and the prefix of its name,
  and what identifies the training (`resume_key`'s inputs and settings;
  the module file is the plan's source).

  Attributes:
    base: The folder resume folders go in.
    prefix: Their names' prefix.
    inputs: What identifies the inputs (JSON-able).
    settings: The settings that change the training (JSON-able).
  """
  base = attr.ib(type=str)
  prefix = attr.ib(type=str)
  inputs = attr.ib(type=Dict[str, Any])
  settings = attr.ib(type=Dict[str, Any])


def checkpoint_folder(resume: ResumeAt, source_key: str,
                      source: Any) -> str:
  """The checkpoint folder of a training: `resume`'s base and prefix, and
  the key of its inputs, its module's content and its settings. Where the
  user code is given by module path or `run_fn`, the module's source file
  is found without importing it (`usercode.module_loader.source_file`)."""
  module = (module_loader.source_file(source_key, source)
            if isinstance(source, str) else None)
  return os.path.join(resume.base, resume.prefix + resume_key(
      resume.inputs, module, resume.settings))


def pipeline_resume(input_dict: Dict[str, List[Any]],
                    exec_properties: Dict[str, Any], model_run_uri: str,
                    stateful_working_dir: Optional[str]) -> ResumeAt:
  """Where a pipeline's training resumes from. Under TFX it sits beside
  the node's stateful working dirs
  (`<node>/.system/stateful_working_dir/resume-<key>`), which TFX neither
  deletes on failure nor shares between nodes; called directly, in the
  ModelRun artifact (stable when a retry reuses the output URIs, as
  Kubeflow's retries do). The key: the input artifacts' URIs, the module's
  content and the execution properties."""
  base = (os.path.dirname(stateful_working_dir.rstrip('/'))
          if stateful_working_dir else model_run_uri)
  inputs = {key: sorted(a.uri for a in artifacts)
            for key, artifacts in sorted(input_dict.items())}
  return ResumeAt(base, RESUME_PREFIX, inputs, dict(exec_properties))


class Where:
  """Where a training runs (`TrainingPlan.where`): the launcher that runs
  it (`launch.launcher`)."""
  HERE = 'here'
  # A child process under the other tf.keras (`keras_version`).
  KERAS_CHILD = 'keras_child'
  # A child process on another Keras backend (a JAX training).
  BACKEND_CHILD = 'backend_child'
  # `num_workers` local processes (`launch.local_cluster`).
  LOCAL_WORKERS = 'local_workers'


@attr.s(frozen=True)
class Names:
  """How an entry point spells a setting in messages, and what it can
  change: the component says `keras_version='x'`, the command
  `--keras-version=x`; the notebook `Estimator` spells like the component
  but trains in its own process, whose Keras is already chosen.

  Attributes:
    entry_point: 'component', 'command' or 'notebook'.
  """
  entry_point = attr.ib(type=str, default='component')

  @property
  def flags(self) -> bool:
    return self.entry_point == 'command'

  def setting(self, key: str) -> str:
    return '--' + key.replace('_', '-') if self.flags else f"'{key}'"

  def value(self, key: str, value: Any) -> str:
    if self.flags:
      return f"--{key.replace('_', '-')}={value}"
    return f'{key}={value!r}'


COMPONENT = Names()
COMMAND = Names('command')
NOTEBOOK = Names('notebook')
_NAMES = {n.entry_point: n for n in (COMPONENT, COMMAND, NOTEBOOK)}


@attr.s(frozen=True)
class TrainingPlan:
  """One training, resolved.

  Attributes:
    source_key: How the user code is given: 'module_file', 'module_path'
      or 'run_fn'.
    source: Its value: a path, a module, or a dotted path.
    entry_name: With `module_file`, the top-level name to train (a function
      or a TrainSpec class; the command's --run-fn); None: its `run_fn` or
      its TrainSpec.
    spec_class: The TrainSpec's class name, once the module is loaded; None
      for a `run_fn` (or not loaded yet).
    backend_setting: The component's `backend` (or --backend), or None.
    backend: The backend it trains on: the setting, else the TrainSpec's;
      None: this process's (TensorFlow unless KERAS_BACKEND says otherwise).
    backend_source: Where the backend was set, as messages name it.
    keras_version: 'keras3', 'tf_keras', or None (whatever the process has).
    role: This process's place in the cluster.
    num_workers: The processes that train together.
    num_workers_setting: The component's `num_workers` (the most of a
      range), or None (for messages: a cluster's TF_CONFIG may have set
      the number).
    min_workers: With a `num_workers` range 'MIN:MAX', MIN: the fewest
      workers a local group restarts with when one cannot come back
      (`launch.restarts`); None: the group keeps its size.
    max_workers: With a range, MAX: the size a shrunk group grows back
      to; None: `num_workers`.
    strategy: The tf.distribute strategy's name.
    where: Where it trains (`Where`); children get `Where.HERE`.
    checkpoint_dir: Where it checkpoints and resumes from; None: no resume.
    max_restarts: Restarts of a local worker group after a worker died.
    entry_point: Which entry point resolved it, for messages (`Names`).
  """
  source_key = attr.ib(type=str)
  source = attr.ib(type=str)
  entry_name = attr.ib(type=Optional[str], default=None)
  spec_class = attr.ib(type=Optional[str], default=None)
  backend_setting = attr.ib(type=Optional[str], default=None)
  backend = attr.ib(type=Optional[str], default=None)
  backend_source = attr.ib(type=str, default='')
  keras_version = attr.ib(type=Optional[str], default=None)
  role = attr.ib(type=distribution.ClusterRole,
                 factory=distribution.ClusterRole)
  num_workers = attr.ib(type=int, default=1)
  num_workers_setting = attr.ib(type=Optional[int], default=None)
  min_workers = attr.ib(type=Optional[int], default=None)
  max_workers = attr.ib(type=Optional[int], default=None)
  strategy = attr.ib(type=str, default='default')
  where = attr.ib(type=str, default=Where.HERE)
  checkpoint_dir = attr.ib(type=Optional[str], default=None)
  max_restarts = attr.ib(type=int, default=0)
  entry_point = attr.ib(type=str, default='component')

  @property
  def wraps_user_errors(self) -> bool:
    """Whether an error raised by the user's code is reported as a
    RunFnError with its traceback (a pipeline's log, the command's
    message) or raised as it is (a notebook shows the traceback itself)."""
    return self.entry_point != NOTEBOOK.entry_point

  def describe_source(self) -> str:
    """'module_file='/m.py'', for messages."""
    return f'{self.source_key}={self.source!r}'

  def child_env(self) -> Dict[str, str]:
    """The environment a child process trains this plan in."""
    return keras_env.child_env(self.keras_version,
                               self.backend or self.backend_setting)

  def in_child(self) -> 'TrainingPlan':
    """This plan for the child process that trains it."""
    return attr.evolve(self, where=Where.HERE)

  def worker_bounds(self) -> Tuple[int, int]:
    """(at least, at most) workers of a local group: the range of
    `num_workers`, or its one value."""
    return (self.min_workers or self.num_workers,
            self.max_workers or self.num_workers)

  def with_workers(self, count: int) -> 'TrainingPlan':
    """This plan for a local group of `count` workers, within
    `worker_bounds` (a shrunk or regrown group: `launch.restarts` decides
    the count, this is where a run's count is set)."""
    low, high = self.worker_bounds()
    if not low <= count <= high:
      raise ValueError(f'{count} workers is outside num_workers '
                       f'{low}:{high}.')
    return attr.evolve(self, num_workers=count, min_workers=low,
                       max_workers=high)

  def for_worker(self, index: int) -> 'TrainingPlan':
    """This plan for local worker `index` of `num_workers` (0: the chief)."""
    return attr.evolve(self, where=Where.HERE, role=distribution.ClusterRole(
        num_workers=self.num_workers, worker_index=index,
        is_chief=index == 0, task_type='worker', task_index=index))

  def to_json(self) -> Dict[str, Any]:
    return attr.asdict(self)

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> 'TrainingPlan':
    return cls(**{**value, 'role': distribution.ClusterRole(**value['role'])})


def check_settings(names: Names = COMPONENT, *,
                   keras_version: Any = None, backend: Any = None,
                   num_workers: Any = None, strategy: Any = None,
                   max_restarts: Any = None, cluster_size: int = 1) -> None:
  """Refuses settings that are wrong on their own or together.

  Raises:
    InvalidArgumentError: naming the setting as `names` spells it.
  """
  check_keras_version(keras_version, names)
  check_backend(backend, names)
  bounds = worker_range(num_workers, names)
  most = bounds[1] if bounds else None
  distribution.check_settings(most, strategy)
  check_max_restarts(max_restarts)
  check_backend_fits(backend, names.value(BACKEND_KEY, backend),
                          keras_version, most, cluster_size, strategy,
                          names)


def from_settings(exec_properties: Dict[str, Any], names: Names = COMPONENT,
                  checkpoint_dir: Optional[str] = None,
                  tf_config: Optional[str] = None,
                  entry_name: Optional[str] = None,
                  resume: Optional[ResumeAt] = None) -> TrainingPlan:
  """The part of the plan the settings and the cluster decide, without
  loading the user module: `resolve`'s first half (see its arguments).

  Raises:
    InvalidArgumentError: the settings are wrong, alone, together, or for
      the cluster TF_CONFIG describes.
  """
  props = exec_properties
  keras_version = props.get(KERAS_VERSION_KEY) or None
  backend = props.get(BACKEND_KEY) or None
  setting = props.get(NUM_WORKERS_KEY)
  role = distribution.role_from_tf_config(tf_config)
  check_settings(names, keras_version=keras_version, backend=backend,
                 num_workers=setting, strategy=props.get(STRATEGY_KEY),
                 max_restarts=props.get(MAX_RESTARTS_KEY),
                 cluster_size=role.num_workers)
  low, num_workers = worker_range(setting) or (None, None)
  # In a cluster that sets TF_CONFIG, a range takes the cluster's size
  # when it lies within it (the cluster, not this process, sizes it).
  fits = low is not None and low <= role.num_workers <= num_workers
  distribution.check_role(role, tf_config,
                          None if tf_config and fits else num_workers,
                          props.get(STRATEGY_KEY), asked=setting)
  key = module_loader.check_one_source(
      **{k: props.get(k) for k in SOURCE_KEYS})
  count = (role.num_workers if tf_config and fits else
           max(num_workers or 1, role.num_workers))
  if checkpoint_dir is None and resume is not None:
    checkpoint_dir = checkpoint_folder(resume, key, props[key])
  return TrainingPlan(
      source_key=key, source=props[key], entry_name=entry_name,
      backend_setting=backend, backend=backend,
      backend_source=names.value(BACKEND_KEY, backend) if backend else '',
      keras_version=keras_version, role=role, num_workers=count,
      num_workers_setting=num_workers,
      min_workers=low if low != num_workers and not tf_config else None,
      max_workers=num_workers if low != num_workers and not tf_config
      else None,
      strategy=distribution.strategy_name(props.get(STRATEGY_KEY), count),
      where=(Where.LOCAL_WORKERS if (num_workers or 1) > 1 and not tf_config
             else Where.HERE),
      checkpoint_dir=checkpoint_dir,
      max_restarts=max_restarts(props.get(MAX_RESTARTS_KEY)),
      entry_point=names.entry_point)


def resolve(exec_properties: Dict[str, Any], names: Names = COMPONENT,
            checkpoint_dir: Optional[str] = None,
            tf_config: Optional[str] = None, entry_name: Optional[str] = None,
            resume: Optional[ResumeAt] = None,
            entry: Optional[Callable[[Any], None]] = None
            ) -> Tuple[TrainingPlan, Optional[Callable[[Any], None]]]:
  """The plan of the training `exec_properties` describe, and its entry
  point when this process loaded it (None: the process that trains loads
  it, see `complete`).

  Args:
    exec_properties: The component's execution properties (the command
      and the notebook build the same).
    names: Which entry point asks (`COMPONENT`, `COMMAND`, `NOTEBOOK`), for
      messages; the notebook's training must run in its own process.
    checkpoint_dir: Where the training checkpoints, when the caller chose
      the folder; else `resume` names it; None and None: no resume.
    tf_config: This process's TF_CONFIG, or None.
    entry_name: With `module_file`, the top-level name to train.
    resume: What names the checkpoint folder (`ResumeAt`): the plan
      decides it (`checkpoint_folder`).
    entry: The entry point, when the caller holds it already (the
      notebook's TrainSpec): no module is loaded.

  Raises:
    InvalidArgumentError, UserModuleError, SpecError: what is wrong, with
      what to do.
  """
  plan = from_settings(exec_properties, names, checkpoint_dir, tf_config,
                       entry_name, resume)
  if names is NOTEBOOK:  # Its model lives in this process: train here.
    return complete(plan, in_child=True, entry=entry)
  if plan.where == Where.LOCAL_WORKERS:
    return plan, None
  if not keras_env.claim_tf_keras(plan.keras_version):
    return attr.evolve(plan, where=Where.KERAS_CHILD), None
  return complete(plan, in_child=False, entry=entry)


def complete(plan: TrainingPlan, in_child: bool = True,
             entry: Optional[Callable[[Any], None]] = None
             ) -> Tuple[TrainingPlan, Callable[[Any], None]]:
  """Loads the entry point (unless `entry` is given) and adds what only it
  tells: the TrainSpec's backend, checked against the settings. In the
  process that must train (a child, a worker, a notebook: `in_child`),
  refuses a process whose Keras is not the plan's.

  Raises:
    UserModuleError, SpecError, InvalidArgumentError: as `resolve`.
    TrainingProcessError: this process cannot give what the plan says.
  """
  if in_child and not keras_env.claim_tf_keras(plan.keras_version):
    raise TrainingProcessError(
        f'The training process was started for {plan.keras_version}, but '
        f'tf.keras there is {keras_env.resolved_tf_keras()}: something '
        'imported TensorFlow with another TF_USE_LEGACY_KERAS first. Check '
        'that the environment does not set it.')
  if entry is None:
    entry = module_loader.load_entry_point(plan.source_key, plan.source,
                                           plan.entry_name)
  spec_class = getattr(entry, 'train_spec', None)
  names = _NAMES[plan.entry_point]
  backend = resolve_backend(plan.backend_setting, spec_class, names)
  source = (f'{spec_class.__name__}.backend={backend!r}'
            if spec_class is not None and not plan.backend_setting else
            plan.backend_source)
  check_backend_fits(backend, source, plan.keras_version,
                     plan.num_workers_setting, plan.role.num_workers,
                     plan.strategy, names)
  plan = attr.evolve(plan, backend=backend, backend_source=source,
                     spec_class=spec_class.__name__ if spec_class else None)
  if keras_env.has_backend(backend):
    return attr.evolve(plan, where=Where.HERE), entry
  if not in_child:
    return attr.evolve(plan, where=Where.BACKEND_CHILD), entry
  running = keras_env.process_backend()
  if names is NOTEBOOK:
    raise spec_lib.backend_refusal(plan.spec_class, backend, running)
  if plan.backend_setting:
    why = ('something imported Keras first with another KERAS_BACKEND. '
           'Check that the module does not set it.')
  else:
    setting = names.value(BACKEND_KEY, backend)
    why = (f'{plan.spec_class}.backend is read only here, in a process '
           f'started on {running} for '
           f'{names.value(KERAS_VERSION_KEY, plan.keras_version)}. Set '
           f'{setting} (on the component, or as a flag of the command), so '
           'that the process starts on it.')
  raise TrainingProcessError(
      f'The training asks for the {backend} backend, but Keras in this '
      f'training process runs on {running}: {why}')


# The checks of single settings, shared by the component (at pipeline
# construction), the command (on its flags) and `resolve` (at run time,
# where a compiled pipeline or another orchestrator may hand over anything).
# For several devices of one machine on JAX (tested in
# tests/test_jax_backend.py): Keras's own data parallelism.
_JAX_DEVICES_HINT = (
    'for several devices of one machine, call keras.distribution.'
    'set_distribution(keras.distribution.DataParallel()) at the start of '
    'build_model')


def check_keras_version(keras_version: Optional[str],
                        names: Names = COMPONENT) -> None:
  """`names` spells the setting as the entry point does."""
  if keras_version is not None and keras_version not in KERAS_VERSIONS:
    setting = names.setting(KERAS_VERSION_KEY)
    value = names.value(KERAS_VERSION_KEY, keras_version)
    raise InvalidArgumentError(
        f'{setting} must be one of {", ".join(KERAS_VERSIONS)}, or unset '
        f'(whatever tf.keras is in the process). Received: {value}. Use '
        f'{TF_KERAS} for module files written for tf.keras 2, {KERAS3} for '
        'Keras 3.')


def check_backend(backend: Optional[str], names: Names = COMPONENT) -> None:
  if backend is not None and backend not in BACKENDS:
    setting = names.setting(BACKEND_KEY)
    value = names.value(BACKEND_KEY, backend)
    raise InvalidArgumentError(
        f'{setting} must be one of {", ".join(BACKENDS)}, or unset (the '
        f"TrainSpec's own backend, else TensorFlow). Received: {value}. "
        "Leave it out to train on the TrainSpec's backend, or set one of "
        'those.')


def resolve_backend(setting: Optional[str], spec_class: Optional[type],
                    names: Names = COMPONENT) -> Optional[str]:
  """The backend a training runs on: the component's `backend` (or the
  command's --backend), else the TrainSpec's `backend`, else None (this
  process's Keras backend: TensorFlow unless KERAS_BACKEND says otherwise).
  `plan.plan` is its one caller.

  Raises:
    SpecError: the TrainSpec's `backend` is not one of BACKENDS.
    InvalidArgumentError: the setting and the TrainSpec's `backend` differ.
  """
  spec_backend = getattr(spec_class, 'backend', None)
  if spec_backend is not None and spec_backend not in BACKENDS:
    raise SpecError(
        f'TrainSpec.backend must be one of {BACKENDS} or None (TensorFlow '
        f'unless the component says otherwise). Received: '
        f'{spec_class.__name__}.backend={spec_backend!r}. Set backend to one '
        'of those, or remove it.')
  if setting and spec_backend and setting != spec_backend:
    value = names.value(BACKEND_KEY, setting)
    raise InvalidArgumentError(
        f"The component's backend and the TrainSpec's disagree. Expected "
        f'one of them, or the same backend in both. Received: {value}, '
        f'{spec_class.__name__}.backend={spec_backend!r}. Remove backend '
        'from the component (or --backend), or change the TrainSpec.')
  return setting or spec_backend


def check_backend_fits(backend: Optional[str], source: str,
                       keras_version: Optional[str] = None,
                       num_workers: Optional[int] = None,
                       cluster_size: int = 1,
                       strategy: Optional[str] = None,
                       names: Names = COMPONENT) -> None:
  """Refuses what cannot train on JAX: tf.keras 2, several workers, a
  tf.distribute strategy. Nothing to refuse on another backend.

  Args:
    backend: The backend the training runs on.
    source: Where it was set, for the message: "backend='jax'" or
      "PenguinSpec.backend='jax'".
    keras_version: The component's `keras_version`.
    num_workers: The component's `num_workers`.
    cluster_size: The processes of this process's TF_CONFIG cluster (1
      without one).
    strategy: The component's `strategy`.
    names: How the entry point spells its settings (a `plan.Names`).

  Raises:
    InvalidArgumentError: saying why and what to do.
  """
  if backend != JAX_BACKEND:
    return
  if keras_version == TF_KERAS:
    setting = names.setting(KERAS_VERSION_KEY)
    value = names.value(KERAS_VERSION_KEY, keras_version)
    on_tf = names.value(BACKEND_KEY, 'tensorflow')
    raise InvalidArgumentError(
        f'{source} trains with Keras 3 on JAX, but {value} asks for tf.keras '
        f'2, which runs on TensorFlow only. Expected Keras 3 on JAX. '
        f'Received: {source}, {value}. '
        f'Leave {setting} unset (or {KERAS3}) to train on JAX, or train on '
        f'TensorFlow ({on_tf}).')
  workers = max(num_workers or 1, cluster_size)
  if workers > 1:
    what = (f'num_workers={num_workers}' if (num_workers or 1) > 1 else
            f'a TF_CONFIG cluster of {cluster_size}')
    raise InvalidArgumentError(
        f'{source} cannot train with {workers} workers: GenericTrainer\'s '
        'workers train together through tf.distribute\'s '
        "MultiWorkerMirroredStrategy, which Keras's JAX trainer ignores, so "
        'each worker would train alone on its share of the data, without a '
        f'word. Expected one process on JAX. Received: {source}, {what}. '
        'Train on JAX in one process '
        f'({_JAX_DEVICES_HINT}), or with several workers on TensorFlow '
        "(backend='tensorflow').")
  if strategy not in (None, DEFAULT_STRATEGY):
    raise InvalidArgumentError(
        f'{source} cannot train under strategy={strategy!r}: that is a '
        "tf.distribute strategy, which Keras's JAX trainer ignores (the "
        f'model would train on one device). Expected no strategy on JAX. '
        f'Received: {source}, '
        f"strategy={strategy!r}. Leave strategy unset on JAX "
        f"({_JAX_DEVICES_HINT}), or use backend='tensorflow'.")


def check_flag(name: str, value: Any) -> None:
  """A True/False setting, or None."""
  if value is not None and not isinstance(value, bool):
    raise InvalidArgumentError(
        f"'{name}' must be True, False or None. Received: {name}={value!r} "
        f'that is a {type(value).__name__}. Pass True or False.')


def check_num_steps(name: str, num_steps: int) -> None:
  if num_steps < 0:
    raise InvalidArgumentError(
        f"'{name}.num_steps' must be positive, or unset to read the split "
        f'once. Received: num_steps={num_steps}. Set a positive number, or '
        'leave it unset.')


def check_custom_config(custom_config: Any) -> None:
  if custom_config is not None and not isinstance(custom_config, dict):
    raise InvalidArgumentError(
        "'custom_config' must be a dict. Received: custom_config that is a "
        f'{type(custom_config).__name__}. Pass a dict, e.g. '
        "custom_config={'epochs': 5}.")


def max_restarts(value: Optional[int]) -> int:
  """The restarts a local worker group gets: the setting, else the
  default."""
  return DEFAULT_MAX_RESTARTS if value is None else value


def check_max_restarts(max_restarts: Any) -> None:
  if max_restarts is not None and (
      isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or
      max_restarts < 0):
    raise InvalidArgumentError(
        "'max_restarts' must be a non-negative int: how many times a "
        'multi-worker training restarts its workers from the last checkpoint '
        'after one died (0: the execution fails at the first death; None: '
        f'{DEFAULT_MAX_RESTARTS}). Received: max_restarts={max_restarts!r}. '
        'Set 0 or more, or leave it unset.')


def worker_range(num_workers: Any, names: Names = COMPONENT
                 ) -> Optional[Tuple[int, int]]:
  """(at least, at most) of a `num_workers` setting: an int N is (N, N), a
  range 'MIN:MAX' (or a (MIN, MAX) pair) lets a local group shrink to MIN
  workers when one cannot come back, and grow back to MAX; None: unset.

  Raises:
    InvalidArgumentError: not a positive int nor such a range (row 260).
  """
  if num_workers is None:
    return None
  value = num_workers
  if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
    return value, value
  pair = None
  if isinstance(value, str) and value.count(':') == 1:
    pair = value.split(':')
  elif isinstance(value, (tuple, list)) and len(value) == 2:
    pair = list(value)
  try:
    low, high = (int(v) for v in pair) if pair else (0, 0)
    ok = pair is not None and not any(isinstance(v, (bool, float))
                                      for v in pair)
  except (TypeError, ValueError):
    ok = False
  if ok and 1 <= low <= high:
    return low, high
  setting = names.setting(NUM_WORKERS_KEY)
  shown = names.value(NUM_WORKERS_KEY, num_workers)
  raise InvalidArgumentError(
      f'{setting} must be a positive int (the processes that train '
      'together) or a range MIN:MAX of them (a local group restarts with '
      'fewer workers, down to MIN, when one cannot come back, and grows '
      'back to MAX). Expected e.g. 2 or "2:3", with 1 <= MIN <= MAX. '
      f'Received: {shown}. Set a positive int, a range such as "2:3", or '
      'leave it unset.')


def worker_range_text(bounds: Tuple[int, int]) -> Any:
  """The setting `worker_range` reads back as `bounds`: N, or 'MIN:MAX'."""
  low, high = bounds
  return low if low == high else f'{low}:{high}'

