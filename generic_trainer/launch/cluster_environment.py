"""Which cluster this process trains in: the one reader of a scheduler's
variables.

As Lightning's cluster environments (`lightning/fabric/plugins/
environments/`) detect themselves, one detector per environment reads the
variables its scheduler sets and builds the environment the plan carries
(`plan.cluster`: Alone, LocalGroup, TFConfig, JobSet, KubeflowStep).
Nobody else reads a scheduler's variables (a test says so): TF_CONFIG,
a JobSet's, KFP's `KFP_POD_NAME`/`KFP_POD_UID`, the variable the compile
puts in a Kubeflow step (`keys.STEP_JOB_ENV`), the one a step gives its
job's pods (`keys.STEP_JOB_RECORD_ENV`), and Kubeflow Trainer's status
endpoint (`keys.TRAINER_STATUS_ENV`).

    TFConfig      TF_CONFIG as the Kubeflow Training Operator (TFJob) or
                  Vertex AI sets it
    JobSet        a pod of a JobSet (Kubeflow Trainer v2's TrainJob) with no
                  TF_CONFIG: the one the Training Operator would set is built
                  from the JobSet's names and indexes and its pods' stable
                  host names
    KubeflowStep  the Kubeflow step itself, compiled to launch a job for its
                  workers: the compile's variable, and no placement of a
                  pod of a job
    Alone         none of these (a LocalGroup is never detected: its
                  parent gives each member its plan)

`detect(environ)` returns the first that detects itself, in that order:
a TF_CONFIG wins over a JobSet's variables, and a pod the job placed trains
even when it has the step's variable.

`entered(plan)` sets what the plan's environment needs in this process
while it trains: its TF_CONFIG, which TensorFlow's cluster resolver and
every child read, and the stop file its members share
(`loop.handlers.preemption_stop`).
"""

import base64
import contextlib
import json
import os
from typing import Dict, Iterator, Mapping, Optional

from absl import logging

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import CLUSTER_PLACE_ENV
from generic_trainer.keys import JOBSET_DEFAULT_PORT
from generic_trainer.keys import JOBSET_JOB_INDEX_ENV
from generic_trainer.keys import JOBSET_NAME_ENV
from generic_trainer.keys import JOBSET_NUM_NODES_ENV
from generic_trainer.keys import JOBSET_POD_INDEX_ENV
from generic_trainer.keys import JOBSET_PORT_ENV
from generic_trainer.keys import JOBSET_REPLICATED_JOB_ENV
from generic_trainer.keys import JOBSET_REQUIRED_ENV
from generic_trainer.keys import JOBSET_SUBDOMAIN_ENV
from generic_trainer.keys import KFP_POD_NAME_ENV
from generic_trainer.keys import KFP_POD_UID_ENV
from generic_trainer.keys import SERVICE_ACCOUNT_DIR
from generic_trainer.keys import STEP_JOB_ENV
from generic_trainer.keys import STEP_JOB_RECORD_ENV
from generic_trainer.keys import STOP_FILE_ENV
from generic_trainer.keys import TF_CONFIG_ENV
from generic_trainer.keys import TRAINER_STATUS_ENV
from generic_trainer.kubeflow.kinds import check_kind
from generic_trainer.loop.handlers.preemption_stop import request_file
from generic_trainer.plan.cluster import Alone
from generic_trainer.plan.cluster import ClusterEnvironment
from generic_trainer.plan.cluster import JobSet
from generic_trainer.plan.cluster import KubeflowStep
from generic_trainer.plan.cluster import LocalGroup
from generic_trainer.plan.cluster import role_from_tf_config  # pylint: disable=unused-import
from generic_trainer.plan.cluster import StatusEndpoint
from generic_trainer.plan.cluster import TFConfig
from generic_trainer.plan.plan import TrainingPlan


def _tf_config(environ: Mapping[str, str]) -> Optional[TFConfig]:
  """TF_CONFIG as the Training Operator or Vertex AI sets it."""
  if not environ.get(TF_CONFIG_ENV):
    return None
  return TFConfig(environ[TF_CONFIG_ENV], **_job_pod(environ))


def _jobset(environ: Mapping[str, str]) -> Optional[JobSet]:
  """A JobSet's pod: any of its variables set (all are then required)."""
  if not any(environ.get(name) for name in JOBSET_REQUIRED_ENV):
    return None
  tf_config = jobset_tf_config(environ)
  logging.info('TF_CONFIG built from the JobSet environment: %s', tf_config)
  return JobSet(tf_config, **_job_pod(environ))


