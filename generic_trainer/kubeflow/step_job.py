"""A Kubeflow pipeline step that trains on several pods: it launches a
TrainJob (or a TFJob) for them, follows it to its end, and takes its model.

Open-source Kubeflow Pipelines runs a step as one pod. When the compiled
GenericTrainer step asks for several workers (`compile.compile_pipeline`
puts `keys.STEP_JOB_ENV` in its container: the job's kind, the image and
the resources, which the step cannot know at run time), the step, in its
pod and with its pod's service account (in-cluster configuration, the
`kubernetes` client), does this instead of training itself (`run`):

  1. renders the job from what the step was started with: TFX's KFP
     entrypoint and its own arguments (the ExecutorInput, with the
     executor-output file moved into each pod's /tmp), the component's
     `num_workers` (a range's most), `max_restarts` and `pod_settings`
     (`trainjob.render`, `tfjob.render`). Its name is derived from the step's
     Model artifact URI, so every attempt of the step names the same job;
  2. finds a job of an earlier attempt of the step by that name: one of
     ours (our label and the same Model URI) with the same spec, still
     running or complete, is reused; one that failed or differs is deleted
     (foreground: its pods are gone first) and made again; a job of that
     name that is not ours is neither used nor deleted: the step fails and
     says so. Each new job is owned by the step's pod (`ownerReferences`,
     from KFP's `KFP_POD_NAME` and `KFP_POD_UID`), so Kubernetes removes it
     with the pod whatever ends the step;
  3. follows it (a watch from the resource version it read, read again
     after an expired one) to its end, logging the progress the chief
     reports (`loop.handlers.trainjob_progress`) and the restarts:
       - complete: the chief has trained, validated and published into the
         step's Model artifact, and written what it attached to the output
         artifacts to `keys.STEP_JOB_RECORD_ENV`'s file; the step checks
         the record names this job and the SavedModel is there, and takes
         the custom properties: TFX's entrypoint then writes the
         executor-output file, and Evaluator and Pusher take the model;
       - failed: StepJobError with the job's reason and the last lines of
         the failing pod's log; nothing is published;
       - SIGTERM to the step (the run cancelled): the job is deleted (its
         pods get SIGTERM and save their step, as a preempted training
         does) and PreemptedError says where the training resumes (the
         ModelRun artifact's checkpoint, on the next run).

A restart within the job is the job's own (TrainJob: the JobSet's
`failurePolicy.maxRestarts`; TFJob: the replicas' `OnFailure` policy):
the group resumes from its last saved step.

The Kubernetes calls the step makes are `API_CALLS`, and `rbac` renders the
Role and RoleBinding that grant the step's service account exactly those.
"""

import hashlib
import json
import os
import secrets
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from absl import logging
from google.protobuf import json_format
import yaml

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import PreemptedError
from generic_trainer.errors import StepJobError
from generic_trainer.keys import MAX_RESTARTS_KEY
from generic_trainer.keys import NUM_WORKERS_KEY
from generic_trainer.keys import POD_SETTINGS_KEY
from generic_trainer.keys import STEP_JOB_ENV
from generic_trainer.keys import STEP_JOB_RECORD_ENV
from generic_trainer.kubeflow import names
from generic_trainer.kubeflow import pod_settings as pod_settings_lib
from generic_trainer.kubeflow import resources as resources_lib
from generic_trainer.kubeflow import tfjob
from generic_trainer.kubeflow import trainjob
from generic_trainer.plan.settings import worker_range
from generic_trainer.system import atomic_files
from generic_trainer.system import paths
from generic_trainer.system.lazy import k8s_client
from generic_trainer.system.lazy import k8s_config
from generic_trainer.system.lazy import k8s_watch
from generic_trainer.system.lazy import tf
from generic_trainer.keys import SAVED_MODEL_FILE

