"""The step's run (`run`): its job rendered (`render`), an earlier
attempt's taken over or cleared (`takeover`), followed to its end
(`follow`), and the chief's record taken (`record`); a failed job's
reason and failing pod's log, a cancel and an API's refusal said as our
errors."""

import os
import secrets
from typing import Any, Callable, Dict, List, Mapping, Optional

from absl import logging

from generic_trainer.errors import PreemptedError
from generic_trainer.errors import StepJobError
from generic_trainer.kubeflow.job_kind import JobKind
from generic_trainer.kubeflow.kinds import named
from generic_trainer.kubeflow.step_job import client
from generic_trainer.kubeflow.step_job import takeover
from generic_trainer.kubeflow.step_job.follow import follow
from generic_trainer.kubeflow.step_job.record import RECORD_NAME
from generic_trainer.kubeflow.step_job.record import read_record
from generic_trainer.kubeflow.step_job.render import NONCE_ANNOTATION
from generic_trainer.kubeflow.step_job.render import job_name
from generic_trainer.kubeflow.step_job.render import pod_args
from generic_trainer.kubeflow.step_job.render import render
from generic_trainer.plan.settings import most_workers
from generic_trainer.system.lazy import k8s_client

def run(asked: Mapping[str, Any], exec_properties: Mapping[str, Any],
        model_uri: str, model_run_uri: str, argv: List[str],
        owner: Optional[Dict[str, str]], api_client=None,
        namespace: Optional[str] = None,
        log: Callable[[str], None] = logging.info,
        service_account: Optional[str] = None) -> Dict[str, Any]:
  """Launches (or takes over) the step's job, follows it to its end and
  returns the chief's record (see the package). `owner` is the owner
  reference to the step's pod (`plan.cluster.KubeflowStep.owner`), or
  None; `service_account` the step pod's
  (`plan.cluster.KubeflowStep.service_account`), which the job's pods run
  as unless `pod_settings` names one, or None.

  Raises:
    StepJobError: the job failed (its reason and the failing pod's log),
      was deleted by someone else, its name is taken by an object that is
      not ours, or the step's service account may not make a call.
    PreemptedError: SIGTERM to the step: the job was deleted.
  """
  kind = named(asked['kind'])
  if api_client is None:
    api_client, namespace = client.in_cluster()
  try:
    return _run(kind, asked, exec_properties, model_uri, model_run_uri,
                argv, owner, api_client, namespace, log, service_account)
  except k8s_client.exceptions.ApiException as e:
    raise client.refused(e, kind, namespace) from e


def _run(kind: JobKind, asked, exec_properties, model_uri, model_run_uri,
         argv, owner, api_client, namespace, log,
         service_account) -> Dict[str, Any]:
  cluster = client.Cluster(api_client, namespace, kind)
  name = job_name(model_uri)
  record_path = os.path.join(model_run_uri, RECORD_NAME)
  nonce = secrets.token_hex(16)
  objects = render(kind.name, name, asked['image'], pod_args(argv[1:]),
                   namespace, exec_properties, asked.get('resources'), nonce,
                   record_path, service_account)
  job = takeover.reuse_or_clear(cluster, name, model_uri, objects, owner,
                                log)
  try:
    if job is None:
      job = takeover.create(cluster, objects, model_uri, owner, log)
    final = follow(cluster, name, job, log)
  except StepJobError:
    takeover.remove(cluster, name)  # Pods that never came, a lost watch.
    raise
  except PreemptedError as e:
    takeover.remove(cluster, name)
    raise PreemptedError(
        f'SIGTERM to the step (the run cancelled, or its pod deleted): the '
        f'{kind.name} {name} it launched was deleted, and its pods stop at '
        'a step and save it. Expected the step to end with its job. '
        f'Received: SIGTERM. Run the pipeline again: the step resumes from '
        f'the checkpoint in the ModelRun artifact ({model_run_uri}).',
        reached=getattr(e, 'reached', '')) from e
  annotations = final['metadata'].get('annotations', {})
  state, reason, message = kind.ended(final)
  if state != 'done':
    pod, lines = cluster.failing_pod_log(name)
    takeover.remove(cluster, name)
    raise StepJobError(
        f'The {kind.name} {name} that trained the step on '
        f'{most_workers(exec_properties)} workers failed: {reason}: '
        f'{message}. Expected it to complete (the chief publishes the '
        f'model). Received: condition Failed. Nothing was published. '
        + (f"The last lines of pod {pod}'s log:\n{lines}\n" if pod else
           'No pod of it failed (see its events: kubectl describe '
           f'{kind.name.lower()} {name}).\n')
        + 'Fix what the log says and run the pipeline again; a restarted '
        'run resumes from the checkpoint in the ModelRun artifact.')
  record = read_record(record_path, name,
                       annotations.get(NONCE_ANNOTATION, nonce), model_uri)
  takeover.remove(cluster, name)
  return record
