"""TrainingPlan: what a training is, decided once and carried everywhere.

Every entry point (the component at construction, the executor, the
`generic-trainer` command, the notebook `Estimator`) reaches a training
through `resolve`, whose steps are listed in order, as Lightning's
accelerator connector lists its own; each step is a `_check_*` or
`_choose_*` function, or a function of `settings`, beside the fact it
decides:

  1. the entry point: how it spells the settings and what it may do
     (`entry_points.EntryPoint`, which the plan carries);
  2. the settings, alone and together (`settings.check_settings`);
  3. the user's code: which of module_file, module_path, run_fn
     (`_choose_source`);
  4. workers and role: where this process trains (`cluster`'s
     environment, found by `launch.cluster_environment.detect` and given
     by the caller), how many processes train together and who starts them:
     this process (a local group), a job a Kubeflow step launches, or a
     cluster outside (`_choose_workers`);
  5. the strategy (`settings.choose_strategy`);
  6. resume: the checkpoint folder (`_choose_checkpoint_dir`);
  7. Keras and backend: which process trains a single-process training
     (`_choose_process`): here, or a child process. The user module is
     loaded when this process is the one that trains it (not for local
     workers or a step's job, nor under the other tf.keras: their
     processes load it, through `complete`).

`complete` adds what only the loaded module tells (a TrainSpec's own
backend) in the process that trains, and refuses a process that cannot
give what the plan says. Child processes receive the plan (`to_json`) and
never decide again.
"""

from typing import Any, Callable, Dict, Optional, Tuple