TRAINJOB, TFJOB = 'TrainJob', 'TFJob'
KINDS = (TRAINJOB, TFJOB)
# Where Kubernetes mounts a pod's service account (token, CA, namespace).
SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount'
# What KFP's Argo compiler gives every executor pod (downward API:
# backend/src/v2/compiler/argocompiler/common.go, `commonEnvs`).
MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by'
MANAGED_BY = 'generic-trainer'
MODEL_URI_ANNOTATION = 'generic-trainer.tfx.dev/model-uri'
SPEC_ANNOTATION = 'generic-trainer.tfx.dev/spec-sha256'
NONCE_ANNOTATION = 'generic-trainer.tfx.dev/record-nonce'
# Where each pod's TFX entrypoint writes its executor output: its own /tmp,
# never the step's file (the step writes that one, last); the task's
# folder name is kept (TFX's entrypoint takes it as the task's id).
POD_OUTPUT_DIR = '/tmp/generic-trainer'
RECORD_NAME = 'step-job-record.json'
WATCH_TIMEOUT_S = 60
GONE_WAIT_S = 300
LOG_LINES = 30

# (API group, resource, verb) of every call the step makes, per kind:
# create, read and follow its job (watch), delete it, and take it over
# (patch its owner) when an earlier attempt made it; read the failing
# pod's log.
_PODS = (('', 'pods', 'list'), ('', 'pods/log', 'get'))
API_CALLS = {
    TRAINJOB: tuple((trainjob.API_VERSION.split('/')[0], resource, verb)
                    for resource, verbs in (
                        ('trainjobs', ('create', 'get', 'watch', 'delete',
                                       'patch')),
                        ('trainingruntimes', ('create', 'get', 'delete')))
                    for verb in verbs) + _PODS,
    TFJOB: tuple(('kubeflow.org', 'tfjobs', verb) for verb in (
        'create', 'get', 'watch', 'delete', 'patch')) + _PODS,
}
_PLURAL = {TRAINJOB: 'trainjobs', TFJOB: 'tfjobs'}
_GROUP_VERSION = {TRAINJOB: trainjob.API_VERSION, TFJOB: 'kubeflow.org/v1'}
# A TFJob's pods carry the job's name in this label (the Training
# Operator's `training.kubeflow.org/job-name`); a TrainJob's, the JobSet's.
_POD_SELECTOR = {TRAINJOB: 'jobset.sigs.k8s.io/jobset-name',
                 TFJOB: 'training.kubeflow.org/job-name'}
_CONTAINER = {TRAINJOB: trainjob.CONTAINER_NAME, TFJOB: 'tensorflow'}
# The condition types that end a job: TrainJob (Trainer v2,
# pkg/apis/trainer/v1alpha1/trainjob_types.go), TFJob (Training Operator
# v1, pkg/apis/kubeflow.org/v1/common_types.go, JobSucceeded/JobFailed).
_DONE = {TRAINJOB: ('Complete', 'Failed'), TFJOB: ('Succeeded', 'Failed')}


def to_env(kind: str, image: str,
           resources: Optional[resources_lib.Resources]) -> Dict[str, str]:
  """The variable the compile puts in the step's container: the job's
  `kind`, its `image` and every pod's `resources`."""
  check_kind(kind)
  return {'name': STEP_JOB_ENV, 'value': json.dumps({
      'kind': kind, 'image': image,
      'resources': resources.value() if resources is not None else None},
      sort_keys=True)}


def check_kind(kind: Any) -> str:
  if kind not in KINDS:
    raise InvalidArgumentError(
        f'The job a Kubeflow step launches for its workers must be one of '
        f'{KINDS}: a Kubeflow Trainer v2 TrainJob (our TrainingRuntime) or '
        f'a Training Operator v1 TFJob. Received: {kind!r}. Pass one of '
        'those.')
  return kind


def most_workers(exec_properties: Mapping[str, Any]) -> int:
  return (worker_range(exec_properties.get(NUM_WORKERS_KEY)) or (1, 1))[1]


def job_name(model_uri: str) -> str:
  """The job's name: the same for every attempt of one step (derived from
  its Model artifact URI), an RFC 1035 label that fits any node count
  `trainjob.longest_name` allows."""
  return 'gt-' + hashlib.sha256(model_uri.encode()).hexdigest()[:20]


