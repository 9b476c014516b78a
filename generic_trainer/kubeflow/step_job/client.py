"""The Kubernetes calls the step makes for its job (`Cluster`: exactly
the kind's `job_kind.JobKind.api_calls`, which `rbac` grants), the client
of the step's pod's service account (`in_cluster`), and the clear error
of a call the API server refuses (`refused`)."""

import json
import os
from typing import Any, Dict, List, Optional, Tuple

from generic_trainer.errors import StepJobError
from generic_trainer.keys import SERVICE_ACCOUNT_DIR
from generic_trainer.kubeflow.job_kind import JobKind
from generic_trainer.system.lazy import k8s_client
from generic_trainer.system.lazy import k8s_config
from generic_trainer.system.lazy import k8s_watch

WATCH_TIMEOUT_S = 60
LOG_LINES = 30
# The 404 of a path the API server does not serve (a CRD not installed),
# not of an object (apimachinery's errors.go, NewGenericServerResponse).
_NOT_SERVED = 'the server could not find the requested resource'


class Cluster:
  """The Kubernetes calls the step makes for a job of `kind`
  (`kind.api_calls`), through the `kubernetes` client."""

  def __init__(self, api_client, namespace: str, kind: JobKind):
    self.namespace, self.kind = namespace, kind
    self.custom = k8s_client.CustomObjectsApi(api_client)
    self.core = k8s_client.CoreV1Api(api_client)
    self.group, self.version = kind.api_version.split('/')

  def get(self, plural: str, name: str) -> Optional[Dict[str, Any]]:
    try:
      return self.custom.get_namespaced_custom_object(
          self.group, self.version, self.namespace, plural, name)
    except Exception as e:  # pylint: disable=broad-except
      if http_status(e) == 404:
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
      if http_status(e) != 404:
        raise

  def own(self, plural: str, name: str, owner: Optional[Dict[str, Any]]
          ) -> None:
    if owner:
      self.custom.patch_namespaced_custom_object(
          self.group, self.version, self.namespace, plural, name,
          {'metadata': {'ownerReferences': [owner]}})

  def watch(self, plural: str, name: str, resource_version: str,
            timeout_s: int = WATCH_TIMEOUT_S):
    """The job's events from `resource_version` until the watch times
    out (`timeout_s`): (type, object)."""
    stream = k8s_watch.Watch().stream(
        self.custom.list_namespaced_custom_object, self.group, self.version,
        self.namespace, plural, field_selector=f'metadata.name={name}',
        resource_version=resource_version, timeout_seconds=timeout_s)
    for event in stream:
      yield event['type'], event['object']

  def pod(self, name: str) -> Optional[Dict[str, Any]]:
    """The pod `name` as the API returns it (JSON names), or None: a
    list with a field selector, the call the Role grants on pods."""
    pods = self.core.list_namespaced_pod(
        self.namespace, field_selector=f'metadata.name={name}').items
    return (self.core.api_client.sanitize_for_serialization(pods[0])
            if pods else None)

  def pods_started(self, name: str) -> Tuple[bool, List[str]]:
    """Whether a container of a pod of job `name` has started (is running
    or has run), and, if none has, why each pod waits: its container's
    waiting reason and message as the kubelet writes them (ErrImagePull,
    ImagePullBackOff, CreateContainerConfigError, ...) or the scheduler's
    Unschedulable condition."""
    pods = self.core.list_namespaced_pod(
        self.namespace, label_selector=f'{self.kind.pod_selector}={name}'
    ).items
    why = []
    for pod in pods:
      status = pod.status
      statuses = (status.container_statuses or ()) if status else ()
      if any(s.state and (s.state.running or s.state.terminated) or (
          s.last_state and s.last_state.terminated) for s in statuses):
        return True, []
      for s in statuses:
        waiting = s.state and s.state.waiting
        if waiting and waiting.reason not in _STARTING:
          why.append(f'pod {pod.metadata.name}: {waiting.reason}: '
                     f'{waiting.message or ""}'.rstrip(': '))
      for c in (status.conditions or ()) if status else ():
        if c.type == 'PodScheduled' and c.status == 'False' and c.reason:
          why.append(f'pod {pod.metadata.name}: {c.reason}: '
                     f'{c.message or ""}'.rstrip(': '))
    return False, why

  def warnings(self, name: str) -> List[str]:
    """The Warning events of job `name` and of the objects its operator
    made for it (named `name-...`: the JobSet's Jobs, the pods), the
    latest of each reason and object first: the Job controller's
    FailedCreate ("Error creating: ..." when Pod Security, a quota or a
    missing service account refuses a pod), the kubelet's Failed pulls."""
    events = self.core.list_namespaced_event(self.namespace).items
    seen, found = set(), []
    for event in sorted(events, key=_event_time, reverse=True):
      obj = event.involved_object
      if event.type != 'Warning' or not obj or not (
          obj.name == name or (obj.name or '').startswith(name + '-')):
        continue
      key = (obj.kind, obj.name, event.reason)
      if key not in seen:
        seen.add(key)
        found.append(f'{obj.kind} {obj.name}: {event.reason}: '
                     f'{event.message}')
    return found

  def failing_pod_log(self, name: str) -> Tuple[str, str]:
    """The pod of job `name` that failed last, and its log's last lines;
    ('', '') when none failed or the log cannot be read."""
    pods = self.core.list_namespaced_pod(
        self.namespace, label_selector=f'{self.kind.pod_selector}={name}'
    ).items
    failed = [(_finished_at(p), p.metadata.name) for p in pods
              if _failed(p)]
    if not failed:
      return '', ''
    pod = max(failed)[1]
    try:
      return pod, self.core.read_namespaced_pod_log(
          pod, self.namespace, container=self.kind.container,
          tail_lines=LOG_LINES)
    except Exception as e:  # pylint: disable=broad-except
      return pod, f'(its log could not be read: {e})'


