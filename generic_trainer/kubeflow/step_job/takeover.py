"""The job of an earlier attempt of the step: reused when it is ours, has
the same spec and has not failed, else removed and made again
(`reuse_or_clear`, `create`); a job of that name that is not ours is
neither used nor deleted. Each job the step makes or takes over is owned
by the step's pod, and removed with its companions when the step ends
(`remove`)."""

import time
from typing import Any, Callable, Dict, Mapping, Optional

from generic_trainer.errors import StepJobError
from generic_trainer.kubeflow.step_job.client import Cluster
from generic_trainer.kubeflow.step_job.render import MANAGED_BY
from generic_trainer.kubeflow.step_job.render import MANAGED_BY_LABEL
from generic_trainer.kubeflow.step_job.render import MODEL_URI_ANNOTATION
from generic_trainer.kubeflow.step_job.render import SPEC_ANNOTATION

GONE_WAIT_S = 300


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
  if same and state != 'failed' and 'deletionTimestamp' not in found[
      'metadata']:
    log(f'Reusing the {kind.name} {name} an earlier attempt of this step '
        f'launched ({"complete" if state == "done" else "running"}).')
    if owner:
      cluster.own(kind.plural, name, owner)
    return found
  log(f'Deleting the {kind.name} {name} an earlier attempt of this step '
      f'launched ({"it failed" if state == "failed" else "its spec differs"}'
      '), and waiting for its pods to end, before launching it again.')
  remove(cluster, name, foreground=True)
  deadline = time.monotonic() + GONE_WAIT_S
  while cluster.get(kind.plural, name) is not None:
    if time.monotonic() > deadline:
      raise StepJobError(
          f'The {kind.name} {name} of an earlier attempt of this step '
          f'was deleted but is still there after {GONE_WAIT_S} s (its pods '
          'not yet ended, or a finalizer). Expected it gone before a new '
          f'one starts (no two groups train at once). Received: '
          f'{kind.plural} {name} still present. Look at it (kubectl '
          f'describe {kind.name.lower()} {name}) and run the pipeline '
          'again.')
    time.sleep(2)
  return None


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