def pod_args(argv: List[str]) -> List[str]:
  """The arguments of each pod: the step's own (TFX's KFP entrypoint
  flags), the ExecutorInput's output file moved to the pod's /tmp.

  Raises:
    StepJobError: the step was not started by TFX's KFP v2 entrypoint.
  """
  args, flag = list(argv), '--json_serialized_invocation_args'
  at = args.index(flag) + 1 if flag in args[:-1] else None
  if at is None or '--executor_class_path' not in args:
    raise StepJobError(
        "The GenericTrainer step was not started by TFX's KFP v2 entrypoint "
        f'({" ".join(tfjob.KFP_ENTRYPOINT)}), so its pods cannot be '
        'started as it was. Expected the arguments --executor_class_path '
        f'and {flag}. Received: {[a[:80] for a in argv[:6]]}. Run the '
        'pipeline compiled by generic_trainer.kubeflow.compile.')
  invocation = json.loads(args[at])
  outputs = invocation.setdefault('outputs', {})
  step_file = outputs.get('outputFile') or 'task/executor_output.json'
  outputs['outputFile'] = os.path.join(
      POD_OUTPUT_DIR, os.path.basename(os.path.dirname(step_file)) or 'task',
      os.path.basename(step_file))
  args[at] = json.dumps(invocation)
  return args


def render(kind: str, name: str, image: str, args: List[str],
           namespace: str, exec_properties: Mapping[str, Any],
           resources: Optional[Dict[str, Any]], nonce: str,
           record_path: str) -> Dict[str, Dict[str, Any]]:
  """The job's objects: {'trainjob': ..., 'runtime': ...} or
  {'tfjob': ...}, labelled ours, with the spec's digest and the record's
  nonce in their annotations."""
  settings = pod_settings_lib.from_json(exec_properties.get(POD_SETTINGS_KEY))
  env = {STEP_JOB_RECORD_ENV: json.dumps({'path': record_path,
                                          'job': name, 'nonce': nonce})}
  common = dict(image=image, command=list(tfjob.KFP_ENTRYPOINT), args=args,
                namespace=namespace,
                resources=resources_lib.from_value(resources),
                pod_settings=settings)
  restarts = exec_properties.get(MAX_RESTARTS_KEY)
  workers = most_workers(exec_properties)

  def objects_with(env):
    if kind == TRAINJOB:
      return trainjob.render(name, num_nodes=workers, max_restarts=restarts,
                             env=env, **common)
    return {'tfjob': tfjob.render(
        name, num_workers=workers, env=env,
        **tfjob.restart_settings(restarts, workers), **common)}
  # The digest leaves out the record's nonce, which each attempt draws.
  digest = spec_digest(objects_with({STEP_JOB_RECORD_ENV: record_path}))
  objects = objects_with(env)
  for manifest in objects.values():
    metadata = manifest['metadata']
    metadata.setdefault('labels', {})[MANAGED_BY_LABEL] = MANAGED_BY
    metadata.setdefault('annotations', {}).update({
        SPEC_ANNOTATION: digest, NONCE_ANNOTATION: nonce})
  return objects


def spec_digest(objects: Mapping[str, Dict[str, Any]]) -> str:
  """What identifies a job's spec across the step's attempts."""
  return hashlib.sha256(json.dumps(dict(objects), sort_keys=True).encode()
                        ).hexdigest()


