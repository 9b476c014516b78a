"""The job of an earlier attempt of the step: reused when it is ours, has
the same spec and has not failed, else removed and made again
(`reuse_or_clear`, `create`); a job of that name that is not ours is
neither used nor deleted. Each job the step makes or takes over is owned,
with its companions (a TrainJob's TrainingRuntime), by the step's pod, and
removed with them when the step ends (`remove`).

An object deleted before it is made again is waited for until it is gone
(`_wait_gone`): Kubeflow Trainer 2.0-2.2 put a finalizer,
`trainer.kubeflow.org/resource-in-use`, on a TrainingRuntime that a
TrainJob uses (pkg/controller/trainingruntime_controller.go), which its
controller removes only once no TrainJob refers to it, so a runtime
deleted with its job stays, terminating, for a while, and a create of
the same name is refused with 409 AlreadyExists.
"""

import time
from typing import Any, Callable, Dict, Mapping, Optional

from generic_trainer.errors import StepJobError
from generic_trainer.kubeflow.step_job.client import Cluster
from generic_trainer.kubeflow.step_job.render import MANAGED_BY
from generic_trainer.kubeflow.step_job.render import MANAGED_BY_LABEL
from generic_trainer.kubeflow.step_job.render import MODEL_URI_ANNOTATION
from generic_trainer.kubeflow.step_job.render import SPEC_ANNOTATION

GONE_WAIT_S = 300
GONE_POLL_S = 2


def _ours(manifest: Mapping[str, Any], model_uri: str) -> bool:
  metadata = manifest.get('metadata', {})
  return (metadata.get('labels', {}).get(MANAGED_BY_LABEL) == MANAGED_BY and
          metadata.get('annotations', {}).get(MODEL_URI_ANNOTATION) ==
          model_uri)


def _not_ours(kind: str, name: str, found: Mapping[str, Any]) -> StepJobError:
  return StepJobError(
      f'A {kind} named {name} exists in namespace '
      f'{found["metadata"].get("namespace")} and was not launched by this '
      'step (it lacks our label app.kubernetes.io/managed-by='
      f'{MANAGED_BY} and this step\'s Model URI), so it is neither used nor '
      f'deleted. Expected no {kind} of that name, or the one this step made. '
      f'Received: {kind} {name} made by someone else. Remove or rename it '
      'if it is not needed; the step names its job after its Model URI.')


def reuse_or_clear(cluster: Cluster, name: str, model_uri: str,
                   objects: Dict[str, Dict[str, Any]],
                   owner: Optional[Dict[str, Any]],
                   log: Callable[[str], None]) -> Optional[Dict[str, Any]]:
  """The job an earlier attempt of this step made, when it can be reused
  (same spec, not failed); else None, with any such job deleted."""
  kind = cluster.kind
  found = cluster.get(kind.plural, name)
  if found is None:
    return None
  if not _ours(found, model_uri):
    raise _not_ours(kind.name, name, found)
  annotations = found['metadata'].get('annotations', {})
  state = kind.ended(found)[0]
  same = annotations.get(SPEC_ANNOTATION) == objects[kind.job_key][
      'metadata']['annotations'][SPEC_ANNOTATION]
  # Trainer's webhook validates every update (the owner's patch) against
  # the runtime: a job whose runtime is gone cannot be taken over.
  whole = all(cluster.get(companion.plural, name + companion.suffix)
              is not None for companion in kind.companions)
  deleting = 'deletionTimestamp' in found['metadata']
  if same and whole and state != 'failed' and not deleting:
    log(f'Reusing the {kind.name} {name} an earlier attempt of this step '
        f'launched ({"complete" if state == "done" else "running"}).')
    if owner:
      cluster.own(kind.plural, name, owner)
      for companion in kind.companions:
        cluster.own(companion.plural, name + companion.suffix, owner)
    return found
  log(f'Deleting the {kind.name} {name} an earlier attempt of this step '
      'launched ('
      + ('it failed' if state == 'failed' else 'its spec differs' if not same
         else 'its runtime is gone' if not whole else 'it is being deleted')
      + '), and waiting for its pods to end, before launching it again.')
  remove(cluster, name, foreground=True)
  _wait_gone(cluster, kind.plural, kind.name, name)
  return None


def _wait_gone(cluster: Cluster, plural: str, kind: str, name: str) -> None:
  """Waits until the deleted object is gone, at most `GONE_WAIT_S`.

  Raises:
    StepJobError: still there (its pods not ended, or a finalizer).
  """
  deadline = time.monotonic() + GONE_WAIT_S
  while (found := cluster.get(plural, name)) is not None:
    if time.monotonic() > deadline:
      finalizers = found['metadata'].get('finalizers') or []
      raise StepJobError(
          f'The {kind} {name} of an earlier attempt of this step was '
          f'deleted but is still there after {GONE_WAIT_S} s (finalizers: '
          f'{finalizers or "none"}; its pods not yet ended, or a '
          'finalizer its controller has not removed: Kubeflow Trainer '
          '2.0-2.2 keep a TrainingRuntime with trainer.kubeflow.org/'
          'resource-in-use while a TrainJob refers to it). Expected it '
          'gone before a new one is made (no two groups train at once). '
          f'Received: {plural} {name} still present. Look at it (kubectl '
          f'describe {kind.lower()} {name}), and run the pipeline again.')
    time.sleep(GONE_POLL_S)


def create(cluster: Cluster, objects: Dict[str, Dict[str, Any]],
           model_uri: str, owner: Optional[Dict[str, Any]],
           log: Callable[[str], None]) -> Dict[str, Any]:
  """Makes the job's companions (an earlier attempt's of ours replaced),
  then the job, owned by `owner`; returns the job as the API made it."""
  kind = cluster.kind
  for manifest in objects.values():
    manifest['metadata']['annotations'][MODEL_URI_ANNOTATION] = model_uri
    if owner:
      manifest['metadata']['ownerReferences'] = [owner]
  for companion in kind.companions:
    made = objects[companion.key]
    made_name = made['metadata']['name']
    found = cluster.get(companion.plural, made_name)
    if found is not None:
      if not _ours(found, model_uri):
        raise _not_ours(made['kind'], made_name, found)
      cluster.delete(companion.plural, made_name, foreground=False)
      _wait_gone(cluster, companion.plural, made['kind'], made_name)
    cluster.create(companion.plural, made)
  job = cluster.create(kind.plural, objects[kind.job_key])
  log(f'Launched the {kind.name} {job["metadata"]["name"]} in namespace '
      f'{cluster.namespace}: kubectl get {kind.name.lower()} '
      f'{job["metadata"]["name"]} -n {cluster.namespace}')
  return job


def remove(cluster: Cluster, name: str, foreground: bool = False) -> None:
  """Deletes the job `name` (`foreground`: its pods first) and its
  companions."""
  cluster.delete(cluster.kind.plural, name, foreground=foreground)
  for companion in cluster.kind.companions:
    cluster.delete(companion.plural, name + companion.suffix,
                   foreground=False)
