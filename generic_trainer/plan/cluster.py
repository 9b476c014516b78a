"""Where a training runs: one object per cluster environment, carried by
the plan.

As Lightning keeps its `cluster_environment` on the accelerator connector
and asks it (`creates_processes_externally`, `world_size()`,
`global_rank()`), the plan keeps the environment this process trains in
(`TrainingPlan.cluster`) and every layer asks it:

    Alone         no cluster: this process trains alone, or starts a local
                  group (the plan decides, from num_workers)
    LocalGroup    a member of a group this machine started
                  (`launch.local_cluster`): TF_CONFIG on loopback ports,
                  the stop file in the group's scratch folder. The group
                  owns its members' roles and topology (`member`)
    TFConfig      TF_CONFIG as the Kubeflow Training Operator (TFJob) or
                  Vertex AI sets it; a pod of a step's job also names where
                  its chief records what it published
    JobSet        a pod of a JobSet (Kubeflow Trainer v2's TrainJob) with
                  no TF_CONFIG: the TF_CONFIG the Training Operator would
                  set, built from the JobSet's names and indexes; with
                  Trainer's status endpoint, where the chief reports
    KubeflowStep  a Kubeflow Pipelines step compiled to launch a job
                  (TrainJob or TFJob) for its workers: the step trains
                  nowhere itself (`Where.KUBEFLOW_JOB`)

These are data: which one this process is in is found by
`launch.cluster_environment.detect`, the one reader of a scheduler's
variables. They live here, below `launch`, because the plan carries them
to child processes (`to_json`, `from_json`) and decides with them.

The chief is the task of type 'chief', or worker 0 when there is none
(the convention of MultiWorkerMirroredStrategy and of TFX's unused
`_is_chief`).
"""

import json
import os
from typing import Any, Dict, List, Optional

import attr

from generic_trainer.errors import InvalidArgumentError

# The file through which a group's chief tells its members the step to stop
# at after a SIGTERM (`loop.handlers.preemption_stop`).
STOP_FILE_NAME = 'stop-step'
_TRAINING_TASK_TYPES = ('chief', 'worker')


@attr.s(frozen=True)
class ClusterRole:
  """This process's place in the training cluster.

  Attributes:
    num_workers: Processes that train together (chief and workers).
    worker_index: This process's index among them; the chief is 0.
    is_chief: Whether this process exports the model that is published.
    task_type: The TF_CONFIG task type ('chief' or 'worker'); None when
      there is no TF_CONFIG.
    task_index: The TF_CONFIG task index; 0 when there is no TF_CONFIG.
  """
  num_workers = attr.ib(type=int, default=1)
  worker_index = attr.ib(type=int, default=0)
  is_chief = attr.ib(type=bool, default=True)
  task_type = attr.ib(type=Optional[str], default=None)
  task_index = attr.ib(type=int, default=0)


@attr.s(frozen=True)
class StatusEndpoint:
  """Kubeflow Trainer's status endpoint, which a TrainJob's chief reports
  its progress to (`loop.handlers.trainjob_progress`, which warns about
  one only partly given).

  Attributes:
    url: The controller's HTTPS endpoint for this TrainJob, or None.
    ca_cert: The file of the CA that signed its certificate, or None.
    token_file: The file of the projected service-account token (read
      again for every request: it rotates), or None.
  """
  url = attr.ib(type=Optional[str], default=None)
  ca_cert = attr.ib(type=Optional[str], default=None)
  token_file = attr.ib(type=Optional[str], default=None)


@attr.s(frozen=True)
class ClusterEnvironment:
  """One kind of cluster: the role it gives this process, what its members
  share, and who creates its processes. Subclasses answer the questions;
  nobody asks for an environment's name to decide."""

  name = ''
  # Whether a cluster outside this process sized the group and started its
  # processes (TF_CONFIG, a JobSet), so that no local workers are started.
  creates_processes_externally = False
  # Whether this process launches a job whose pods train (a Kubeflow step).
  launches_job = False

  def role(self) -> ClusterRole:
    """This process's place in the cluster."""
    return ClusterRole()

  @property
  def tf_config(self) -> Optional[str]:
    """The cluster's TF_CONFIG as this process trains under it; None
    alone."""
    return None

  def stop_file(self, checkpoint_dir: Optional[str]) -> Optional[str]:  # pylint: disable=unused-argument
    """The file the members share to stop at one step after a SIGTERM
    (`loop.handlers.preemption_stop`); None: no members to tell."""
    return None

  @property
  def step_record(self) -> Optional[str]:
    """Where this pod's chief records what it published for the step that
    launched its job (the step's JSON, `kubeflow.step_job`); None outside
    a step's job."""
    return None

  @property
  def status_endpoint(self) -> Optional[StatusEndpoint]:
    """Kubeflow Trainer's status endpoint of this pod's TrainJob; None
    where there is none."""
    return None

  def describe(self) -> str:
    """How messages name the environment."""
    return self.name

  def to_json(self) -> Dict[str, Any]:
    return {'name': self.name, **attr.asdict(self)}


@attr.s(frozen=True)
class Alone(ClusterEnvironment):
  """No cluster: one process, or a local group this process starts.

  Attributes:
    status: Kubeflow Trainer's status endpoint, when this process trains
      alone in a TrainJob's pod (the command, a notebook), or None.
  """

  name = 'alone'
  status = attr.ib(type=Optional[StatusEndpoint], default=None,
                   converter=lambda v: StatusEndpoint(**v)
                   if isinstance(v, dict) else v)

  @property
  def status_endpoint(self) -> Optional[StatusEndpoint]:
    return self.status