class Cluster:
  """The Kubernetes calls the step makes (`API_CALLS`), through the
  `kubernetes` client."""

  def __init__(self, api_client, namespace: str, kind: str):
    self.namespace, self.kind = namespace, kind
    self.custom = k8s_client.CustomObjectsApi(api_client)
    self.core = k8s_client.CoreV1Api(api_client)
    self.group, self.version = _GROUP_VERSION[kind].split('/')

  def get(self, plural: str, name: str) -> Optional[Dict[str, Any]]:
    try:
      return self.custom.get_namespaced_custom_object(
          self.group, self.version, self.namespace, plural, name)
    except Exception as e:  # pylint: disable=broad-except
      if _status(e) == 404:
        return None
      raise

  def create(self, plural: str, body: Dict[str, Any]) -> Dict[str, Any]:
    return self.custom.create_namespaced_custom_object(
        self.group, self.version, self.namespace, plural, body)

  def delete(self, plural: str, name: str, foreground: bool) -> None:
    try:
      self.custom.delete_namespaced_custom_object(
          self.group, self.version, self.namespace, plural, name,
          body=k8s_client.V1DeleteOptions(propagation_policy=(
              'Foreground' if foreground else 'Background')))
    except Exception as e:  # pylint: disable=broad-except
      if _status(e) != 404:
        raise

  def own(self, plural: str, name: str, owner: Optional[Dict[str, Any]]
          ) -> None:
    if owner:
      self.custom.patch_namespaced_custom_object(
          self.group, self.version, self.namespace, plural, name,
          {'metadata': {'ownerReferences': [owner]}})

  def watch(self, plural: str, name: str, resource_version: str):
    """The job's events from `resource_version` until the watch times
    out: (type, object)."""
    stream = k8s_watch.Watch().stream(
        self.custom.list_namespaced_custom_object, self.group, self.version,
        self.namespace, plural, field_selector=f'metadata.name={name}',
        resource_version=resource_version, timeout_seconds=WATCH_TIMEOUT_S)
    for event in stream:
      yield event['type'], event['object']

  def failing_pod_log(self, name: str) -> Tuple[str, str]:
    """The pod of job `name` that failed last, and its log's last lines;
    ('', '') when none failed or the log cannot be read."""
    pods = self.core.list_namespaced_pod(
        self.namespace, label_selector=f'{_POD_SELECTOR[self.kind]}={name}'
    ).items
    failed = [(_finished_at(p), p.metadata.name) for p in pods
              if _failed(p)]
    if not failed:
      return '', ''
    pod = max(failed)[1]
    try:
      return pod, self.core.read_namespaced_pod_log(
          pod, self.namespace, container=_CONTAINER[self.kind],
          tail_lines=LOG_LINES)
    except Exception as e:  # pylint: disable=broad-except
      return pod, f'(its log could not be read: {e})'


def _status(error: Exception) -> Optional[int]:
  return getattr(error, 'status', None)


def _failed(pod) -> bool:
  if pod.status is None:
    return False
  if pod.status.phase == 'Failed':
    return True
  return any(s.state and s.state.terminated and s.state.terminated.exit_code
             for s in pod.status.container_statuses or ())


def _finished_at(pod) -> str:
  times = [str(s.state.terminated.finished_at)
           for s in (pod.status.container_statuses or ())
           if s.state and s.state.terminated]
  return max(times) if times else ''


def in_cluster(namespace_file: str = os.path.join(SERVICE_ACCOUNT_DIR,
                                                  'namespace')):
  """The `kubernetes` client of this pod's service account, and its
  namespace.

  Raises:
    StepJobError: this process is not in a Kubernetes pod with a service
      account token.
  """
  try:
    k8s_config.load_incluster_config()
    with open(namespace_file) as f:
      namespace = f.read().strip()
  except (k8s_config.ConfigException, OSError) as e:
    raise StepJobError(
        'The GenericTrainer step asks for several workers on Kubeflow, so '
        'it launches a job for them through the Kubernetes API, from its '
        f'pod; but this process is not in one with a service account: {e}. '
        'Expected KUBERNETES_SERVICE_HOST and a token at '
        f'{SERVICE_ACCOUNT_DIR}. Received: neither usable. Run the '
        'compiled pipeline on Kubeflow Pipelines, with automountServiceAccountToken '
        'left on for the step, or compile for kfp-local or vertex, which '
        'launch no job.') from e
  return k8s_client.ApiClient(), namespace


