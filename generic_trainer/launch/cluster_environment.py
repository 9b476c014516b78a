"""Which cluster this process trains in: one class per environment.

As Lightning's cluster environments (`lightning/fabric/plugins/
environments/`), each class knows how to detect itself from the process's
environment, this process's place in it (`role`, a `plan.plan.ClusterRole`)
and what its processes need set while they train (`environ`: TF_CONFIG,
the stop file its members share). Nobody else reads a scheduler's
variables.

    Alone       no TF_CONFIG and no JobSet: this process trains alone, or
                starts a local group (the plan decides, from num_workers)
    LocalGroup  a worker of a group this machine started
                (`launch.local_cluster`): TF_CONFIG on loopback ports, the
                stop file in the group's scratch folder. Not detected: the
                parent writes each worker's environment and plan
    TFConfig    TF_CONFIG as the Kubeflow Training Operator (TFJob) or
                Vertex AI sets it
    JobSet      a pod of a JobSet (Kubeflow Trainer v2's TrainJob) with no
                TF_CONFIG: the one the Training Operator would set is built
                from the JobSet's names and indexes and its pods' stable
                host names

`detect(environ)` returns the first that detects itself, in that order:
a TF_CONFIG wins over a JobSet's variables. The chief is the task of type
'chief', or worker 0 when there is none (the convention of
MultiWorkerMirroredStrategy and of TFX's unused `_is_chief`).

The members of a TF_CONFIG or JobSet cluster share the stop file a local
group shares (`loop.handlers.preemption_stop`), in the resume checkpoint's
folder, which every member reaches (it resumes from it): a member that
gets SIGTERM asks the chief for a stop there, the chief writes the step,
and every member stops at it, saved.
"""

import contextlib
import json
import os
from typing import Dict, Iterator, List, Mapping, Optional

from absl import logging

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import JOBSET_DEFAULT_PORT
from generic_trainer.keys import JOBSET_JOB_INDEX_ENV
from generic_trainer.keys import JOBSET_NAME_ENV
from generic_trainer.keys import JOBSET_NUM_NODES_ENV
from generic_trainer.keys import JOBSET_POD_INDEX_ENV
from generic_trainer.keys import JOBSET_PORT_ENV
from generic_trainer.keys import JOBSET_REPLICATED_JOB_ENV
from generic_trainer.keys import JOBSET_REQUIRED_ENV
from generic_trainer.keys import JOBSET_SUBDOMAIN_ENV
from generic_trainer.keys import STOP_FILE_ENV
from generic_trainer.keys import TF_CONFIG_ENV
from generic_trainer.loop.handlers.preemption_stop import request_file
from generic_trainer.plan.plan import ALONE, LOCAL_GROUP, ClusterRole
from generic_trainer.plan.plan import TrainingPlan

# The file through which a group's chief tells its members the step to
# stop at after a SIGTERM (`keys.STOP_FILE_ENV` names it to them).
STOP_FILE_NAME = 'stop-step'
_TRAINING_TASK_TYPES = ('chief', 'worker')


class ClusterEnvironment:
  """One kind of cluster: how it is detected, the role it gives this
  process, and what its processes need set while they train."""

  name = ''

  @staticmethod
  def detect(environ: Mapping[str, str]) -> bool:
    """Whether `environ` is this environment's."""
    raise NotImplementedError

  def role(self) -> ClusterRole:
    """This process's place in the cluster."""
    raise NotImplementedError

  def environ(self, plan: TrainingPlan) -> Dict[str, str]:  # pylint: disable=unused-argument
    """The environment variables a training of `plan` needs set in this
    process (and so in its children) while it trains."""
    return {}


class Alone(ClusterEnvironment):
  """No cluster: one process, or a local group this process starts."""

  name = ALONE

  @staticmethod
  def detect(environ: Mapping[str, str]) -> bool:
    return True

  def role(self) -> ClusterRole:
    return ClusterRole()


class LocalGroup(ClusterEnvironment):
  """The workers `launch.local_cluster` starts on this machine: a cluster
  of 'worker' tasks on loopback `ports`, worker 0 the chief, sharing the
  stop file in the group's scratch folder `root`."""

  name = LOCAL_GROUP

  def __init__(self, ports: List[int], root: str):
    self.ports = ports
    self.root = root

  @staticmethod
  def detect(environ: Mapping[str, str]) -> bool:
    return False  # Its workers receive their plan: nothing to detect.

  def tf_config(self, index: int) -> str:
    """TF_CONFIG of worker `index`."""
    return json.dumps({
        'cluster': {'worker': [f'localhost:{p}' for p in self.ports]},
        'task': {'type': 'worker', 'index': index}})

  def worker_environ(self, index: int) -> Dict[str, str]:
    """The environment worker `index` starts with."""
    return {TF_CONFIG_ENV: self.tf_config(index),
            STOP_FILE_ENV: os.path.join(self.root, STOP_FILE_NAME)}


