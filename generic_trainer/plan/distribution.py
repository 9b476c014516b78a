"""Where a training runs: one process, local workers, or a cluster's TF_CONFIG.

Two settings on the component decide it, `num_workers` and `strategy`:
  - `num_workers` None or 1 and no TF_CONFIG: one process, as before
    (`strategy` 'default', or 'mirrored' for all local devices);
  - `num_workers` N > 1 and no TF_CONFIG: the executor starts N worker
    processes on loopback ports (`local_cluster`), all training with
    MultiWorkerMirroredStrategy;
  - TF_CONFIG set by the environment (Kubeflow Training Operator, Vertex
    AI): this process is one member of that cluster; it trains as chief
    (validates and publishes) or as a worker (trains, exports to scratch,
    publishes nothing);
  - no TF_CONFIG but a JobSet's environment (Kubeflow Trainer v2, whose
    TrainJob runs a JobSet): `cluster_tf_config` writes the TF_CONFIG the
    Training Operator would have set, from the JobSet's names and indexes
    and its pods' stable host names, and the run goes on as above.

The chief is the task of type 'chief', or worker 0 when there is none (the
convention of MultiWorkerMirroredStrategy and of TFX's unused `_is_chief`).
"""

import json
import os
from typing import Any, Dict, List, Mapping, Optional

import attr

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import DEFAULT_STRATEGY
from generic_trainer.keys import JOBSET_DEFAULT_PORT
from generic_trainer.keys import JOBSET_JOB_INDEX_ENV
from generic_trainer.keys import JOBSET_NAME_ENV
from generic_trainer.keys import JOBSET_NUM_NODES_ENV
from generic_trainer.keys import JOBSET_POD_INDEX_ENV
from generic_trainer.keys import JOBSET_PORT_ENV
from generic_trainer.keys import JOBSET_REPLICATED_JOB_ENV
from generic_trainer.keys import JOBSET_REQUIRED_ENV
from generic_trainer.keys import JOBSET_SUBDOMAIN_ENV
from generic_trainer.keys import MULTI_WORKER_MIRRORED
from generic_trainer.keys import STRATEGIES
from generic_trainer.keys import TF_CONFIG_ENV
from generic_trainer.system import paths

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


def check_settings(num_workers: Any, strategy: Any) -> None:
  """Raises InvalidArgumentError unless the two settings fit together."""
  if num_workers is not None and (
      isinstance(num_workers, bool) or not isinstance(num_workers, int) or
      num_workers < 1):
    raise InvalidArgumentError(
        "'num_workers' must be a positive int: the number of processes that "
        'train together (1 trains in one process). Received: '
        f'num_workers={num_workers!r}. Set 1 or more, or leave it unset.')
  if strategy is not None and strategy not in STRATEGIES:
    raise InvalidArgumentError(
        f"'strategy' must be one of {STRATEGIES} or None (chosen from "
        f'num_workers). Received: strategy={strategy!r}. Set one of those, '
        'or leave it unset.')
  if (num_workers or 1) > 1 and strategy not in (None, MULTI_WORKER_MIRRORED):
    raise InvalidArgumentError(
        f"A {num_workers}-worker training needs strategy="
        f"'{MULTI_WORKER_MIRRORED}' (or None, which picks it); {strategy!r} "
        f'trains in one process. Received: num_workers={num_workers}, '
        f'strategy={strategy!r}. Leave strategy unset, or train with one '
        'worker.')


def role_from_tf_config(tf_config: Optional[str]) -> ClusterRole:
  """Parses a TF_CONFIG value; a single process when it is empty.

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


def cluster_tf_config(environ: Mapping[str, str]) -> Optional[str]:
  """This process's TF_CONFIG: the environment's, else one built from a
  JobSet's environment (Kubeflow Trainer v2), else None (no cluster).

  A JobSet pod of a TrainJob knows its JobSet, its replicated job, its job
  index and its pod index (`keys.JOBSET_REQUIRED_ENV`, with the node
  count), and every pod's host name follows from them:
  `<jobset>-<replicated job>-<job index>-<pod index>.<subdomain>`. Pod 0 is
  worker 0, the chief; all listen on the same port.

  Raises:
    InvalidArgumentError: TF_CONFIG is absent and the JobSet's variables
      are only partly set, or not numbers where numbers are due.
  """
  if environ.get(TF_CONFIG_ENV):
    return environ[TF_CONFIG_ENV]
  present = [name for name in JOBSET_REQUIRED_ENV if environ.get(name)]
  if not present:
    return None
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


def check_role(role: ClusterRole, tf_config: Optional[str],
               num_workers: Optional[int], strategy: Optional[str],
               asked: Any = None) -> None:
  """Refuses settings that disagree with the cluster TF_CONFIG describes.
  `asked` is the num_workers setting as given (a range: '2:3' or (2, 3)),
  for the message; `num_workers` the count it stands for."""
  if tf_config and num_workers and num_workers != role.num_workers:
    shown = num_workers if asked is None or isinstance(asked, int) else (
        repr(asked))
    expected = ('a range that holds the cluster\'s size' if shown != (
        num_workers) else 'the cluster\'s size')
    raise InvalidArgumentError(
        f'The component asks for num_workers={shown}, but TF_CONFIG '
        f'describes a cluster of {role.num_workers} (chief and workers). '
        f'Expected {expected}. Set num_workers to the number of replicas '
        'the job runs (or a range that holds it), or leave it unset to '
        f'follow TF_CONFIG. Received: TF_CONFIG={tf_config!r}.')
  if role.num_workers > 1 and strategy not in (None, MULTI_WORKER_MIRRORED):
    raise InvalidArgumentError(
        f'TF_CONFIG describes a cluster of {role.num_workers}, which trains '
        f"with strategy='{MULTI_WORKER_MIRRORED}'. Expected that strategy, "
        'or none. Received: '
        f'strategy={strategy!r}. Leave strategy unset, or set '
        f"'{MULTI_WORKER_MIRRORED}'.")


def strategy_name(setting: Optional[str], num_workers: int) -> str:
  """The strategy to train with: the setting, else one fit for the number
  of processes that train together."""
  if setting:
    return setting
  return MULTI_WORKER_MIRRORED if num_workers > 1 else DEFAULT_STRATEGY


def scratch_outputs(output_dict: Dict[str, List[Any]], root: str):
  """Copies of the Model and ModelRun outputs whose URIs are under `root`.

  Returns (output_dict, serving_dir, eval_dir) for a worker that is not the
  chief: its export and logs go there, and `root` is removed afterwards.
  """
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_component_specs as keys  # pylint: disable=g-import-not-at-top
  scratch = {}
  for key, artifacts in output_dict.items():
    copies = []
    for artifact in artifacts:
      copy = type(artifact)()
      copy.mlmd_artifact.CopyFrom(artifact.mlmd_artifact)
      copy.uri = os.path.join(root, key)
      copies.append(copy)
    scratch[key] = copies
  model_uri = artifact_utils.get_single_uri(scratch[keys.MODEL_KEY])
  return (scratch, *paths.model_dirs(model_uri))