def http_status(error: Exception) -> Optional[int]:
  """The HTTP status of the API's refusal `error`, else None."""
  return getattr(error, 'status', None)


def _failed(pod) -> bool:
  if pod.status is None:
    return False
  if pod.status.phase == 'Failed':
    return True
  return any(s.state and s.state.terminated and s.state.terminated.exit_code
             for s in pod.status.container_statuses or ())


# The kubelet's waiting reasons of a container on its way to start
# (pkg/kubelet/kubelet_pods.go, kuberuntime): not a failure.
_STARTING = ('ContainerCreating', 'PodInitializing')


def _event_time(event) -> str:
  return str(event.last_timestamp or event.event_time or
             event.metadata.creation_timestamp or '')


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


def refused(e, kind: JobKind, namespace: str) -> Exception:
  """The clear error of an API refusal, or `e` itself."""
  message = _api_message(e)
  if e.status == 404 and message == _NOT_SERVED:
    return StepJobError(
        f'The cluster serves no {kind.name} API ({kind.api_version}): '
        f'{kind.operator} is not installed. Expected it, since the step '
        f'launches a {kind.name} for its workers. Received: 404 '
        f'"{message}". Install it, or compile with --step-job TFJob (the '
        'Training Operator) or --step-job none (the workers train in the '
        'step\'s pod).')
  if e.status == 401 or (e.status == 403 and ' cannot ' in message):
    return StepJobError(
        f"The Kubernetes API refused a call of the step's {kind.name} "
        f'({e.status} {e.reason}): {message}. Expected the step\'s '
        'service account to be granted the Role the step needs (create, '
        f'read, watch, take over and delete its {kind.name}; list its pods '
        'and read their logs). Received: the refusal above. Apply it: '
        'python -m generic_trainer.kubeflow.step_job rbac SERVICE_ACCOUNT '
        f'{namespace} {kind.name} | kubectl apply -f - (the run\'s service '
        'account: default-editor in a profile\'s namespace of multi-user '
        'Kubeflow, pipeline-runner in standalone KFP).')
  if e.status in (400, 403, 409, 422):
    return StepJobError(
        f'The Kubernetes API refused the step\'s {kind.name} ({e.status} '
        f'{e.reason}): {message}. Expected it to accept the job the step '
        'renders. Received: the refusal above, of the job object itself (an '
        'admission webhook or a policy on it, or a quota on the number of '
        'such objects; a quota on cpu, memory or GPUs and Pod Security act '
        'on its pods, which the step names when they do not start). Fix '
        'what it names and run the pipeline again.')
  return e


def _api_message(error) -> str:
  try:
    return json.loads(error.body).get('message') or str(error.body)
  except (TypeError, ValueError, AttributeError):
    return str(getattr(error, 'body', '') or error)