class TFConfig(ClusterEnvironment):
  """A cluster that sets TF_CONFIG: a TFJob's replicas, Vertex AI's."""

  name = 'tf_config'

  def __init__(self, tf_config: str):
    self.tf_config = tf_config

  @staticmethod
  def detect(environ: Mapping[str, str]) -> bool:
    return bool(environ.get(TF_CONFIG_ENV))

  @classmethod
  def from_environ(cls, environ: Mapping[str, str]) -> 'TFConfig':
    return cls(environ[TF_CONFIG_ENV])

  def role(self) -> ClusterRole:
    return role_from_tf_config(self.tf_config, self.name)

  def environ(self, plan: TrainingPlan) -> Dict[str, str]:
    found = {TF_CONFIG_ENV: self.tf_config}
    if plan.num_workers > 1 and plan.checkpoint_dir:
      found[STOP_FILE_ENV] = os.path.join(plan.checkpoint_dir,
                                          STOP_FILE_NAME)
    return found


class JobSet(TFConfig):
  """A pod of a JobSet (Kubeflow Trainer v2) with no TF_CONFIG: the
  TrainingRuntime `kubeflow.trainjob` writes gives it its JobSet, its
  replicated job, its job index and its pod index (`keys.
  JOBSET_REQUIRED_ENV`, with the node count), and every pod's host name
  follows from them: `<jobset>-<replicated job>-<job index>-<pod
  index>.<subdomain>`. Pod 0 is worker 0, the chief; all listen on the
  same port."""

  name = 'jobset'

  @staticmethod
  def detect(environ: Mapping[str, str]) -> bool:
    return any(environ.get(name) for name in JOBSET_REQUIRED_ENV)

  @classmethod
  def from_environ(cls, environ: Mapping[str, str]) -> 'JobSet':
    tf_config = jobset_tf_config(environ)
    logging.info('TF_CONFIG built from the JobSet environment: %s',
                 tf_config)
    return cls(tf_config)


# In the order they are tried: a TF_CONFIG wins over a JobSet's variables.
ENVIRONMENTS = (TFConfig, JobSet, Alone)


def detect(environ: Mapping[str, str]) -> ClusterEnvironment:
  """The cluster environment `environ` describes (`ENVIRONMENTS`).

  Raises:
    InvalidArgumentError: a TF_CONFIG that is not one, or a JobSet's
      environment only partly set (see `role_from_tf_config`,
      `jobset_tf_config`).
  """
  for environment in ENVIRONMENTS:
    if environment.detect(environ):
      if environment is Alone:
        return Alone()
      return environment.from_environ(environ)
  return Alone()


@contextlib.contextmanager
def entered(plan: TrainingPlan) -> Iterator[None]:
  """Sets what a training of `plan` needs from its cluster in this process
  (TF_CONFIG, which TensorFlow's cluster resolver and every child read;
  the stop file its members share) until the block ends: an in-process
  caller's next training starts from its own environment. A stop file
  already named (a child of a member) is kept; the chief removes what a
  preempted attempt left in it before it trains: no member can end a step
  before the chief has started training."""
  role = plan.role
  changes = {}
  if role.in_cluster:
    environment = (JobSet if role.environment == JobSet.name else
                   TFConfig)(role.tf_config)
    changes = environment.environ(plan)
  if os.environ.get(STOP_FILE_ENV):
    changes.pop(STOP_FILE_ENV, None)
  stop_file = changes.get(STOP_FILE_ENV)
  if stop_file:
    os.makedirs(os.path.dirname(stop_file), exist_ok=True)
    if role.is_chief:
      for stale in (stop_file, request_file(stop_file)):
        if os.path.exists(stale):
          os.remove(stale)
  before = {name: os.environ.get(name) for name in changes}
  os.environ.update(changes)
  try:
    yield
  finally:
    for name, value in before.items():
      if value is None:
        os.environ.pop(name, None)
      else:
        os.environ[name] = value