def run(asked: Mapping[str, Any], exec_properties: Mapping[str, Any],
        model_uri: str, model_run_uri: str, argv: List[str],
        owner: Optional[Dict[str, str]], api_client=None,
        namespace: Optional[str] = None,
        log: Callable[[str], None] = logging.info) -> Dict[str, Any]:
  """Launches (or takes over) the step's job, follows it to its end and
  returns the chief's record (see the module). `owner` is the owner
  reference to the step's pod (`plan.cluster.KubeflowStep.owner`), or
  None.

  Raises:
    StepJobError: the job failed (its reason and the failing pod's log),
      was deleted by someone else, its name is taken by an object that is
      not ours, or the step's service account may not make a call.
    PreemptedError: SIGTERM to the step: the job was deleted.
  """
  kind = check_kind(asked['kind'])
  if api_client is None:
    api_client, namespace = in_cluster()
  try:
    return _run(kind, asked, exec_properties, model_uri, model_run_uri,
                argv, owner, api_client, namespace, log)
  except k8s_client.exceptions.ApiException as e:
    raise _refused(e, kind, namespace) from e


# The 404 of a path the API server does not serve (a CRD not installed),
# not of an object (apimachinery's errors.go, NewGenericServerResponse).
_NOT_SERVED = 'the server could not find the requested resource'
_OPERATOR = {TRAINJOB: ('Kubeflow Trainer v2 (2.2 or later; its JobSet '
                        'comes with it)', 'trainer.kubeflow.org/v1alpha1'),
             TFJOB: ('the Kubeflow Training Operator v1', 'kubeflow.org/v1')}


def _refused(e, kind: str, namespace: str) -> Exception:
  """The clear error of an API refusal, or `e` itself."""
  message = _api_message(e)
  if e.status == 404 and message == _NOT_SERVED:
    operator, api = _OPERATOR[kind]
    return StepJobError(
        f'The cluster serves no {kind} API ({api}): {operator} is not '
        'installed. Expected it, since the step launches a '
        f'{kind} for its workers. Received: 404 "{message}". Install it, '
        'or compile with --step-job TFJob (the Training Operator) or '
        '--step-job none (the workers train in the step\'s pod).')
  if e.status == 401 or (e.status == 403 and ' cannot ' in message):
    return StepJobError(
        f"The Kubernetes API refused a call of the step's {kind} "
        f'({e.status} {e.reason}): {message}. Expected the step\'s '
        'service account to be granted the Role the step needs (create, '
        f'read, watch, take over and delete its {kind}; list its pods and '
        'read their logs). Received: the refusal above. Apply it: python -m '
        'generic_trainer.kubeflow.step_job rbac SERVICE_ACCOUNT '
        f'{namespace} {kind} | kubectl apply -f - (the run\'s service '
        "account, KFP's pipeline-runner by default).")
  if e.status in (400, 403, 409, 422):
    return StepJobError(
        f'The Kubernetes API refused the step\'s {kind} ({e.status} '
        f'{e.reason}): {message}. Expected it to accept the job the step '
        'renders. Received: the refusal above (an admission webhook, a '
        'quota or a policy of the cluster). Fix what it names (a quota: '
        'fewer workers or smaller resources) and run the pipeline again.')
  return e


def _api_message(error) -> str:
  try:
    return json.loads(error.body).get('message') or str(error.body)
  except (TypeError, ValueError, AttributeError):
    return str(getattr(error, 'body', '') or error)


