"""The job never outlives its step, whatever ends the step: its pods watch
the step's pod and delete their own job once it is gone or finished.

The step deletes its job whenever it ends through its own code, and owns
it (`ownerReferences`), so Kubernetes' garbage collector deletes the job
with the step's pod object. Neither covers a step killed without SIGTERM
(OOM-killed, its node lost) whose pod object stays: KFP 2.5 sets no Argo
`podGC`, so a Failed or Succeeded step pod stays until its Workflow is
deleted (7 days by default), and its job would train on, holding GPUs.

So each pod of the job (`watching`, which the launcher enters around the
training of a job's pod, `plan.cluster.step_record` naming the job) reads,
every `EVERY_S` seconds, its job's owner reference (the step's pod, or
the pod of the retry that took the job over) and that pod (`verdict`): a
pod gone, replaced by another of its name, or in phase Succeeded or
Failed is a step that ended. When the verdict has held for `GRACE_S` (a
KFP retry's pod may take the job over meanwhile: the owner changes, and
the watch follows the new one), the pod deletes its job (background
propagation): the job's controller ends its pods with SIGTERM, and they
save their step as a preempted training does.

The calls are the step's own (`job_kind.JobKind.api_calls`: get and delete
the job, list pods), made with the pod's service account, which is the
step's unless `pod_settings` names another. Where that account may not
make them (a 403), or the pod has no service account token, the watch
says so once, in a warning, and stops: the job is then bound to its step
by the owner reference alone.
"""

import contextlib
import json
import logging
import threading
import time
from typing import Any, Dict, Iterator, Optional

from generic_trainer.kubeflow.kinds import named
from generic_trainer.kubeflow.step_job import client

EVERY_S = 30.0
GRACE_S = 120.0
# A pod in any other phase has ended (Succeeded or Failed, its final
# ones); Unknown is a node not heard from, which may come back.
_NOT_ENDED_PHASES = ('Pending', 'Running', 'Unknown', None)


def verdict(job: Optional[Dict[str, Any]],
            pod: Optional[Dict[str, Any]]) -> Optional[str]:
  """Why the step of `job` has ended, or None while it runs (or when the
  job names no step pod: nothing to watch). `pod` is the pod the job's
  owner reference names, as the API returns it, or None when there is
  none of that name."""
  if job is None:
    return None
  owners = [o for o in job.get('metadata', {}).get('ownerReferences') or ()
            if o.get('kind') == 'Pod']
  if not owners:
    return None
  owner = owners[0]
  if pod is None:
    return f"its step's pod {owner['name']} is gone"
  metadata = pod.get('metadata') or {}
  if metadata.get('uid') != owner.get('uid'):
    return (f"its step's pod {owner['name']} is gone (a pod of that name "
            'with another uid is there)')
  if metadata.get('deletionTimestamp'):
    return f"its step's pod {owner['name']} is being deleted"
  phase = (pod.get('status') or {}).get('phase')
  if phase not in _NOT_ENDED_PHASES:
    return (f"its step's pod {owner['name']} has ended (phase {phase}) "
            'and stays (no pod GC)')
  return None


class StepWatch:
  """Deletes job `name` once its step has ended (see the module).

  Args:
    cluster: The `client.Cluster` of the job's kind and namespace.
    name: The job's name.
    log: Where the decision and a refused call are said.
    every_s: Seconds between reads.
    grace_s: How long a verdict must hold before the job is deleted.
  """

  def __init__(self, cluster: client.Cluster, name: str,
               log: logging.Logger = logging.getLogger(__name__),
               every_s: float = EVERY_S, grace_s: float = GRACE_S):
    self.cluster, self.name, self.log = cluster, name, log
    self.every_s, self.grace_s = every_s, grace_s
    self.deleted = False
    self._since: Optional[float] = None
    self._stop = threading.Event()

  def check(self, now: float) -> Optional[str]:
    """One read; deletes the job when the verdict has held for grace_s.
    Returns the verdict (None while the step runs)."""
    job = self.cluster.get(self.cluster.kind.plural, self.name)
    owner = [o for o in ((job or {}).get('metadata', {}).get(
        'ownerReferences') or ()) if o.get('kind') == 'Pod']
    pod = self.cluster.pod(owner[0]['name']) if owner else None
    why = verdict(job, pod)
    if why is None:
      self._since = None
      return None
    self._since = now if self._since is None else self._since
    if now - self._since >= self.grace_s:
      self.log.warning(
          'The %s %s outlived its step: %s. Deleting the job (its pods save '
          'their step; the next run resumes there).', self.cluster.kind.name,
          self.name, why)
      self.cluster.delete(self.cluster.kind.plural, self.name,
                          foreground=False)
      self.deleted = True
    return why

  def run(self, clock=None) -> None:
    """Checks every `every_s` until stopped or the job is deleted."""
    clock = clock or time.monotonic
    while not self.deleted and not self._stop.is_set():
      try:
        self.check(clock())
      except Exception as e:  # pylint: disable=broad-except
        self.log.warning(
            'The %s %s cannot watch its step (%s): it is bound to the step '
            "by its owner reference alone. Expected the pods' service "
            "account to get the job and list pods (the step's Role: "
            'python -m generic_trainer.kubeflow.step_job rbac).',
            self.cluster.kind.name, self.name,
            f'HTTP {client.http_status(e)}' if client.http_status(e)
            else e)
        return
      self._stop.wait(self.every_s)

  def stop(self) -> None:
    self._stop.set()


@contextlib.contextmanager
def watching(step_record: Optional[str], api_client=None,
             namespace: Optional[str] = None,
             every_s: float = EVERY_S,
             grace_s: float = GRACE_S) -> Iterator[Optional[StepWatch]]:
  """Watches the step of the job this pod belongs to while the block
  runs: `step_record` is the job's pods' `keys.STEP_JOB_RECORD_ENV` value
  (`plan.cluster.step_record`), which names the job and its kind; None
  (not a pod of a step's job) watches nothing."""
  record = json.loads(step_record) if step_record else {}
  if not record.get('job') or not record.get('kind'):
    yield None
    return
  if api_client is None:
    try:
      api_client, namespace = client.in_cluster()
    except Exception as e:  # pylint: disable=broad-except
      logging.warning('Not watching the step of job %s: %s', record['job'], e)
      yield None
      return
  watch = StepWatch(client.Cluster(api_client, namespace,
                                   named(record['kind'])),
                    record['job'], every_s=every_s, grace_s=grace_s)
  thread = threading.Thread(target=watch.run, daemon=True,
                            name='generic-trainer-step-watch')
  thread.start()
  try:
    yield watch
  finally:
    watch.stop()
    thread.join(5)
