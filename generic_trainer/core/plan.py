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

from typing import Any, Callable, Dict, Optional, Tuple

import attr

from generic_trainer.core import args
from generic_trainer.core import distribution
from generic_trainer.core import keras_env
from generic_trainer.core import module_loader
from generic_trainer.errors import TrainingProcessError
from generic_trainer.keys import BACKEND_KEY, KERAS_VERSION_KEY
from generic_trainer.keys import MAX_RESTARTS_KEY, NUM_WORKERS_KEY
from generic_trainer.keys import SOURCE_KEYS, STRATEGY_KEY


class Where:
  """Where a training runs (`TrainingPlan.where`)."""
  HERE = 'here'
  # A child process under the other tf.keras (`keras_version`).
  KERAS_CHILD = 'keras_child'
  # A child process on another Keras backend (a JAX training).
  BACKEND_CHILD = 'backend_child'
  # `num_workers` local processes (`launch.local_cluster`).
  LOCAL_WORKERS = 'local_workers'


@attr.s(frozen=True)
class Names:
  """How an entry point spells a setting in messages: the component says
  `keras_version='x'`, the command `--keras-version=x`."""
  flags = attr.ib(type=bool, default=False)

  def setting(self, key: str) -> str:
    return '--' + key.replace('_', '-') if self.flags else f"'{key}'"

  def value(self, key: str, value: Any) -> str:
    if self.flags:
      return f"--{key.replace('_', '-')}={value}"
    return f'{key}={value!r}'


COMPONENT = Names()
COMMAND = Names(flags=True)


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
    flags: Whether messages name settings as the command's flags.
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
  flags = attr.ib(type=bool, default=False)

  def describe_source(self) -> str:
    """'module_file='/m.py'', for messages."""
    return f'{self.source_key}={self.source!r}'

  def child_env(self) -> Dict[str, str]:
    """The environment a child process trains this plan in."""
    return keras_env.child_env(self.keras_version,
                               self.backend or self.backend_setting)

  def with_checkpoint_dir(self, path: Optional[str]) -> 'TrainingPlan':
    """This plan, checkpointing in `path` (the resume key needs the source
    file the plan found: `resume.checkpoint_dir`)."""
    return attr.evolve(self, checkpoint_dir=path)

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
  args.check_keras_version(keras_version, names)
  args.check_backend(backend, names)
  bounds = args.worker_range(num_workers, names)
  most = bounds[1] if bounds else None
  distribution.check_settings(most, strategy)
  args.check_max_restarts(max_restarts)
  args.check_backend_fits(backend, names.value(BACKEND_KEY, backend),
                          keras_version, most, cluster_size, strategy,
                          names)


def from_settings(exec_properties: Dict[str, Any], names: Names = COMPONENT,
                  checkpoint_dir: Optional[str] = None,
                  tf_config: Optional[str] = None,
                  entry_name: Optional[str] = None) -> TrainingPlan:
  """The part of the plan the settings and the cluster decide, without
  loading the user module: `resolve`'s first half.

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
  low, num_workers = args.worker_range(setting) or (None, None)
  # In a cluster that sets TF_CONFIG, a range takes the cluster's size
  # when it lies within it (the cluster, not this process, sizes it).
  fits = low is not None and low <= role.num_workers <= num_workers
  distribution.check_role(role, tf_config,
                          None if tf_config and fits else num_workers,
                          props.get(STRATEGY_KEY), asked=setting)
  key = args.check_one_source(**{k: props.get(k) for k in SOURCE_KEYS})
  count = (role.num_workers if tf_config and fits else
           max(num_workers or 1, role.num_workers))
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
      max_restarts=args.max_restarts(props.get(MAX_RESTARTS_KEY)),
      flags=names.flags)


def resolve(exec_properties: Dict[str, Any], names: Names = COMPONENT,
            checkpoint_dir: Optional[str] = None,
            tf_config: Optional[str] = None, entry_name: Optional[str] = None
            ) -> Tuple[TrainingPlan, Optional[Callable[[Any], None]]]:
  """The plan of the training `exec_properties` describe, and its entry
  point when this process loaded it (None: the process that trains loads
  it, see `complete`).

  Args:
    exec_properties: The component's execution properties (the command
      builds the same).
    names: How messages name the settings.
    checkpoint_dir: Where the training checkpoints; None: no resume.
    tf_config: This process's TF_CONFIG, or None.
    entry_name: With `module_file`, the top-level name to train.

  Raises:
    InvalidArgumentError, UserModuleError, SpecError: what is wrong, with
      what to do.
  """
  plan = from_settings(exec_properties, names, checkpoint_dir, tf_config,
                       entry_name)
  if plan.where == Where.LOCAL_WORKERS:
    return plan, None
  if not keras_env.claim_tf_keras(plan.keras_version):
    return attr.evolve(plan, where=Where.KERAS_CHILD), None
  return complete(plan, in_child=False)


def complete(plan: TrainingPlan, in_child: bool = True
             ) -> Tuple[TrainingPlan, Callable[[Any], None]]:
  """Loads the entry point and adds what only it tells: the TrainSpec's
  backend, checked against the settings. In the process that trains (a
  child, a worker: `in_child`), refuses a process whose Keras is not the
  plan's.

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
  entry = module_loader.load_entry_point(plan.source_key, plan.source,
                                         plan.entry_name)
  spec_class = getattr(entry, 'train_spec', None)
  names = COMMAND if plan.flags else COMPONENT
  backend = args.resolve_backend(plan.backend_setting, spec_class, names)
  source = (f'{spec_class.__name__}.backend={backend!r}'
            if spec_class is not None and not plan.backend_setting else
            plan.backend_source)
  args.check_backend_fits(backend, source, plan.keras_version,
                          plan.num_workers_setting, plan.role.num_workers,
                          plan.strategy, names)
  plan = attr.evolve(plan, backend=backend, backend_source=source,
                     spec_class=spec_class.__name__ if spec_class else None)
  if keras_env.has_backend(backend):
    return attr.evolve(plan, where=Where.HERE), entry
  if not in_child:
    return attr.evolve(plan, where=Where.BACKEND_CHILD), entry
  running = keras_env.process_backend()
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