def _run(kind, asked, exec_properties, model_uri, model_run_uri, argv,
         owner, api_client, namespace, log) -> Dict[str, Any]:
  cluster = Cluster(api_client, namespace, kind)
  name = job_name(model_uri)
  plural = _PLURAL[kind]
  record_path = os.path.join(model_run_uri, RECORD_NAME)
  nonce = secrets.token_hex(16)
  objects = render(kind, name, asked['image'], pod_args(argv[1:]), namespace,
                   exec_properties, asked.get('resources'), nonce,
                   record_path)
  job = _reuse_or_clear(cluster, plural, name, model_uri, objects, owner,
                        log)
  try:
    if job is None:
      job = _create(cluster, objects, model_uri, owner, log)
    final = _follow(cluster, plural, name, job, log)
  except PreemptedError as e:
    _remove(cluster, kind, name)
    raise PreemptedError(
        f'SIGTERM to the step (the run cancelled, or its pod deleted): the '
        f'{kind} {name} it launched was deleted, and its pods stop at a '
        'step and save it. Expected the step to end with its job. '
        f'Received: SIGTERM. Run the pipeline again: the step resumes from '
        f'the checkpoint in the ModelRun artifact ({model_run_uri}).',
        reached=getattr(e, 'reached', '')) from e
  annotations = final['metadata'].get('annotations', {})
  state, reason, message = _ended(kind, final)
  if state != 'done':
    pod, lines = cluster.failing_pod_log(name)
    _remove(cluster, kind, name)
    raise StepJobError(
        f'The {kind} {name} that trained the step on '
        f'{most_workers(exec_properties)} workers failed: {reason}: '
        f'{message}. Expected it to complete (the chief publishes the '
        f'model). Received: condition Failed. Nothing was published. '
        + (f"The last lines of pod {pod}'s log:\n{lines}\n" if pod else
           'No pod of it failed (see its events: kubectl describe '
           f'{kind.lower()} {name}).\n')
        + 'Fix what the log says and run the pipeline again; a restarted '
        'run resumes from the checkpoint in the ModelRun artifact.')
  record = read_record(record_path, name,
                       annotations.get(NONCE_ANNOTATION, nonce), model_uri)
  _remove(cluster, kind, name)
  return record


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


def _reuse_or_clear(cluster: Cluster, plural: str, name: str, model_uri: str,
                    objects: Dict[str, Dict[str, Any]],
                    owner: Optional[Dict[str, Any]],
                    log: Callable[[str], None]) -> Optional[Dict[str, Any]]:
  """The job an earlier attempt of this step made, when it can be reused
  (same spec, not failed); else None, with any such job deleted."""
  found = cluster.get(plural, name)
  if found is None:
    return None
  if not _ours(found, model_uri):
    raise _not_ours(cluster.kind, name, found)
  annotations = found['metadata'].get('annotations', {})
  state = _ended(cluster.kind, found)[0]
  same = annotations.get(SPEC_ANNOTATION) == next(iter(objects.values()))[
      'metadata']['annotations'][SPEC_ANNOTATION]
  if same and state != 'failed' and 'deletionTimestamp' not in found[
      'metadata']:
    log(f'Reusing the {cluster.kind} {name} an earlier attempt of this step '
        f'launched ({"complete" if state == "done" else "running"}).')
    if owner:
      cluster.own(plural, name, owner)
    return found
  log(f'Deleting the {cluster.kind} {name} an earlier attempt of this step '
      f'launched ({"it failed" if state == "failed" else "its spec differs"}'
      '), and waiting for its pods to end, before launching it again.')
  _remove(cluster, cluster.kind, name, foreground=True)
  deadline = time.monotonic() + GONE_WAIT_S
  while cluster.get(plural, name) is not None:
    if time.monotonic() > deadline:
      raise StepJobError(
          f'The {cluster.kind} {name} of an earlier attempt of this step '
          f'was deleted but is still there after {GONE_WAIT_S} s (its pods '
          'not yet ended, or a finalizer). Expected it gone before a new '
          f'one starts (no two groups train at once). Received: {plural} '
          f'{name} still present. Look at it (kubectl describe '
          f'{cluster.kind.lower()} {name}) and run the pipeline again.')
    time.sleep(2)
  return None


def _create(cluster: Cluster, objects: Dict[str, Dict[str, Any]],
            model_uri: str, owner: Optional[Dict[str, Any]],
            log: Callable[[str], None]) -> Dict[str, Any]:
  for manifest in objects.values():
    manifest['metadata']['annotations'][MODEL_URI_ANNOTATION] = model_uri
    if owner:
      manifest['metadata']['ownerReferences'] = [owner]
  if 'runtime' in objects:
    runtime = objects['runtime']
    runtime_name = runtime['metadata']['name']
    found = cluster.get('trainingruntimes', runtime_name)
    if found is not None:
      if not _ours(found, model_uri):
        raise _not_ours('TrainingRuntime', runtime_name, found)
      cluster.delete('trainingruntimes', runtime_name, foreground=False)
    cluster.create('trainingruntimes', runtime)
  key = 'trainjob' if 'trainjob' in objects else 'tfjob'
  job = cluster.create(_PLURAL[cluster.kind], objects[key])
  log(f'Launched the {cluster.kind} {job["metadata"]["name"]} in namespace '
      f'{cluster.namespace}: kubectl get {cluster.kind.lower()} '
      f'{job["metadata"]["name"]} -n {cluster.namespace}')
  return job