@attr.s(frozen=True)
class LocalGroup(ClusterEnvironment):
  """The workers `launch.local_cluster` starts on this machine: a cluster
  of 'worker' tasks on loopback `ports`, worker 0 the chief, sharing the
  stop file in the group's scratch folder `root`.

  Attributes:
    ports: Each worker's port on localhost, by index.
    root: The group's scratch folder.
    index: This member's index; None for the group itself (its parent).
  """

  name = 'local_group'
  ports = attr.ib(type=List[int], converter=list)
  root = attr.ib(type=str)
  index = attr.ib(type=Optional[int], default=None)

  def member(self, index: int) -> 'LocalGroup':
    """Worker `index` of this group."""
    return attr.evolve(self, index=index)

  def members(self) -> List['LocalGroup']:
    return [self.member(index) for index in range(len(self.ports))]

  def role(self) -> ClusterRole:
    index = self.index or 0
    return ClusterRole(num_workers=len(self.ports), worker_index=index,
                       is_chief=index == 0, task_type='worker',
                       task_index=index)

  @property
  def tf_config(self) -> str:
    return json.dumps({
        'cluster': {'worker': [f'localhost:{p}' for p in self.ports]},
        'task': {'type': 'worker', 'index': self.index or 0}})

  def stop_file(self, checkpoint_dir: Optional[str]) -> str:
    return os.path.join(self.root, STOP_FILE_NAME)


@attr.s(frozen=True)
class TFConfig(ClusterEnvironment):
  """A cluster that sets TF_CONFIG: a TFJob's replicas, Vertex AI's.

  Attributes:
    config: The TF_CONFIG value.
    record: Where the chief of a step's job records what it published
      (`ClusterEnvironment.step_record`), or None.
    status: Kubeflow Trainer's status endpoint, or None.

  Raises:
    InvalidArgumentError: on construction, a TF_CONFIG that is not one
      (see `role_from_tf_config`).
  """

  name = 'tf_config'
  creates_processes_externally = True
  config = attr.ib(type=str)
  record = attr.ib(type=Optional[str], default=None)
  status = attr.ib(type=Optional[StatusEndpoint], default=None,
                   converter=lambda v: StatusEndpoint(**v)
                   if isinstance(v, dict) else v)
  _role = attr.ib(init=False, eq=False, repr=False)

  def __attrs_post_init__(self):
    object.__setattr__(self, '_role', role_from_tf_config(self.config))

  def role(self) -> ClusterRole:
    return self._role

  @property
  def tf_config(self) -> str:
    return self.config

  def stop_file(self, checkpoint_dir: Optional[str]) -> Optional[str]:
    """In the resume checkpoint's folder, which every member reaches (it
    resumes from it): a member that gets SIGTERM asks the chief for a stop
    there, the chief writes the step, and every member stops at it."""
    if self._role.num_workers > 1 and checkpoint_dir:
      return os.path.join(checkpoint_dir, STOP_FILE_NAME)
    return None

  @property
  def step_record(self) -> Optional[str]:
    return self.record

  @property
  def status_endpoint(self) -> Optional[StatusEndpoint]:
    return self.status

  def to_json(self) -> Dict[str, Any]:
    return {'name': self.name, 'config': self.config, 'record': self.record,
            'status': attr.asdict(self.status) if self.status else None}


@attr.s(frozen=True)
class JobSet(TFConfig):
  """A pod of a JobSet (Kubeflow Trainer v2) with no TF_CONFIG: `config` is
  the one the Training Operator would set, built from the JobSet's names
  and indexes (`launch.cluster_environment.jobset_tf_config`). Pod 0 is
  worker 0, the chief."""

  name = 'jobset'


@attr.s(frozen=True)
class KubeflowStep(ClusterEnvironment):
  """A Kubeflow Pipelines step compiled to launch a job for its workers
  (`kubeflow.compile`, `keys.STEP_JOB_ENV`): when the component asks for
  several workers, the step launches the job, follows it and takes the
  model its chief published (`Where.KUBEFLOW_JOB`); with one, it trains
  in its own pod.

  Attributes:
    kind: The job's kind ('TrainJob' or 'TFJob').
    image: The image of the job's pods.
    resources: Every pod's resources (`kubeflow.resources`' value), or
      None.
    owner: The owner reference to the step's pod (KFP's `KFP_POD_NAME`
      and `KFP_POD_UID`), or None where KFP named none.
    service_account: The step pod's service account (from its token), which
      the job's pods run as unless `pod_settings` names one; None where
      the pod has no token.
  """

  name = 'kubeflow_step'
  launches_job = True
  kind = attr.ib(type=str)
  image = attr.ib(type=str)
  resources = attr.ib(type=Optional[Dict[str, Any]], default=None)
  owner = attr.ib(type=Optional[Dict[str, str]], default=None)
  service_account = attr.ib(type=Optional[str], default=None)


# Every environment, by name: what a child process rebuilds its plan's with.
ENVIRONMENTS = (Alone, LocalGroup, TFConfig, JobSet, KubeflowStep)


def from_json(value: Dict[str, Any]) -> ClusterEnvironment:
  """The environment `ClusterEnvironment.to_json` wrote."""
  fields = dict(value)
  name = fields.pop('name')
  (environment,) = [e for e in ENVIRONMENTS if e.name == name]
  return environment(**fields)


def role_from_tf_config(tf_config: Optional[str]) -> ClusterRole:
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
                     task_index=task_index)