def _kubeflow_step(environ: Mapping[str, str]) -> Optional[KubeflowStep]:
  """The Kubeflow step compiled to launch a job (`keys.STEP_JOB_ENV`), not
  placed in a group itself (a pod of its job is placed: it trains).

  Raises:
    InvalidArgumentError: the variable is not what the compile writes.
  """
  value = environ.get(STEP_JOB_ENV)
  if not value or any(environ.get(name) for name in CLUSTER_PLACE_ENV):
    return None
  try:
    asked = json.loads(value)
    check_kind(asked.get('kind'))
    if not isinstance(asked.get('image'), str) or not asked['image']:
      # Read inside the message below, which says what to do.
      raise InvalidArgumentError(
          "its 'image' must be the image the job's pods run, a non-empty "
          f"string (Received: image={asked.get('image')!r})")
  except (ValueError, AttributeError) as e:
    raise InvalidArgumentError(
        f'{STEP_JOB_ENV} is not what the compile writes: {e}. Expected '
        "JSON {'kind': 'TrainJob' or 'TFJob', 'image': ..., 'resources': "
        f'...}}. Received: {value[:500]!r}. Compile the pipeline again with '
        'generic_trainer.kubeflow.compile.compile_pipeline, and do not set '
        'the variable by hand.') from e
  pod, uid = environ.get(KFP_POD_NAME_ENV), environ.get(KFP_POD_UID_ENV)
  owner = ({'apiVersion': 'v1', 'kind': 'Pod', 'name': pod, 'uid': uid}
           if pod and uid else None)
  return KubeflowStep(asked['kind'], asked['image'], asked.get('resources'),
                      owner, step_service_account())


def step_service_account(
    token_file: str = os.path.join(SERVICE_ACCOUNT_DIR, 'token')
) -> Optional[str]:
  """The service account of this pod, from the subject of the token
  Kubernetes mounts (`system:serviceaccount:NAMESPACE:NAME`, the claim the
  API server's serviceaccount/claims.go writes); None without a readable
  token. Not a check of the token: the API server checks it."""
  try:
    with open(token_file, encoding='utf-8') as f:
      payload = f.read().strip().split('.')[1]
    claims = json.loads(base64.urlsafe_b64decode(
        payload + '=' * (-len(payload) % 4)))
  except (OSError, IndexError, ValueError):
    return None
  parts = str(claims.get('sub', '')).split(':')
  if len(parts) == 4 and parts[:2] == ['system', 'serviceaccount']:
    return parts[3]
  return None


def _job_pod(environ: Mapping[str, str]):
  """What a pod of a step's job, or of any TrainJob, is told beside its
  place: where its chief records what it published
  (`keys.STEP_JOB_RECORD_ENV`) and Kubeflow Trainer's status endpoint."""
  return {'record': environ.get(STEP_JOB_RECORD_ENV) or None,
          'status': status_endpoint(environ)}


def status_endpoint(environ: Mapping[str, str]) -> Optional[StatusEndpoint]:
  """Kubeflow Trainer's status endpoint (`keys.TRAINER_STATUS_ENV`), when
  any of its variables is set (the handler warns when not all are)."""
  values = [environ.get(name) or None for name in TRAINER_STATUS_ENV]
  return StatusEndpoint(*values) if any(values) else None


# In the order they are tried: a TF_CONFIG wins over a JobSet's variables,
# and both over the step's variable (a pod of the step's job has it too).
DETECTORS = (_tf_config, _jobset, _kubeflow_step)


def detect(environ: Mapping[str, str],
           joins: bool = True) -> ClusterEnvironment:
  """The cluster environment `environ` describes (`DETECTORS`), or Alone;
  Alone when this process does not `joins` one (an entry point that
  trains alone wherever it runs: `EntryPoint.joins_cluster`). Alone in a
  TrainJob's pod still reports its progress there.

  Raises:
    InvalidArgumentError: a TF_CONFIG that is not one, a JobSet's
      environment only partly set, or a step's variable that is not the
      compile's (see `plan.cluster.role_from_tf_config`,
      `jobset_tf_config`).
  """
  for detector in DETECTORS if joins else ():
    found = detector(environ)
    if found is not None:
      return found
  return Alone(status_endpoint(environ))


@contextlib.contextmanager
def entered(plan: TrainingPlan) -> Iterator[None]:
  """Sets what a training of `plan` needs from its cluster in this process
  (TF_CONFIG, which TensorFlow's cluster resolver and every child read;
  the stop file its members share) until the block ends: an in-process
  caller's next training starts from its own environment. A stop file
  already named (a child of a member) is kept; the chief removes what a
  preempted attempt left in it before it trains: no member can end a step
  before the chief has started training."""
  cluster = plan.cluster
  changes = {}
  if cluster.tf_config:
    changes[TF_CONFIG_ENV] = cluster.tf_config
  stop_file = cluster.stop_file(plan.checkpoint_dir)
  if stop_file and not os.environ.get(STOP_FILE_ENV):
    changes[STOP_FILE_ENV] = stop_file
    os.makedirs(os.path.dirname(stop_file), exist_ok=True)
    if plan.role.is_chief:
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


def member_environ(member: LocalGroup) -> Dict[str, str]:
  """The environment local group `member` starts with."""
  return {TF_CONFIG_ENV: member.tf_config,
          STOP_FILE_ENV: member.stop_file(None)}


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
