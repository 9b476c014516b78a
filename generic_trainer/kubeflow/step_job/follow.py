"""The step's job followed to its end (`follow`): watched from the version
read, read again when a watch expires, with the progress its chief
reports and its pods' counts logged as they change (`_Progress`).

The step never waits for pods that will not come: until a container of
the job's pods has started, each turn lists them, and when none has after
`START_WITHIN_S` the step fails, naming why (issue 56). Quota, Pod
Security admission and a missing service account act on the pods, not on
the job: the operator's Job controller is refused and records a Warning
event `FailedCreate`, "Error creating: <the API's refusal>"
(kubernetes pkg/controller/controller_utils.go, `RealPodControl`, which
pkg/controller/job/job_controller.go calls; the Training Operator's pod
control does the same on the TFJob); an image that cannot be pulled
leaves the pod waiting with the kubelet's reason `ErrImagePull` or
`ImagePullBackOff` (pkg/kubelet/images/types.go) and Warning events
`Failed`; a pod no node can take stays with the scheduler's condition
`PodScheduled=False`, reason `Unschedulable`. The step deletes the job
then (`step.run`), so nothing waits in the queue for hours holding a
quota's share. The deadline is a wait for the first start, not for
each restart: once a pod ran, the job's own restarts are the job's.
"""

import json
import time
from typing import Any, Callable, Dict, List, Mapping

from generic_trainer.errors import StepJobError
from generic_trainer.kubeflow.step_job.client import WATCH_TIMEOUT_S
from generic_trainer.kubeflow.step_job.client import Cluster
from generic_trainer.kubeflow.step_job.client import http_status

# How long the step waits for a container of its job's pods to start: an
# image's pull and a node's scale-up fit in it.
START_WITHIN_S = 900


def follow(cluster: Cluster, name: str, job: Dict[str, Any],
           log: Callable[[str], None],
           clock: Callable[[], float] = time.monotonic) -> Dict[str, Any]:
  """The job at its end: watched from the version read, read again when
  the watch's version expired (410) or the watch timed out.

  Raises:
    StepJobError: the job failed to be followed, was deleted, or no pod of
      it started within `START_WITHIN_S` (`_not_started`).
  """
  kind = cluster.kind
  seen = _Progress(log)
  deadline, started = clock() + START_WITHIN_S, False
  while True:
    if kind.ended(job)[0]:
      return job
    seen.show(job)
    timeout_s = WATCH_TIMEOUT_S
    if not started:
      started, why = cluster.pods_started(name)
      left = deadline - clock()
      if not started and left <= 0:
        raise _not_started(cluster, name, why)
      if not started:
        timeout_s = max(1, min(WATCH_TIMEOUT_S, int(left + 0.999)))
    version = job['metadata']['resourceVersion']
    try:
      for event_type, obj in cluster.watch(kind.plural, name, version,
                                           timeout_s):
        if event_type == 'ERROR':
          if obj.get('code') == 410:
            break
          raise StepJobError(
              f'Watching the {kind.name} {name} failed: '
              f'{obj.get("message")}. Expected its events. Received: an '
              'ERROR event. Run the pipeline again.')
        if event_type == 'DELETED':
          raise StepJobError(
              f'The {kind.name} {name} this step launched was deleted '
              'while it trained (by someone else: the step deletes it only '
              'when it ends). Expected it to run to its end. Received: its '
              'deletion. Nothing was published; run the pipeline again: it '
              'resumes from the checkpoint in the ModelRun artifact.')
        job = obj
        if kind.ended(job)[0]:
          return job
        seen.show(job)
    except Exception as e:  # pylint: disable=broad-except
      if http_status(e) != 410:
        raise
    job = cluster.get(kind.plural, name)
    if job is None:
      raise StepJobError(
          f'The {kind.name} {name} this step launched is gone (deleted '
          'by someone else). Expected it to run to its end. Received: 404 '
          'Not Found. Nothing was published; run the pipeline again.')


def _not_started(cluster: Cluster, name: str,
                 waiting: List[str]) -> StepJobError:
  """The error of a job none of whose pods started in time, with what the
  pods and the events say."""
  kind = cluster.kind.name
  found = waiting + cluster.warnings(name)
  return StepJobError(
      f'No pod of the {kind} {name} started within {START_WITHIN_S} s: '
      + ('; '.join(found) if found else 'no pod was created and no event '
         'says why') + '. Expected its pods to be created and their '
      'containers to start (the Job controller creates them; quota and Pod '
      'Security admission act on pods, not on the job). Received: none '
      f'started. The step deleted the {kind}. Fix what is named (a quota: '
      'fewer workers or smaller resources; Pod Security: the namespace\'s '
      'level or pod_settings; the service account or the image) and run '
      f'the pipeline again; kubectl get events -n {cluster.namespace} shows '
      'the rest.')


class _Progress:
  """Logs what changed in a job's status: the chief's progress (a
  TrainJob's `status.trainerStatus`) and its jobs' counts."""

  def __init__(self, log: Callable[[str], None]):
    self.log, self.last = log, None

  def show(self, job: Mapping[str, Any]) -> None:
    status = job.get('status') or {}
    trainer = status.get('trainerStatus') or {}
    now = (trainer.get('progressPercentage'),
           trainer.get('estimatedRemainingSeconds'),
           json.dumps(status.get('jobsStatus') or status.get(
               'replicaStatuses'), sort_keys=True))
    if now == self.last:
      return
    self.last = now
    parts = []
    if now[0] is not None:
      parts.append(f'{now[0]}% trained')
    if now[1] is not None:
      parts.append(f'about {now[1]} s left')
    if now[2] != 'null':
      parts.append(f'pods: {now[2]}')
    if parts:
      self.log(f'{job.get("kind", "Job")} {job["metadata"]["name"]}: '
               + ', '.join(parts))
