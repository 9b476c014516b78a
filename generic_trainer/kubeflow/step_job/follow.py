"""The step's job followed to its end (`follow`): watched from the version
read, read again when a watch expires, with the progress its chief
reports and its pods' counts logged as they change (`_Progress`)."""

import json
from typing import Any, Callable, Dict, Mapping

from generic_trainer.errors import StepJobError
from generic_trainer.kubeflow.step_job.client import Cluster
from generic_trainer.kubeflow.step_job.client import http_status


def follow(cluster: Cluster, name: str, job: Dict[str, Any],
           log: Callable[[str], None]) -> Dict[str, Any]:
  """The job at its end: watched from the version read, read again when
  the watch's version expired (410) or the watch timed out."""
  kind = cluster.kind
  seen = _Progress(log)
  while True:
    if kind.ended(job)[0]:
      return job
    seen.show(job)
    version = job['metadata']['resourceVersion']
    try:
      for event_type, obj in cluster.watch(kind.plural, name, version):
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