def role_from_tf_config(tf_config: Optional[str],
                        environment: str = TFConfig.name) -> ClusterRole:
  """This process's role in the cluster a TF_CONFIG value describes; a
  single process when it is empty.

  Raises:
    InvalidArgumentError: TF_CONFIG is not JSON, lacks cluster or task, or
      names a task type MultiWorkerMirroredStrategy has no use for.
  """
  if not tf_config:
    return ClusterRole()
  try:
    config = json.loads(tf_config)
    cluster, task = config['cluster'], config['task']
    task_type, task_index = task['type'], int(task.get('index', 0))
  except (ValueError, KeyError, TypeError) as e:
    raise InvalidArgumentError(
        f'TF_CONFIG must be JSON with "cluster" and "task": {{"type", '
        f'"index"}}, as the Training Operator and Vertex AI set it ({e!r}). '
        f'Received: TF_CONFIG={tf_config!r}. Fix TF_CONFIG, or unset it to '
        'train in one process.') from e
  if task_type not in _TRAINING_TASK_TYPES:
    raise InvalidArgumentError(
        f'TF_CONFIG names this task {task_type!r}; GenericTrainer trains with '
        f'MultiWorkerMirroredStrategy, whose tasks are {_TRAINING_TASK_TYPES}.'
        ' Expected chief or worker. Run the trainer only in chief and worker '
        'replicas. Received: '
        f'TF_CONFIG={tf_config!r}.')
  chiefs = len(cluster.get('chief') or [])
  workers = len(cluster.get('worker') or [])
  worker_index = task_index if task_type == 'chief' else chiefs + task_index
  return ClusterRole(num_workers=chiefs + workers, worker_index=worker_index,
                     is_chief=worker_index == 0, task_type=task_type,
                     task_index=task_index, environment=environment,
                     tf_config=tf_config)


def jobset_tf_config(environ: Mapping[str, str]) -> str:
  """The TF_CONFIG the Training Operator would set, built from a JobSet
  pod's environment (see `JobSet`).

  Raises:
    InvalidArgumentError: the JobSet's variables are only partly set, or
      not numbers where numbers are due.
  """
  missing = [name for name in JOBSET_REQUIRED_ENV if not environ.get(name)]
  received = ', '.join(f'{name}={environ.get(name)!r}'
                       for name in JOBSET_REQUIRED_ENV)
  if missing:
    raise InvalidArgumentError(
        'Neither TF_CONFIG nor a complete JobSet environment says where '
        f'this process trains: TF_CONFIG is unset and {", ".join(missing)} '
        f'{"is" if len(missing) == 1 else "are"} missing. Expected TF_CONFIG '
        f'(the Training Operator sets it) or all of {", ".join(JOBSET_REQUIRED_ENV)} '
        '(the TrainingRuntime that `generic_trainer.kubeflow.trainjob` '
        f'writes sets them). Received: {received}. Run the trainer from that '
        'TrainingRuntime, set TF_CONFIG, or unset the JobSet variables to '
        'train in one process.')
  try:
    job_index, pod_index, num_nodes, port = (
        int(environ[JOBSET_JOB_INDEX_ENV]), int(environ[JOBSET_POD_INDEX_ENV]),
        int(environ[JOBSET_NUM_NODES_ENV]),
        int(environ.get(JOBSET_PORT_ENV) or JOBSET_DEFAULT_PORT))
  except ValueError as e:
    raise InvalidArgumentError(
        f'The JobSet environment must give whole numbers for '
        f'{JOBSET_JOB_INDEX_ENV}, {JOBSET_POD_INDEX_ENV}, '
        f'{JOBSET_NUM_NODES_ENV} and {JOBSET_PORT_ENV} ({e}). Received: '
        f'{received}, {JOBSET_PORT_ENV}={environ.get(JOBSET_PORT_ENV)!r}. Fix '
        'the TrainingRuntime\'s env.') from e
  if num_nodes < 1 or not 0 <= pod_index < num_nodes:
    raise InvalidArgumentError(
        f'The JobSet environment puts this pod at index {pod_index} of '
        f'{num_nodes} nodes. Expected 0 <= {JOBSET_POD_INDEX_ENV} < '
        f'{JOBSET_NUM_NODES_ENV}. Received: {received}. Set '
        f'{JOBSET_NUM_NODES_ENV} to the TrainJob\'s numNodes.')
  jobset = environ[JOBSET_NAME_ENV]
  subdomain = environ.get(JOBSET_SUBDOMAIN_ENV) or jobset
  prefix = f'{jobset}-{environ[JOBSET_REPLICATED_JOB_ENV]}-{job_index}'
  return json.dumps({
      'cluster': {'worker': [f'{prefix}-{index}.{subdomain}:{port}'
                             for index in range(num_nodes)]},
      'task': {'type': 'worker', 'index': pod_index}})