import attr

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import TrainingProcessError
from generic_trainer.keys import BACKEND_KEY, KERAS_VERSION_KEY
from generic_trainer.keys import MAX_RESTARTS_KEY, NUM_WORKERS_KEY
from generic_trainer.keys import SOURCE_KEYS, STRATEGY_KEY
from generic_trainer.plan import cluster as cluster_lib
from generic_trainer.plan import resume_folder
from generic_trainer.plan.cluster import Alone, ClusterEnvironment
from generic_trainer.plan.cluster import ClusterRole, LocalGroup
from generic_trainer.plan import settings
from generic_trainer.plan.entry_points import COMPONENT, EntryPoint
from generic_trainer.system import keras_env
from generic_trainer.trainspec import spec as spec_lib
from generic_trainer.usercode import module_loader


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
  # The pods of a job a Kubeflow step launches (`kubeflow.step_job`): the
  # job's chief runs the attempt and publishes; the step takes its model.
  KUBEFLOW_JOB = 'kubeflow_job'


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
    cluster: Where this process trains (`cluster.ClusterEnvironment`,
      found by `launch.cluster_environment.detect`): its role, what its
      members share, whether it created its processes.
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
    entry_point: The entry point that resolved it (`EntryPoint`): its
      spelling of the settings and its rules.
  """
  source_key = attr.ib(type=str)
  source = attr.ib(type=str)
  entry_name = attr.ib(type=Optional[str], default=None)
  spec_class = attr.ib(type=Optional[str], default=None)
  backend_setting = attr.ib(type=Optional[str], default=None)
  backend = attr.ib(type=Optional[str], default=None)
  backend_source = attr.ib(type=str, default='')
  keras_version = attr.ib(type=Optional[str], default=None)
  cluster = attr.ib(type=ClusterEnvironment, factory=Alone)
  num_workers = attr.ib(type=int, default=1)
  num_workers_setting = attr.ib(type=Optional[int], default=None)
  min_workers = attr.ib(type=Optional[int], default=None)
  max_workers = attr.ib(type=Optional[int], default=None)
  strategy = attr.ib(type=str, default='default')
  where = attr.ib(type=str, default=Where.HERE)
  checkpoint_dir = attr.ib(type=Optional[str], default=None)
  max_restarts = attr.ib(type=int, default=0)
  entry_point = attr.ib(type=EntryPoint, default=COMPONENT)

  @property
  def role(self) -> ClusterRole:
    """This process's place in its cluster (`cluster.role()`)."""
    return self.cluster.role()

  @property
  def wraps_user_errors(self) -> bool:
    """Whether an error raised by the user's code is reported as a
    RunFnError with its traceback (`EntryPoint.wraps_user_errors`)."""
    return self.entry_point.wraps_user_errors

  def describe_source(self) -> str:
    """'module_file='/m.py'', for messages."""
    return f'{self.source_key}={self.source!r}'

  def child_env(self) -> Dict[str, str]:
    """The environment a child process trains this plan in.

    Without a `keras_version`, the child gets the tf.keras this process
    has (`keras_env.resolved_tf_keras`, once decided), not the
    TF_USE_LEGACY_KERAS it would inherit: importing TensorFlow Transform
    (which `import tfx.v1` does) sets that to 1 when unset, also after
    tf.keras here came to mean Keras 3; so what was imported first holds
    in every process of the training.
    """
    keras_version = self.keras_version or keras_env.resolved_tf_keras()
    return keras_env.child_env(keras_version,
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
      raise InvalidArgumentError(
          f'{count} workers is outside num_workers {low}:{high}. Expected a '
          f'count from {low} to {high}. Received: count={count}. Pass a count '
          'inside the range num_workers gives.')
    return attr.evolve(self, num_workers=count, min_workers=low,
                       max_workers=high)

  def for_member(self, member: LocalGroup) -> 'TrainingPlan':
    """This plan for `member` of the local group it starts (the group
    gives the member its role and its TF_CONFIG)."""
    return attr.evolve(self, where=Where.HERE, cluster=member)

  def to_json(self) -> Dict[str, Any]:
    return {**attr.asdict(self, recurse=False),
            'cluster': self.cluster.to_json(),
            'entry_point': attr.asdict(self.entry_point)}

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> 'TrainingPlan':
    return cls(**{**value, 'cluster': cluster_lib.from_json(value['cluster']),
                  'entry_point': EntryPoint(**value['entry_point'])})


def resolve(exec_properties: Dict[str, Any],
            entry_point: EntryPoint = COMPONENT,
            cluster: Optional[ClusterEnvironment] = None,
            checkpoint_dir: Optional[str] = None,
            entry_name: Optional[str] = None,
            resume: Optional[resume_folder.ResumeAt] = None,
            entry: Optional[Callable[[Any], None]] = None
            ) -> Tuple[TrainingPlan, Optional[Callable[[Any], None]]]:
  """The plan of the training `exec_properties` describe, and its entry
  point when this process loaded it (None: the process that trains loads
  it, see `complete`): steps 1 to 6 (`from_settings`), then step 7.

  Args:
    exec_properties: The component's execution properties (the command
      and the notebook build the same).
    entry_point: Which entry point asks (`entry_points.COMPONENT`,
      `COMMAND`, `NOTEBOOK`): its spelling and its rules.
    cluster: Where this process trains (`cluster.ClusterEnvironment`,
      found by `launch.cluster_environment.detect`); None: alone.
    checkpoint_dir: Where the training checkpoints, when the caller chose
      the folder; else `resume` names it; None and None: no resume.
    entry_name: With `module_file`, the top-level name to train.
    resume: What names the checkpoint folder (`resume_folder.ResumeAt`).
    entry: The entry point, when the caller holds it already (the
      notebook's TrainSpec): no module is loaded.

  Raises:
    InvalidArgumentError, UserModuleError, SpecError: what is wrong, with
      what to do.
  """
  plan = from_settings(exec_properties, entry_point, cluster, checkpoint_dir,
                       entry_name, resume)
  # 7. Keras and backend: which process trains a single-process training.
  return _choose_process(plan, entry)


def from_settings(exec_properties: Dict[str, Any],
                  entry_point: EntryPoint = COMPONENT,
                  cluster: Optional[ClusterEnvironment] = None,
                  checkpoint_dir: Optional[str] = None,
                  entry_name: Optional[str] = None,
                  resume: Optional[resume_folder.ResumeAt] = None
                  ) -> TrainingPlan:
  """Steps 1 to 6 of the plan: what the settings and the cluster decide,
  without loading the user module (`resolve`'s arguments).

  Raises:
    InvalidArgumentError: the settings are wrong, alone, together, or for
      the cluster this process is a member of.
  """
  props = exec_properties
  cluster = cluster or Alone()
  # 1. The entry point: `entry_point`, carried by the plan.
  # 2. The settings, alone and together.
  _check_settings(props, entry_point, cluster)
  # 3. The user's code.
  source_key = _choose_source(props)
  # 4. Workers and role: how many processes, and who starts them.
  workers = _choose_workers(props.get(NUM_WORKERS_KEY), cluster,
                            props.get(STRATEGY_KEY))
  # 5. The strategy.
  strategy = settings.choose_strategy(props.get(STRATEGY_KEY), workers.count)
  # 6. Resume.
  checkpoint_dir = _choose_checkpoint_dir(checkpoint_dir, resume, source_key,
                                          props[source_key])
  backend = props.get(BACKEND_KEY) or None
  return TrainingPlan(
      source_key=source_key, source=props[source_key], entry_name=entry_name,
      backend_setting=backend, backend=backend,
      backend_source=entry_point.value(BACKEND_KEY, backend) if backend
      else '',
      keras_version=props.get(KERAS_VERSION_KEY) or None, cluster=cluster,
      num_workers=workers.count, num_workers_setting=workers.setting,
      min_workers=workers.least, max_workers=workers.most,
      strategy=strategy, where=workers.where, checkpoint_dir=checkpoint_dir,
      max_restarts=settings.restarts(props.get(MAX_RESTARTS_KEY)),
      entry_point=entry_point)


def _check_settings(props: Dict[str, Any], entry_point: EntryPoint,
                    cluster: ClusterEnvironment) -> None:
  """Step 2: the settings alone and together (`settings.check_settings`,
  the one check the component and the command call too)."""
  settings.check_settings(
      entry_point, keras_version=props.get(KERAS_VERSION_KEY) or None,
      backend=props.get(BACKEND_KEY) or None,
      num_workers=props.get(NUM_WORKERS_KEY),
      strategy=props.get(STRATEGY_KEY),
      max_restarts=props.get(MAX_RESTARTS_KEY),
      cluster_size=cluster.role().num_workers)


def _choose_source(exec_properties: Dict[str, Any]) -> str:
  """Step 3: which setting gives the user's code (exactly one of
  `keys.SOURCE_KEYS`)."""
  return module_loader.check_one_source(
      **{key: exec_properties.get(key) for key in SOURCE_KEYS})


@attr.s(frozen=True)
class _Workers:
  """Step 4's decision: how many processes train together, and who starts
  them.

  Attributes:
    count: The processes of the group.
    setting: The most of the `num_workers` setting, or None (unset).
    least: A local group's MIN, when it may shrink; else None.
    most: A local group's MAX, when it may shrink; else None.
    where: Who starts them (`Where`): `LOCAL_WORKERS` (this process),
      `KUBEFLOW_JOB` (a job this step launches), or `HERE` (one process,
      or a cluster outside that started them); step 7 may move a `HERE`
      into a child process.
  """
  count = attr.ib(type=int)
  setting = attr.ib(type=Optional[int])
  least = attr.ib(type=Optional[int], default=None)
  most = attr.ib(type=Optional[int], default=None)
  where = attr.ib(type=str, default=Where.HERE)


def _choose_workers(setting: Any, cluster: ClusterEnvironment,
                    strategy: Optional[str]) -> _Workers:
  """Step 4: a cluster outside this process sizes the group (its
  `num_workers` must hold that size); a Kubeflow step compiled to launch a
  job runs it at the setting's most workers;
  alone, `num_workers` processes are started here, a range letting the
  group shrink and grow back."""
  bounds = settings.worker_range(setting)
  most = bounds[1] if bounds else None
  outside = cluster.creates_processes_externally
  settings.check_cluster_fits(cluster.role().num_workers, cluster.tf_config,
                              bounds if outside else None, setting, strategy)
  if outside:
    return _Workers(cluster.role().num_workers, most)
  low, high = bounds or (1, 1)
  if cluster.launches_job and high > 1:
    return _Workers(high, most, where=Where.KUBEFLOW_JOB)
  ranged = low != high
  return _Workers(high, most, least=low if ranged else None,
                  most=high if ranged else None,
                  where=Where.LOCAL_WORKERS if high > 1 else Where.HERE)


def _choose_checkpoint_dir(given: Optional[str],
                           resume: Optional[resume_folder.ResumeAt],
                           source_key: str, source: Any) -> Optional[str]:
  """Step 6: the folder the caller chose, else the one `resume` names
  (`resume_folder.checkpoint_folder`), else None (no resume)."""
  if given is not None or resume is None:
    return given
  return resume_folder.checkpoint_folder(resume, source_key, source)


def _choose_process(plan: TrainingPlan,
                    entry: Optional[Callable[[Any], None]]
                    ) -> Tuple[TrainingPlan, Optional[Callable[[Any], None]]]:
  """Step 7: a training the caller's process must run is completed here
  (refused when this process cannot); the processes step 4 starts (a
  local group's workers, a Kubeflow step's job) load the module
  themselves, and so does a child under the other tf.keras; otherwise
  the module is loaded here, and its backend decides between here and a
  child (`complete`)."""
  if plan.entry_point.trains_in_caller:
    return complete(plan, in_child=True, entry=entry)
  if plan.where != Where.HERE:
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
  if in_child:
    _check_process_keras(plan)
  if entry is None:
    entry = module_loader.load_entry_point(plan.source_key, plan.source,
                                           plan.entry_name)
  spec_class = getattr(entry, 'train_spec', None)
  names = plan.entry_point
  backend = settings.choose_backend(plan.backend_setting, spec_class, names)
  source = (f'{spec_class.__name__}.backend={backend!r}'
            if spec_class is not None and not plan.backend_setting else
            plan.backend_source)
  settings.check_backend_fits(backend, source, plan.keras_version,
                              plan.num_workers_setting,
                              plan.role.num_workers, plan.strategy, names)
  plan = attr.evolve(plan, backend=backend, backend_source=source,
                     spec_class=spec_class.__name__ if spec_class else None)
  if keras_env.has_backend(backend):
    return attr.evolve(plan, where=Where.HERE), entry
  if not in_child:
    return attr.evolve(plan, where=Where.BACKEND_CHILD), entry
  raise _backend_refusal(plan, backend)


def _check_process_keras(plan: TrainingPlan) -> None:
  """Refuses a training process whose tf.keras is not the plan's."""
  if not keras_env.claim_tf_keras(plan.keras_version):
    raise TrainingProcessError(
        f'The training process was started for {plan.keras_version}, but '
        f'tf.keras there is {keras_env.resolved_tf_keras()}: something '
        'imported TensorFlow with another TF_USE_LEGACY_KERAS first. Check '
        'that the environment does not set it.')


def _backend_refusal(plan: TrainingPlan, backend: str) -> Exception:
  """The error of a training process whose Keras backend is not
  `backend`: why it is not, and what to set."""
  running = keras_env.process_backend()
  names = plan.entry_point
  if names.trains_in_caller:
    return spec_lib.backend_refusal(plan.spec_class, backend, running)
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
  return TrainingProcessError(
      f'The training asks for the {backend} backend, but Keras in this '
      f'training process runs on {running}: {why}')