def _remove(cluster: Cluster, kind: str, name: str,
            foreground: bool = False) -> None:
  cluster.delete(_PLURAL[kind], name, foreground=foreground)
  if kind == TRAINJOB:
    cluster.delete('trainingruntimes', f'{name}-runtime', foreground=False)


def _ended(kind: str, job: Mapping[str, Any]) -> Tuple[str, str, str]:
  """('done' | 'failed' | '', reason, message) from the job's conditions."""
  done, failed = _DONE[kind]
  for condition in (job.get('status') or {}).get('conditions') or ():
    if condition.get('status') != 'True':
      continue
    if condition.get('type') == failed:
      return 'failed', condition.get('reason', ''), condition.get(
          'message', '')
    if condition.get('type') == done:
      return 'done', condition.get('reason', ''), condition.get(
          'message', '')
  return '', '', ''


def _follow(cluster: Cluster, plural: str, name: str, job: Dict[str, Any],
            log: Callable[[str], None]) -> Dict[str, Any]:
  """The job at its end: watched from the version read, read again when
  the watch's version expired (410) or the watch timed out."""
  seen = _Progress(log)
  while True:
    if _ended(cluster.kind, job)[0]:
      return job
    seen.show(job)
    version = job['metadata']['resourceVersion']
    try:
      for event_type, obj in cluster.watch(plural, name, version):
        if event_type == 'ERROR':
          if obj.get('code') == 410:
            break
          raise StepJobError(
              f'Watching the {cluster.kind} {name} failed: '
              f'{obj.get("message")}. Expected its events. Received: an '
              'ERROR event. Run the pipeline again.')
        if event_type == 'DELETED':
          raise StepJobError(
              f'The {cluster.kind} {name} this step launched was deleted '
              'while it trained (by someone else: the step deletes it only '
              'when it ends). Expected it to run to its end. Received: its '
              'deletion. Nothing was published; run the pipeline again: it '
              'resumes from the checkpoint in the ModelRun artifact.')
        job = obj
        if _ended(cluster.kind, job)[0]:
          return job
        seen.show(job)
    except Exception as e:  # pylint: disable=broad-except
      if _status(e) != 410:
        raise
    job = cluster.get(plural, name)
    if job is None:
      raise StepJobError(
          f'The {cluster.kind} {name} this step launched is gone (deleted '
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


def write_record(value: Optional[str],
                 outputs: Mapping[str, List[Any]]) -> None:
  """In the job's chief, after it published: the custom properties it
  attached to each output artifact, for the step (`read_record`), where
  `value` says (`plan.cluster.ClusterEnvironment.step_record`, the step's
  `keys.STEP_JOB_RECORD_ENV`). Does nothing outside a step's job (None)."""
  if not value:
    return
  where = json.loads(value)
  record = {'job': where['job'], 'nonce': where['nonce'], 'outputs': {
      key: [{prop: json_format.MessageToDict(v) for prop, v in
             a.mlmd_artifact.custom_properties.items()} for a in artifacts]
      for key, artifacts in outputs.items()}}
  tf.io.gfile.makedirs(os.path.dirname(where['path']))
  atomic_files.write_json(where['path'], record, sort_keys=True)


def read_record(path: str, name: str, nonce: str,
                model_uri: str) -> Dict[str, Any]:
  """The chief's record of job `name` (its `nonce`), after the step checked
  that the SavedModel is in the Model artifact.

  Raises:
    StepJobError: no record of this job, or no SavedModel.
  """
  try:
    with tf.io.gfile.GFile(path) as f:
      record = json.loads(f.read())
  except (tf.errors.NotFoundError, ValueError) as e:
    record = {'error': str(e)}
  if record.get('job') != name or record.get('nonce') != nonce:
    raise StepJobError(
        f'The job {name} completed, but its chief left no record of this '
        f'job at {path} ({record.get("error") or "another job wrote it"}). '
        'Expected the record the chief writes after it published. '
        f'Received: {record.get("job")!r}. Nothing was taken; run the '
        'pipeline again.')
  serving = paths.model_dirs(model_uri)[0]
  if not tf.io.gfile.exists(os.path.join(serving, SAVED_MODEL_FILE)):
    raise StepJobError(
        f'The job {name} completed, but the step\'s Model artifact holds no '
        f'SavedModel ({serving}/{SAVED_MODEL_FILE}). Expected the chief\'s '
        'validated export there. Received: none. Nothing was taken; run the '
        'pipeline again.')
  return record


def apply_record(record: Mapping[str, Any],
                 outputs: Mapping[str, List[Any]]) -> None:
  """Puts the chief's custom properties on the step's output artifacts,
  which TFX's entrypoint then writes to the executor-output file."""
  for key, artifacts in outputs.items():
    for artifact, props in zip(artifacts, record['outputs'].get(key, ())):
      for prop, value in props.items():
        target = artifact.mlmd_artifact.custom_properties[prop]
        target.Clear()
        json_format.ParseDict(value, target)


def rbac(service_account: str, namespace: str, kind: str = TRAINJOB
         ) -> List[Dict[str, Any]]:
  """The Role and RoleBinding that let `service_account` (the step's pod's)
  make exactly the calls of `API_CALLS[kind]` in `namespace`.

  Raises:
    InvalidArgumentError: a name Kubernetes refuses, or an unknown kind.
  """
  check_kind(kind)
  names.check_subdomain('service_account', service_account,
                        "a ServiceAccount's name")
  names.check_namespace('namespace', namespace)
  role = f'generic-trainer-step-{kind.lower()}'
  binding = f'{role}-{service_account}'
  if len(binding) > names.MAX_SUBDOMAIN:
    # Cut, and told apart from another long account's by a digest.
    digest = hashlib.sha256(service_account.encode()).hexdigest()[:10]
    binding = (binding[:names.MAX_SUBDOMAIN - 11].rstrip('-.') + '-' +
               digest)
  rules: Dict[Tuple[str, str], List[str]] = {}
  for group, resource, verb in API_CALLS[kind]:
    rules.setdefault((group, resource), []).append(verb)
  return [
      {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'Role',
       'metadata': {'name': role, 'namespace': namespace,
                    'labels': {MANAGED_BY_LABEL: MANAGED_BY}},
       'rules': [{'apiGroups': [group], 'resources': [resource],
                  'verbs': verbs}
                 for (group, resource), verbs in rules.items()]},
      {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'RoleBinding',
       'metadata': {'name': binding,
                    'namespace': namespace,
                    'labels': {MANAGED_BY_LABEL: MANAGED_BY}},
       'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'Role',
                   'name': role},
       'subjects': [{'kind': 'ServiceAccount', 'name': service_account,
                     'namespace': namespace}]}]


def main(argv: Optional[List[str]] = None) -> int:
  """`python -m generic_trainer.kubeflow.step_job rbac SERVICE_ACCOUNT
  NAMESPACE [TrainJob|TFJob]`: the Role and RoleBinding, as YAML for
  `kubectl apply -f -`."""
  argv = sys.argv[1:] if argv is None else argv
  if len(argv) not in (3, 4) or argv[0] != 'rbac':
    print(main.__doc__, file=sys.stderr)
    return 2
  try:
    documents = rbac(argv[1], argv[2], *argv[3:])
  except InvalidArgumentError as e:
    print(f'step_job: {e}', file=sys.stderr)
    return 2
  print(yaml.safe_dump_all(documents, sort_keys=False), end='')
  return 0


if __name__ == '__main__':
  sys.exit(main())
