"""A strict stand-in for the Kubernetes API server, for the tests: HTTPS on
127.0.0.1, one namespace, one service account, the resources the product
uses, and what the real API server refuses, with its Status bodies.

No API server can run on this machine, so this one answers what a
kube-apiserver with Kubeflow Trainer v2.3.0's and the Training Operator
v1.9.4's CRDs (pinned in tests/schemas/) answers to the `kubernetes`
client (26.1.0). Each rule names the source it follows (kubernetes/
apiserver and kubernetes/apimachinery as mirrored here; kubernetes/
kubernetes by path where no mirror was at hand):

Serving (`KubeAPI`)
  - HTTPS only, with its own CA; the service-account folder (`token`,
    `ca.crt`, `namespace`) as the kubelet mounts it at
    /var/run/secrets/kubernetes.io/serviceaccount, so that
    `kubernetes.config.load_incluster_config()` works in a container that
    mounts it there with `KUBERNETES_SERVICE_HOST/PORT` (`environ`).
  - Authentication: `Authorization: Bearer <token>` (the scheme in any
    case, pkg/authentication/request/bearertoken/bearertoken.go; the
    in-cluster loader sends `bearer`); anything else is 401
    `Unauthorized` (apiserver pkg/endpoints/filters/authentication.go,
    `Unauthorized`: `apierrors.NewUnauthorized("Unauthorized")`).
  - Authorization: RBAC over the Role `rules` given (rbac.authorization.
    k8s.io/v1 PolicyRule: apiGroups, resources incl. `pods/log`, verbs,
    resourceNames; `*` wildcards), the verb as apiserver pkg/endpoints/
    request/requestinfo.go derives it (GET one: get; GET many: list; with
    watch=true: watch; POST: create; PUT: update; PATCH: patch; DELETE one:
    delete, many: deletecollection; a list or watch with the field
    selector `metadata.name=N` is authorized as on the name N). Refused:
    403 with pkg/endpoints/handlers/responsewriters/errors.go's message
    (`forbiddenMessage`) in apimachinery pkg/api/errors/errors.go's
    `NewForbidden`.
  - Paths as Kubernetes': /apis/{group}/{version}/namespaces/{ns}/{plural}
    [/{name}] and /api/v1/namespaces/{ns}/pods[/{name}[/log]]; any other
    path is 404 `the server could not find the requested resource`.

The store (`Store`, also the controller's in-process API)
  - create (pkg/endpoints/handlers/create.go): the body's apiVersion must
    be the path's (400 `the API version in the data (...) does not match
    the expected API version (...)`), its namespace the path's (400,
    pkg/registry/rest/meta.go `EnsureObjectNamespaceMatchesRequestNamespace`);
    system fields a client sets are wiped (rest/meta.go
    `WipeObjectMetaSystemFields`); a resourceVersion set is refused as the
    etcd3 store refuses it (`resourceVersion should not be set on objects
    to be created`, 500); a name or generateName is required (apimachinery
    pkg/api/validation/objectmeta.go, 422); generateName gets 5 characters
    as apiserver pkg/storage/names/generate.go; the kind must be the
    resource's (apiextensions-apiserver pkg/registry/customresource/
    validator.go, 422); a custom resource is checked against its pinned
    CRD (tests/crd_schema.py): unknown fields are 400 `strict decoding
    error: unknown field "..."` (apimachinery pkg/runtime/error.go, as
    create.go answers with fieldValidation=Strict), the schema's other
    refusals 422 Invalid with one cause each (errors.go `NewInvalid`).
    DELIBERATELY STRICTER: the real server's default (no fieldValidation,
    what the `kubernetes` client sends) is Warn (handlers/rest.go
    `fieldValidation`), which drops unknown fields with a warning; a field
    silently dropped is a product bug, so this one refuses them always.
    A name taken is 409 AlreadyExists. `status` is dropped when the CRD has
    the status subresource (apiextensions customresource strategy
    PrepareForCreate); uid, creationTimestamp, generation 1 and the
    resourceVersion (one counter for all objects, as etcd's revision) set.
    TrainJobs pass Trainer's validating webhook, on create and on every
    update of the object, a merge patch included (kubeflow/trainer v2.3.0
    pkg/webhooks/trainjob_webhook.go, `verbs=create;update`:
    `ValidateCreate` and `ValidateUpdate` → pkg/runtime/core/
    trainingruntime.go `ValidateObjects`): a TrainJob whose TrainingRuntime
    is absent is 403 `admission webhook "validator.trainjob.trainer.
    kubeflow.org" denied the request: ...` (apiserver pkg/admission/plugin/
    webhook/errors/statuserror.go `ToStatusErr`; controller-runtime's
    `Denied` is 403 Forbidden).
  - admission on pods (kubernetes/kubernetes, the order of the API
    server's plugins: PodSecurity, then ResourceQuota), `admit_pod`:
    * Pod Security (staging/src/k8s.io/pod-security-admission): a
      namespace labelled `pod-security.kubernetes.io/enforce` (`restricted`
      or `baseline`; `label_namespace`) refuses a pod that fails its level's
      checks, 403 `pods "<name>" is forbidden: violates PodSecurity
      "<level>:latest": <reason> (<detail>), ...` (admission/admission.go,
      `errors.NewForbidden` and policy/checks.go's aggregate, the checks in
      policy/registry.go's order). Checks, each from its policy/check_*.go:
      baseline: privileged, hostNamespaces, hostPorts, hostPathVolumes,
      capabilities_baseline, procMount; restricted adds
      allowPrivilegeEscalation, capabilities_restricted, runAsNonRoot,
      runAsUser, seccompProfile_restricted, restrictedVolumes. Init
      containers are checked as containers (visitContainers).
    * ResourceQuota (plugin/pkg/admission/resourcequota/controller.go and
      pkg/quota/v1/evaluator/core/pods.go): quotas set with `set_quota`
      (`pods`/`count/pods`, `requests.cpu`, `requests.memory`,
      `limits.cpu`, `limits.memory`, `requests.nvidia.com/gpu`) count the
      pods not Succeeded or Failed; a pod without a request or limit a
      quota tracks is 403 `failed quota: <quota>: must specify <resource>`,
      one past a quota 403 `exceeded quota: <quota>, requested: <r>=<n>,
      used: <r>=<n>, limited: <r>=<n>`.
  - get: 404 NotFound, `<plural>.<group> "<name>" not found`, details
    {name, group, kind: <plural>} (errors.go `NewNotFound`).
  - list: equality-based label selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`)
    and `metadata.name`/`metadata.namespace` field selectors; a List with
    metadata.resourceVersion. Set-based selectors are 400.
  - watch (pkg/endpoints/handlers/watch.go; pkg/storage/cacher): JSON lines
    `{"type", "object"}` in a chunked response. resourceVersion unset or
    "0": ADDED for every current object, then changes. N: the changes after
    N; N older than the kept history (`window` events; settable) is one
    ERROR event with a 410 Expired Status `too old resource version: N (M)`
    (cacher/watch_cache_history.go `GetIntervalLocked`, sent as the
    cacher's errWatcher does); N newer than the store, after 3 s, 504
    `Too large resource version: N, current: M` (apiserver pkg/storage/
    errors.go). An object that stops matching the selector is sent as
    DELETED, one that starts, as ADDED (cacher's `watchCacheEvent`
    filtering). Ends after timeoutSeconds. No bookmarks are sent.
  - delete (pkg/endpoints/handlers/delete.go, pkg/registry/generic/
    registry/store.go `Delete`): 404 when absent; DeleteOptions'
    propagationPolicy must be Foreground, Background or Orphan (422,
    apimachinery pkg/apis/meta/v1/validation `ValidateDeleteOptions`).
    Background: removed at once (no finalizers); Foreground: deletionTimestamp
    and the `foregroundDeletion` finalizer; Orphan: the `orphan` finalizer
    (store.go `deletionFinalizersForGarbageCollection`). Answer: the object
    while it is pending; once removed, a Success Status with details {name,
    group, kind: <plural>, uid} (store.go `finalizeDelete`), the Pod itself
    for pods (pod storage's ReturnDeletedObject). A pod is deleted
    gracefully (pkg/registry/core/pod/strategy.go `CheckGracefulDelete`,
    kubernetes/kubernetes): when bound to a node (spec.nodeName) and not
    Succeeded/Failed, it gets deletionTimestamp and
    deletionGracePeriodSeconds (its terminationGracePeriodSeconds, 30 by
    default) and stays until the kubelet (the controller) deletes it with
    grace 0.
  - the garbage collector (kubernetes/kubernetes pkg/controller/
    garbagecollector/garbagecollector.go), run after every change: an
    object all of whose ownerReferences name absent uids is deleted
    (Background); a Foreground owner's dependents are deleted and the owner
    removed once no dependent with blockOwnerDeletion is left; an Orphan
    owner's dependents lose their reference to it. So an owner that does
    not exist in the store makes its dependents go: a test must create the
    step's pod before the product sets it as the owner.
  - patch: `application/merge-patch+json` (RFC 7386) only; other patch
    types are 415 (handlers/patch.go). status in a patch is ignored when
    the CRD has the status subresource; metadata.resourceVersion is a
    precondition (409 Conflict, `the object has been modified; ...`);
    ownerReferences need apiVersion, kind, name and uid (objectmeta.go
    `validateOwnerReference`, 422); the result is checked against the CRD
    as on create; generation grows when the spec changes.
  - pods/log (pkg/registry/core/pod/strategy.go `LogLocation`, rest/log.go):
    404 for an unknown pod; 400 `container X is not valid for pod P`; 400
    `container "X" in pod "P" is waiting to start: ContainerCreating`
    before its log is set; `tailLines` honoured.
  - `update_status`: what a controller's status write does (bumps the
    resourceVersion, a MODIFIED event; generation unchanged).

Not modelled: update (PUT) and deletecollection (405), resourceVersion
preconditions other than a patch's, dry runs, server-side apply, chunked
lists (limit/continue), admission other than Trainer's runtime check,
Pod Security and ResourceQuota on pods (namespaces and quotas are set by
the test, not served), Pod Security's exemptions, versions other than
`latest` and audit/warn modes, and
the pinned CRDs' defaults (`crd_schema` lets defaulted fields be absent, but
they are not filled in the stored object).
"""

import collections
import copy
import datetime
import http.server
import ipaddress
import json
import os
import random
import re
import secrets
import ssl
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple
from urllib import parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import crd_schema

Resource = collections.namedtuple(
    'Resource', 'group version kind plural crd status_subresource')
RESOURCES = {
    'trainjobs': Resource('trainer.kubeflow.org', 'v1alpha1', 'TrainJob',
                          'trainjobs', crd_schema.TRAINJOB_CRD, True),
    'trainingruntimes': Resource('trainer.kubeflow.org', 'v1alpha1',
                                 'TrainingRuntime', 'trainingruntimes',
                                 crd_schema.TRAININGRUNTIME_CRD, False),
    'tfjobs': Resource('kubeflow.org', 'v1', 'TFJob', 'tfjobs',
                       crd_schema.TFJOB_CRD, True),
    'pods': Resource('', 'v1', 'Pod', 'pods', None, True),
    'events': Resource('', 'v1', 'Event', 'events', None, False),
}
FOREGROUND = 'foregroundDeletion'  # metav1.FinalizerDeleteDependents
ORPHAN = 'orphan'  # metav1.FinalizerOrphanDependents
TRAINJOB_WEBHOOK = 'validator.trainjob.trainer.kubeflow.org'
DEFAULT_WINDOW = 1000
_SYSTEM_FIELDS = ('uid', 'resourceVersion', 'generation', 'creationTimestamp',
                  'deletionTimestamp', 'deletionGracePeriodSeconds',
                  'managedFields', 'selfLink')
# apiserver pkg/storage/names/generate.go: 5 characters of these.
_ALPHANUMS = 'bcdfghjklmnpqrstvwxz2456789'


def now_rfc3339(offset_s: float = 0) -> str:
  moment = (datetime.datetime.now(datetime.timezone.utc) +
            datetime.timedelta(seconds=offset_s))
  return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def random_suffix(n: int = 5) -> str:
  return ''.join(random.choice(_ALPHANUMS) for _ in range(n))


# Status bodies: apimachinery pkg/api/errors/errors.go.


class StatusError(Exception):
  """A request the API server refuses, with its metav1.Status."""

  def __init__(self, code: int, reason: str, message: str,
               details: Optional[Dict[str, Any]] = None):
    super().__init__(message)
    self.code = code
    self.status = {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
                   'status': 'Failure', 'message': message, 'reason': reason,
                   'code': code}
    if details is not None:
      self.status['details'] = details


def _qualified(res: Resource) -> str:
  """schema.GroupResource.String(): `plural.group`, `plural` for core."""
  return f'{res.plural}.{res.group}' if res.group else res.plural


def not_found(res: Resource, name: str) -> StatusError:
  return StatusError(404, 'NotFound', f'{_qualified(res)} "{name}" not found',
                     {'name': name, 'group': res.group, 'kind': res.plural})


def already_exists(res: Resource, name: str) -> StatusError:
  return StatusError(409, 'AlreadyExists',
                     f'{_qualified(res)} "{name}" already exists',
                     {'name': name, 'group': res.group, 'kind': res.plural})


def conflict(res: Resource, name: str, why: str) -> StatusError:
  return StatusError(
      409, 'Conflict', f'Operation cannot be fulfilled on {_qualified(res)} '
      f'"{name}": {why}', {'name': name, 'group': res.group,
                           'kind': res.plural})


def bad_request(message: str) -> StatusError:
  return StatusError(400, 'BadRequest', message)


def invalid(group: str, kind: str, name: str,
            causes: List[Tuple[str, str, str]]) -> StatusError:
  """`NewInvalid`: causes are (type, field, message after the field)."""
  qualified = f'{kind}.{group}' if group else kind
  lines = [f'{field}: {message}' for _, field, message in causes]
  unique = list(dict.fromkeys(lines))
  text = unique[0] if len(unique) == 1 else f'[{", ".join(unique)}]'
  return StatusError(
      422, 'Invalid', f'{qualified} "{name}" is invalid: {text}',
      {'name': name, 'group': group, 'kind': kind,
       'causes': [{'reason': cause_type, 'message': message, 'field': field}
                  for cause_type, field, message in causes]})


def expired(message: str) -> StatusError:
  return StatusError(410, 'Expired', message)


def internal(message: str) -> StatusError:
  return StatusError(500, 'InternalError',
                     f'Internal error occurred: {message}',
                     {'causes': [{'message': message}]})


# Selectors: apimachinery pkg/labels/selector.go, pkg/fields/selector.go.


def label_matcher(text: Optional[str]) -> Callable[[Dict[str, Any]], bool]:
  """Equality-based label selectors; set-based ones are refused."""
  requirements = []
  for part in filter(None, (p.strip() for p in (text or '').split(','))):
    match = re.fullmatch(r'(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w.-]*))?',
                         part)
    if not match or (match.group(1) and match.group(3)):
      raise bad_request(f'unable to parse requirement: {part!r} (the '
                        'stand-in takes equality-based selectors only)')
    requirements.append(match.groups())

  def matches(obj):
    labels = obj.get('metadata', {}).get('labels') or {}
    for negated, key, op, value in requirements:
      if op is None:
        if (key in labels) == bool(negated):
          return False
      elif op == '!=':
        if labels.get(key) == value:
          return False
      elif labels.get(key) != value:
        return False
    return True
  return matches


def field_matcher(text: Optional[str]) -> Callable[[Dict[str, Any]], bool]:
  wanted = []
  for part in filter(None, (p.strip() for p in (text or '').split(','))):
    match = re.fullmatch(r'(metadata\.name|metadata\.namespace)\s*(==|=|!=)'
                         r'\s*(.*)', part)
    if not match:
      raise bad_request(f'"{part}" is not a known field selector: only '
                        '"metadata.name", "metadata.namespace"')
    wanted.append(match.groups())

  def matches(obj):
    for field, op, value in wanted:
      actual = obj.get('metadata', {}).get(field.split('.')[1])
      if (actual == value) == (op == '!='):
        return False
    return True
  return matches


def selected_name(field_selector: Optional[str]) -> str:
  """requestinfo.go: a list or watch with `metadata.name=N` is authorized
  as a request on N."""
  for part in (field_selector or '').split(','):
    match = re.fullmatch(r'\s*metadata\.name\s*==?\s*(.+?)\s*', part)
    if match:
      return match.group(1)
  return ''


def merge_patch(target: Any, patch: Any) -> Any:
  """RFC 7386."""
  if not isinstance(patch, dict):
    return copy.deepcopy(patch)
  result = dict(target) if isinstance(target, dict) else {}
  for key, value in patch.items():
    if value is None:
      result.pop(key, None)
    else:
      result[key] = merge_patch(result.get(key), value)
  return result


def forbidden(plural: str, name: str, why: str) -> StatusError:
  """`NewForbidden` (errors.go): `<resource> "<name>" is forbidden: ...`."""
  return StatusError(403, 'Forbidden', f'{plural} "{name}" is forbidden: {why}',
                     {'name': name, 'kind': plural})


# Pod Security admission: kubernetes/kubernetes staging/src/k8s.io/
# pod-security-admission/policy/, one function per check file, each
# returning (ForbiddenReason, ForbiddenDetail) or None.

PSA_ENFORCE = 'pod-security.kubernetes.io/enforce'


def _containers(spec):
  """visitContainers (policy/visitor.go): init containers, containers."""
  return list(spec.get('initContainers') or []) + list(
      spec.get('containers') or [])


def _named(kind, names):
  """pluralize + joinQuote (policy/helpers.go)."""
  return (f'{kind} ' if len(names) == 1 else f'{kind}s ') + ', '.join(
      f'"{n}"' for n in names)


def _sc(container):
  return container.get('securityContext') or {}


def _check_privileged(spec):  # check_privileged.go
  bad = [c['name'] for c in _containers(spec) if _sc(c).get('privileged')]
  return bad and ('privileged', f'{_named("container", bad)} must not set '
                  'securityContext.privileged=true')


def _check_host_namespaces(spec):  # check_hostNamespaces.go
  bad = [f'{f}=true' for f in ('hostNetwork', 'hostPID', 'hostIPC')
         if spec.get(f)]
  return bad and ('host namespaces', ', '.join(bad))


def _check_host_ports(spec):  # check_hostPorts.go
  ports = [str(p['hostPort']) for c in _containers(spec)
           for p in c.get('ports') or [] if p.get('hostPort')]
  bad = [c['name'] for c in _containers(spec)
         if any(p.get('hostPort') for p in c.get('ports') or [])]
  return bad and ('hostPort', f'{_named("container", bad)} uses '
                  f'{"hostPort" if len(ports) == 1 else "hostPorts"} '
                  + ', '.join(ports))


def _check_host_path(spec):  # check_hostPathVolumes.go
  bad = [v['name'] for v in spec.get('volumes') or [] if 'hostPath' in v]
  return bad and ('hostPath volumes', f'{"volume" if len(bad) == 1 else "volumes"} '
                  + ', '.join(f'"{n}"' for n in bad))


# check_capabilities_baseline.go: the container runtime's defaults.
_BASELINE_CAPABILITIES = {
    'AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL',
    'MKNOD', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID',
    'SYS_CHROOT'}


def _check_capabilities_baseline(spec):
  bad, added = [], set()
  for c in _containers(spec):
    extra = set((_sc(c).get('capabilities') or {}).get('add') or []) - (
        _BASELINE_CAPABILITIES)
    if extra:
      bad.append(c['name'])
      added |= extra
  return bad and ('non-default capabilities', f'{_named("container", bad)} '
                  'must not include ' + ', '.join(f'"{a}"' for a in sorted(
                      added)) + ' in securityContext.capabilities.add')


def _check_proc_mount(spec):  # check_procMount.go
  bad = [c['name'] for c in _containers(spec)
         if _sc(c).get('procMount', 'Default') != 'Default']
  return bad and ('procMount', f'{_named("container", bad)} must not set '
                  'securityContext.procMount to "Unmasked"')


def _check_allow_privilege_escalation(spec):  # check_allowPrivilegeEscalation.go
  bad = [c['name'] for c in _containers(spec)
         if _sc(c).get('allowPrivilegeEscalation') is not False]
  return bad and ('allowPrivilegeEscalation != false',
                  f'{_named("container", bad)} must set '
                  'securityContext.allowPrivilegeEscalation=false')


def _check_capabilities_restricted(spec):  # check_capabilities_restricted.go
  missing, adding, added = [], [], set()
  for c in _containers(spec):
    caps = _sc(c).get('capabilities')
    if caps is None:
      missing.append(c['name'])
      continue
    if 'ALL' not in (caps.get('drop') or []):
      missing.append(c['name'])
    extra = {a for a in caps.get('add') or [] if a != 'NET_BIND_SERVICE'}
    if extra:
      adding.append(c['name'])
      added |= extra
  details = []
  if missing:
    details.append(f'{_named("container", missing)} must set '
                   'securityContext.capabilities.drop=["ALL"]')
  if adding:
    details.append(f'{_named("container", adding)} must not include '
                   + ', '.join(f'"{a}"' for a in sorted(added)) +
                   ' in securityContext.capabilities.add')
  return details and ('unrestricted capabilities', '; '.join(details))


def _check_run_as_non_root(spec):  # check_runAsNonRoot.go
  setters, pod_true = [], False
  pod_value = (spec.get('securityContext') or {}).get('runAsNonRoot')
  if pod_value is False:
    setters.append('pod')
  pod_true = pod_value is True
  explicit = [c['name'] for c in _containers(spec)
              if _sc(c).get('runAsNonRoot') is False]
  implicit = [c['name'] for c in _containers(spec)
              if _sc(c).get('runAsNonRoot') is None and not pod_true]
  if explicit:
    setters.append(_named('container', explicit))
  if setters:
    return ('runAsNonRoot != true', f'{" and ".join(setters)} must not set '
            'securityContext.runAsNonRoot=false')
  return implicit and ('runAsNonRoot != true',
                       f'pod or {_named("container", implicit)} must set '
                       'securityContext.runAsNonRoot=true')


def _check_run_as_user(spec):  # check_runAsUser.go
  setters = (['pod'] if (spec.get('securityContext') or {}).get(
      'runAsUser') == 0 else []) + [
          f'container "{c["name"]}"' for c in _containers(spec)
          if _sc(c).get('runAsUser') == 0]
  return setters and ('runAsUser=0', f'{" and ".join(setters)} must not set '
                      'runAsUser=0')


def _check_seccomp_restricted(spec):  # check_seccompProfile_restricted.go
  ok = ('RuntimeDefault', 'Localhost')
  pod_type = ((spec.get('securityContext') or {}).get('seccompProfile')
              or {}).get('type')
  if pod_type is not None and pod_type not in ok:
    return ('seccompProfile', f'pod must not set securityContext.'
            f'seccompProfile.type to "{pod_type}"')
  explicit = [c['name'] for c in _containers(spec)
              if (_sc(c).get('seccompProfile') or {}).get('type') not in (
                  None, *ok)]
  if explicit:
    return ('seccompProfile', f'{_named("container", explicit)} must not set '
            'securityContext.seccompProfile.type to "Unconfined"')
  implicit = [c['name'] for c in _containers(spec)
              if not (_sc(c).get('seccompProfile') or {}).get('type')
              and pod_type is None]
  return implicit and ('seccompProfile', f'pod or {_named("container", implicit)} '
                       'must set securityContext.seccompProfile.type to '
                       '"RuntimeDefault" or "Localhost"')


# check_restrictedVolumes.go: the volume types "restricted" allows.
_RESTRICTED_VOLUMES = ('configMap', 'csi', 'downwardAPI', 'emptyDir',
                       'ephemeral', 'persistentVolumeClaim', 'projected',
                       'secret')


def _check_restricted_volumes(spec):
  bad = {}
  for v in spec.get('volumes') or []:
    kind = next((k for k in v if k != 'name'), '')
    if kind not in _RESTRICTED_VOLUMES:
      bad.setdefault(kind, []).append(v['name'])
  if not bad:
    return None
  names = [n for kinds in bad.values() for n in kinds]
  return ('restricted volume types', f'{"volume" if len(names) == 1 else "volumes"} '
          + ', '.join(f'"{n}"' for n in names) + ' use'
          + ('s' if len(names) == 1 else '') + ' restricted volume type'
          + ('' if len(bad) == 1 else 's') + ' ' + ', '.join(
              f'"{k}"' for k in sorted(bad)))


# In the order policy/registry.go evaluates them: the baseline checks,
# then (for "restricted") the restricted ones, each group in the order its
# files register (checks.go `DefaultChecks`: by file name); a restricted
# check replaces the baseline one it overrides (`OverrideCheckIDs`:
# capabilities_restricted replaces capabilities_baseline,
# restrictedVolumes hostPathVolumes).
BASELINE_CHECKS = (
    ('capabilities_baseline', _check_capabilities_baseline),
    ('hostNamespaces', _check_host_namespaces),
    ('hostPathVolumes', _check_host_path),
    ('hostPorts', _check_host_ports),
    ('privileged', _check_privileged),
    ('procMount', _check_proc_mount),
)
RESTRICTED_CHECKS = (
    ('allowPrivilegeEscalation', _check_allow_privilege_escalation),
    ('capabilities_restricted', _check_capabilities_restricted),
    ('restrictedVolumes', _check_restricted_volumes),
    ('runAsNonRoot', _check_run_as_non_root),
    ('runAsUser', _check_run_as_user),
    ('seccompProfile_restricted', _check_seccomp_restricted),
)
_OVERRIDDEN = ('capabilities_baseline', 'hostPathVolumes')


def pod_security_violations(spec: Dict[str, Any], level: str
                            ) -> List[Tuple[str, str]]:
  """(reason, detail) of each check of `level` the pod spec fails."""
  checks = BASELINE_CHECKS if level == 'baseline' else tuple(
      c for c in BASELINE_CHECKS if c[0] not in _OVERRIDDEN) + (
          RESTRICTED_CHECKS)
  failed = []
  for _, check in checks:
    result = check(spec)
    if result:
      failed.append(result)
  return failed


# ResourceQuota on pods: pkg/quota/v1/evaluator/core/pods.go.
_QUOTA_COMPUTE = ('requests.cpu', 'requests.memory', 'limits.cpu',
                  'limits.memory', 'requests.nvidia.com/gpu')
_SUFFIXES = {'m': 1e-3, 'k': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12,
             'Ki': 2 ** 10, 'Mi': 2 ** 20, 'Gi': 2 ** 30, 'Ti': 2 ** 40}


def parse_quantity(text) -> float:
  """A Kubernetes quantity ('500m', '16Gi', '2') as a number."""
  match = re.fullmatch(r'([0-9.]+)([a-zA-Z]*)', str(text))
  return float(match.group(1)) * _SUFFIXES.get(match.group(2), 1)


def format_quantity(resource: str, value: float) -> str:
  if resource in ('pods', 'count/pods') or value == int(value) and (
      'memory' not in resource):
    return str(int(value))
  if 'cpu' in resource:
    return f'{int(round(value * 1000))}m'
  for suffix in ('Gi', 'Mi', 'Ki'):
    if value % _SUFFIXES[suffix] == 0:
      return f'{int(value // _SUFFIXES[suffix])}{suffix}'
  return str(int(value))


def pod_usage(spec: Dict[str, Any]) -> Dict[str, float]:
  """What a pod counts against quotas: one pod, and its containers'
  requests and limits (a limit stands for a missing request, as the API
  server's defaulting does)."""
  usage = {'pods': 1.0, 'count/pods': 1.0}
  for c in spec.get('containers') or []:
    resources = c.get('resources') or {}
    limits, requests = resources.get('limits') or {}, resources.get(
        'requests') or {}
    for name in ('cpu', 'memory', 'nvidia.com/gpu'):
      request = requests.get(name, limits.get(name))
      if request is not None:
        key = f'requests.{name}'
        usage[key] = usage.get(key, 0) + parse_quantity(request)
      if name in limits and name != 'nvidia.com/gpu':
        key = f'limits.{name}'
        usage[key] = usage.get(key, 0) + parse_quantity(limits[name])
  return usage


Event = collections.namedtuple('Event', 'rv plural namespace type obj old')


class Store:
  """The objects, the event history and the garbage collector; what the
  controller writes through in-process (module docstring)."""

  def __init__(self, window: int = DEFAULT_WINDOW, webhooks: bool = True):
    self._cond = threading.Condition(threading.RLock())
    self._objects: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    self._events: collections.deque = collections.deque()
    self._window = window
    self._dropped = False
    self._rv = 1000
    self._collecting = False
    self.webhooks = webhooks
    self.logs: Dict[Tuple[str, str], Any] = {}
    self.namespace_labels: Dict[str, Dict[str, str]] = {}
    self.quotas: Dict[str, Dict[str, Dict[str, str]]] = {}

  # Admission on pods (module docstring).

  def label_namespace(self, namespace: str, labels: Dict[str, str]) -> None:
    """The namespace's labels, e.g. {'pod-security.kubernetes.io/enforce':
    'restricted'}."""
    self.namespace_labels[namespace] = dict(labels)

  def set_quota(self, namespace: str, name: str,
                hard: Dict[str, str]) -> None:
    """A ResourceQuota `name` of `namespace` with `spec.hard`."""
    self.quotas.setdefault(namespace, {})[name] = dict(hard)

  def admit_pod(self, namespace: str, pod: Dict[str, Any]) -> None:
    """PodSecurity, then ResourceQuota (module docstring)."""
    name = pod['metadata'].get('name', '')
    level = self.namespace_labels.get(namespace, {}).get(PSA_ENFORCE)
    if level in ('baseline', 'restricted'):
      failed = pod_security_violations(pod.get('spec') or {}, level)
      if failed:
        raise forbidden('pods', name, f'violates PodSecurity "{level}:latest": '
                        + ', '.join(f'{r} ({d})' for r, d in failed))
    for quota, hard in sorted(self.quotas.get(namespace, {}).items()):
      self._check_quota(namespace, name, pod, quota, hard)

  def _check_quota(self, namespace, name, pod, quota, hard):
    requested = pod_usage(pod.get('spec') or {})
    missing = [r for r in sorted(hard) if r in _QUOTA_COMPUTE and
               r not in requested]
    if missing:
      raise forbidden('pods', name, f'failed quota: {quota}: must specify '
                      + ','.join(missing))
    used = {}
    for (plural, ns, _), other in self._objects.items():
      if plural == 'pods' and ns == namespace and (
          other.get('status') or {}).get('phase') not in ('Succeeded',
                                                         'Failed'):
        for r, v in pod_usage(other.get('spec') or {}).items():
          used[r] = used.get(r, 0) + v
    over = [r for r in sorted(hard) if r in requested and
            used.get(r, 0) + requested[r] > parse_quantity(hard[r])]
    if over:
      fmt = lambda values: ','.join(
          f'{r}={format_quantity(r, values.get(r, 0))}' for r in over)
      raise forbidden(
          'pods', name, f'exceeded quota: {quota}, requested: '
          f'{fmt(requested)}, used: {fmt(used)}, limited: '
          + ','.join(f'{r}={hard[r]}' for r in over))

  # History.

  @property
  def resource_version(self) -> int:
    return self._rv

  def set_window(self, events: int) -> None:
    """Keeps at most `events` (>= 1) events; the older ones are dropped, and
    a watch from before them is 410 Gone."""
    assert events >= 1, events
    with self._cond:
      self._window = events
      self._trim()

  def _trim(self):
    while len(self._events) > self._window:
      self._events.popleft()
      self._dropped = True

  def _emit(self, event_type, res, obj, old=None):
    self._rv += 1
    obj['metadata']['resourceVersion'] = str(self._rv)
    self._events.append(Event(self._rv, res.plural,
                              obj['metadata']['namespace'], event_type,
                              copy.deepcopy(obj), copy.deepcopy(old)))
    self._trim()
    self._cond.notify_all()

  # Reads.

  def get(self, plural: str, namespace: str, name: str) -> Dict[str, Any]:
    res = RESOURCES[plural]
    with self._cond:
      obj = self._objects.get((plural, namespace, name))
      if obj is None:
        raise not_found(res, name)
      return copy.deepcopy(obj)

  def list(self, plural: str, namespace: str,
           label_selector: Optional[str] = None,
           field_selector: Optional[str] = None) -> Dict[str, Any]:
    res = RESOURCES[plural]
    labels, fields = label_matcher(label_selector), field_matcher(
        field_selector)
    with self._cond:
      items = [copy.deepcopy(o) for (p, ns, _), o in sorted(
          self._objects.items()) if p == plural and ns == namespace and
               labels(o) and fields(o)]
      return {'kind': f'{res.kind}List',
              'apiVersion': (f'{res.group}/{res.version}' if res.group
                             else res.version),
              'metadata': {'resourceVersion': str(self._rv)},
              'items': items}

  def find(self, uid: str) -> Optional[Dict[str, Any]]:
    with self._cond:
      for obj in self._objects.values():
        if obj['metadata']['uid'] == uid:
          return copy.deepcopy(obj)
    return None

  # Writes.

  def create(self, plural: str, namespace: str, body: Dict[str, Any]
             ) -> Dict[str, Any]:
    res = RESOURCES[plural]
    obj = copy.deepcopy(body)
    expected = f'{res.group}/{res.version}' if res.group else res.version
    if obj.get('apiVersion') != expected:
      raise bad_request(
          f'the API version in the data ({obj.get("apiVersion", "")}) does '
          f'not match the expected API version ({expected})')
    meta = obj.setdefault('metadata', {})
    if not isinstance(meta, dict):
      raise bad_request('metadata: expected an object')
    for field in _SYSTEM_FIELDS:  # rest/meta.go WipeObjectMetaSystemFields.
      if field not in ('resourceVersion', 'generation'):
        meta.pop(field, None)
    if meta.get('namespace', namespace) != namespace:
      raise bad_request('the namespace of the provided object does not '
                        'match the namespace sent on the request')
    meta['namespace'] = namespace
    if meta.get('resourceVersion'):
      raise internal('resourceVersion should not be set on objects to be '
                     'created')
    if not meta.get('name') and not meta.get('generateName'):
      raise invalid(res.group, res.kind, '', [
          ('FieldValueRequired', 'metadata.name',
           'Required value: name or generateName is required')])
    if not meta.get('name'):
      meta['name'] = meta['generateName'] + random_suffix()
    name = meta['name']
    if obj.get('kind') != res.kind:
      raise invalid(res.group, res.kind, name, [
          ('FieldValueInvalid', 'kind',
           f'Invalid value: "{obj.get("kind")}": must be {res.kind}')])
    if res.status_subresource and res.crd:
      obj.pop('status', None)
    self._validate(res, obj)
    with self._cond:
      if plural == 'pods':
        self.admit_pod(namespace, obj)
      if self.webhooks and plural == 'trainjobs':
        self._trainjob_webhook(obj)
      key = (plural, namespace, name)
      if key in self._objects:
        raise already_exists(res, name)
      meta['uid'] = str(uuid.uuid4())
      meta['creationTimestamp'] = now_rfc3339()
      meta['generation'] = 1
      self._objects[key] = obj
      self._emit('ADDED', res, obj)
      result = copy.deepcopy(obj)
      self._collect()
      return result

  def _validate(self, res: Resource, obj: Dict[str, Any]) -> None:
    """The CRD's schema: unknown fields (400), the rest (422)."""
    if not res.crd:
      return
    obj = dict(obj, metadata={  # The fields the server sets are not checked.
        k: v for k, v in obj['metadata'].items() if k not in _SYSTEM_FIELDS})
    unknown, causes = [], []
    for line in crd_schema.errors(obj, res.crd):
      path, _, message = line.partition(': ')
      extra = re.match(r'Additional properties are not allowed \((.*) '
                       r'(?:was|were) unexpected\)', message)
      if extra:
        prefix = '' if path == '(root)' else path + '.'
        unknown += [f'unknown field "{prefix}{n}"'
                    for n in re.findall(r"'([^']*)'", extra.group(1))]
      elif path == '(root)':  # A CEL rule on the root: field.Invalid(nil).
        causes.append(('FieldValueInvalid', '<nil>',
                       f'Invalid value: "object": {message}'))
      else:
        causes.append(('FieldValueInvalid', path, f'Invalid value: {message}'))
    if unknown:
      raise bad_request(
          f'{res.kind} in version "{res.version}" cannot be handled as a '
          f'{res.kind}: strict decoding error: {", ".join(unknown)}')
    if causes:
      raise invalid(res.group, res.kind, obj['metadata'].get('name', ''),
                    causes)

  def _trainjob_webhook(self, obj):
    ref = obj.get('spec', {}).get('runtimeRef', {})
    kind = ref.get('kind', 'ClusterTrainingRuntime')
    if kind != 'TrainingRuntime':
      return  # A cluster runtime: cluster-scoped, not served here.
    ns, name = obj['metadata']['namespace'], ref.get('name')
    if ('trainingruntimes', ns, name) in self._objects:
      return
    runtime = RESOURCES['trainingruntimes']
    raise StatusError(
        403, 'Forbidden',
        f'admission webhook "{TRAINJOB_WEBHOOK}" denied the request: '
        f'spec.runtimeRef: Invalid value: {json.dumps(ref)}: '
        f'{_qualified(runtime)} "{name}" not found: specified '
        'trainingRuntime must be created before the TrainJob is created')

  def update_status(self, plural: str, namespace: str, name: str,
                    status: Dict[str, Any]) -> Dict[str, Any]:
    """A controller's status write."""
    return self.modify(plural, namespace, name,
                       lambda o: o.__setitem__('status',
                                               copy.deepcopy(status)))

  def modify(self, plural: str, namespace: str, name: str,
             change: Callable[[Dict[str, Any]], None]) -> Dict[str, Any]:
    """Applies `change` to the stored object (in place): MODIFIED."""
    res = RESOURCES[plural]
    with self._cond:
      obj = self._objects.get((plural, namespace, name))
      if obj is None:
        raise not_found(res, name)
      old = copy.deepcopy(obj)
      change(obj)
      self._emit('MODIFIED', res, obj, old)
      result = copy.deepcopy(obj)
      self._collect()
      return result

  def patch(self, plural: str, namespace: str, name: str,
            patch: Dict[str, Any]) -> Dict[str, Any]:
    """A merge patch (module docstring)."""
    res = RESOURCES[plural]
    if not isinstance(patch, dict):
      raise bad_request('a merge patch must be a JSON object')
    with self._cond:
      current = self.get(plural, namespace, name)
      wanted_rv = (patch.get('metadata') or {}).get('resourceVersion')
      if wanted_rv and wanted_rv != current['metadata']['resourceVersion']:
        raise conflict(res, name, 'the object has been modified; please '
                       'apply your changes to the latest version and try '
                       'again')
      new = merge_patch(current, patch)
      meta = new.setdefault('metadata', {})
      for field in ('name', 'namespace', 'uid', 'creationTimestamp',
                    'generation', 'resourceVersion', 'deletionTimestamp'):
        if field in current['metadata']:
          meta[field] = current['metadata'][field]
      if res.status_subresource:
        new.pop('status', None)
        if 'status' in current:
          new['status'] = current['status']
      causes = []
      for i, ref in enumerate(meta.get('ownerReferences') or []):
        for field, what in (('apiVersion', 'version'), ('kind', 'kind'),
                            ('name', 'name'), ('uid', 'uid')):
          if not (isinstance(ref, dict) and ref.get(field)):
            causes.append(('FieldValueInvalid',
                           f'metadata.ownerReferences[{i}].{field}',
                           f'Invalid value: "": {what} must not be empty'))
      if causes:
        raise invalid(res.group, res.kind, name, causes)
      checked = {k: v for k, v in new.items() if k != 'status'} if (
          res.status_subresource) else new
      self._validate(res, checked)
      if self.webhooks and plural == 'trainjobs':
        self._trainjob_webhook(new)  # ValidateUpdate.
      if new.get('spec') != current.get('spec'):
        meta['generation'] = current['metadata']['generation'] + 1

      def replace(obj):
        obj.clear()
        obj.update(new)
      return self.modify(plural, namespace, name, replace)

  def delete(self, plural: str, namespace: str, name: str,
             propagation: Optional[str] = None,
             grace_period_seconds: Optional[int] = None
             ) -> Dict[str, Any]:
    """The DELETE answer: the object while its deletion is pending, else a
    Success Status (the Pod itself for pods)."""
    res = RESOURCES[plural]
    if propagation not in (None, 'Foreground', 'Background', 'Orphan'):
      raise invalid('meta.k8s.io', 'DeleteOptions', '', [(
          'FieldValueNotSupported', 'propagationPolicy',
          f'Unsupported value: "{propagation}": supported values: '
          '"Foreground", "Background", "Orphan"')])
    with self._cond:
      key = (plural, namespace, name)
      obj = self._objects.get(key)
      if obj is None:
        raise not_found(res, name)
      old = copy.deepcopy(obj)
      meta = obj['metadata']
      finalizers = [f for f in meta.get('finalizers') or []
                    if propagation is None or f not in (FOREGROUND, ORPHAN)]
      if propagation == 'Foreground':
        finalizers.append(FOREGROUND)
      elif propagation == 'Orphan':
        finalizers.append(ORPHAN)
      grace = 0
      if plural == 'pods' and obj.get('spec', {}).get('nodeName') and (
          obj.get('status', {}).get('phase') not in ('Succeeded', 'Failed')):
        grace = grace_period_seconds if grace_period_seconds is not None \
            else obj['spec'].get('terminationGracePeriodSeconds', 30)
        if meta.get('deletionGracePeriodSeconds') is not None:
          grace = min(grace, meta['deletionGracePeriodSeconds'])
      if finalizers or grace > 0:
        changed = (finalizers != (meta.get('finalizers') or []) or
                   'deletionTimestamp' not in meta or
                   (grace > 0 and meta.get('deletionGracePeriodSeconds')
                    != grace))
        if changed:
          if finalizers:
            meta['finalizers'] = finalizers
          meta.setdefault('deletionTimestamp', now_rfc3339(grace))
          if grace > 0:
            meta['deletionGracePeriodSeconds'] = grace
          elif plural == 'pods' or 'deletionGracePeriodSeconds' in meta:
            meta['deletionGracePeriodSeconds'] = 0
          self._emit('MODIFIED', res, obj, old)
        result = copy.deepcopy(obj)
        self._collect()
        return result
      del self._objects[key]
      self._emit('DELETED', res, obj, old)
      result = copy.deepcopy(obj) if plural == 'pods' else {
          'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
          'status': 'Success',
          'details': {'name': name, 'group': res.group, 'kind': res.plural,
                      'uid': meta['uid']}}
      self._collect()
      return result

  def remove_finalizer(self, plural: str, namespace: str, name: str,
                       finalizer: str) -> None:
    """A controller's update that drops its `finalizer` (Kubeflow Trainer
    2.0-2.2's `trainer.kubeflow.org/resource-in-use` on a TrainingRuntime
    once no TrainJob refers to it, pkg/controller/
    trainingruntime_controller.go); a deleted object with no finalizer
    left is gone (apiserver registry/generic/registry/store.go,
    `Update` -> `deleteWithoutFinalizers`)."""
    with self._cond:
      key = (plural, namespace, name)
      if key not in self._objects:
        raise not_found(RESOURCES[plural], name)
      self._remove_finalizer(key, finalizer)
      self._collect()

  def _remove_finalizer(self, key, finalizer):
    obj = self._objects[key]
    old = copy.deepcopy(obj)
    rest = [f for f in obj['metadata'].get('finalizers', []) if f != finalizer]
    obj['metadata']['finalizers'] = rest
    if not rest:
      obj['metadata'].pop('finalizers')
      if obj['metadata'].get('deletionGracePeriodSeconds', 0) == 0:
        del self._objects[key]
        self._emit('DELETED', RESOURCES[key[0]], obj, old)
        return
    self._emit('MODIFIED', RESOURCES[key[0]], obj, old)

  def _collect(self):
    """The garbage collector (module docstring), until nothing changes."""
    if self._collecting:
      return
    self._collecting = True
    try:
      while self._collect_once():
        pass
    finally:
      self._collecting = False

  def _collect_once(self) -> bool:
    uids = {o['metadata']['uid']: k for k, o in self._objects.items()}
    for key, obj in list(self._objects.items()):
      meta = obj['metadata']
      uid = meta['uid']
      dependents = [
          (k, o) for k, o in self._objects.items() if k[1] == key[1] and any(
              r.get('uid') == uid for r in o['metadata'].get(
                  'ownerReferences') or [])]
      finalizers = meta.get('finalizers') or []
      if 'deletionTimestamp' in meta and ORPHAN in finalizers:
        for k, o in dependents:
          self.modify(*k, lambda d: d['metadata'].__setitem__(
              'ownerReferences', [r for r in d['metadata']['ownerReferences']
                                  if r.get('uid') != uid]))
        self._remove_finalizer(key, ORPHAN)
        return True
      if 'deletionTimestamp' in meta and FOREGROUND in finalizers:
        for k, o in dependents:
          if 'deletionTimestamp' not in o['metadata']:
            self.delete(*k, propagation='Background')
            return True
        blocking = [o for _, o in dependents if any(
            r.get('uid') == uid and r.get('blockOwnerDeletion')
            for r in o['metadata']['ownerReferences'])]
        if not blocking:
          self._remove_finalizer(key, FOREGROUND)
          return True
      refs = meta.get('ownerReferences') or []
      if refs and 'deletionTimestamp' not in meta and not any(
          r.get('uid') in uids for r in refs):
        self.delete(*key, propagation='Background')
        return True
    return False

  # What the controllers and the kubelet say of pods that do not start.

  def failed_create(self, namespace: str, kind: str, name: str,
                    refusal: str) -> Dict[str, Any]:
    """The Warning event a controller records on its object (`kind`
    `name`: a JobSet's Job, a TFJob) when the API server refuses a pod
    it creates (Pod Security admission, a quota, a missing service
    account): kubernetes pkg/controller/controller_utils.go,
    `RealPodControl.createPods`: `Eventf(object, Warning,
    FailedCreatePodReason ("FailedCreate"), "Error creating: %v", err)`,
    which pkg/controller/job/job_controller.go's pod control calls; the
    source is the controller's (`job-controller`)."""
    return self.create('events', namespace, {
        'apiVersion': 'v1', 'kind': 'Event',
        'metadata': {'generateName': name + '.'},
        'involvedObject': {'kind': kind, 'name': name,
                           'namespace': namespace},
        'reason': 'FailedCreate', 'type': 'Warning', 'count': 1,
        'message': f'Error creating: {refusal}',
        'source': {'component': 'job-controller'},
        'firstTimestamp': now_rfc3339(), 'lastTimestamp': now_rfc3339()})

  def image_pull_failure(self, namespace: str, pod: str, container: str,
                         image: str) -> Dict[str, Any]:
    """A pod whose image cannot be pulled, as the kubelet leaves it:
    Pending, the container waiting with `ImagePullBackOff` (after
    `ErrImagePull`; pkg/kubelet/images/types.go, and image_manager.go's
    message "Back-off pulling image ..."), and the kubelet's Warning
    event `Failed` on the pod (pkg/kubelet/events/event.go,
    FailedToPullImage)."""
    self.update_status('pods', namespace, pod, {
        'phase': 'Pending', 'containerStatuses': [{
            'name': container, 'ready': False, 'restartCount': 0,
            'image': image, 'imageID': '', 'started': False,
            'state': {'waiting': {
                'reason': 'ImagePullBackOff',
                'message': f'Back-off pulling image "{image}"'}}}]})
    return self.create('events', namespace, {
        'apiVersion': 'v1', 'kind': 'Event',
        'metadata': {'generateName': pod + '.'},
        'involvedObject': {'kind': 'Pod', 'name': pod,
                           'namespace': namespace},
        'reason': 'Failed', 'type': 'Warning', 'count': 1,
        'message': f'Failed to pull image "{image}": rpc error: code = '
                   'NotFound desc = not found',
        'source': {'component': 'kubelet'},
        'firstTimestamp': now_rfc3339(), 'lastTimestamp': now_rfc3339()})

  # Logs.

  def set_log(self, namespace: str, pod: str, text: Any) -> None:
    """The pod's log: a string, or a callable returning it."""
    with self._cond:
      self.logs[(namespace, pod)] = text

  def read_log(self, namespace: str, pod: str, container: Optional[str],
               tail_lines: Optional[int]) -> str:
    obj = self.get('pods', namespace, pod)
    names = [c['name'] for c in obj.get('spec', {}).get('containers', [])]
    if container is None:
      if len(names) != 1:
        raise bad_request(f'a container name must be specified for pod '
                          f'{pod}, choose one of: [{" ".join(names)}]')
      container = names[0]
    if container not in names:
      raise bad_request(f'container {container} is not valid for pod {pod}')
    text = self.logs.get((namespace, pod))
    if text is None:
      raise bad_request(f'container "{container}" in pod "{pod}" is waiting '
                        'to start: ContainerCreating')
    text = text() if callable(text) else text
    if tail_lines is not None:
      lines = text.splitlines(keepends=True)
      text = ''.join(lines[-tail_lines:]) if tail_lines > 0 else ''
    return text

  # Watch.

  def watch(self, plural: str, namespace: str,
            resource_version: Optional[str], timeout_s: float,
            label_selector: Optional[str] = None,
            field_selector: Optional[str] = None,
            stop: Optional[threading.Event] = None
            ) -> Iterator[Dict[str, Any]]:
    """The watch events (module docstring) until `timeout_s` or `stop`."""
    labels, fields = label_matcher(label_selector), field_matcher(
        field_selector)

    def matches(obj):
      return obj is not None and labels(obj) and fields(obj)

    deadline = time.monotonic() + timeout_s
    with self._cond:
      if resource_version in (None, '', '0'):
        initial = [{'type': 'ADDED', 'object': copy.deepcopy(o)}
                   for (p, ns, _), o in sorted(self._objects.items())
                   if p == plural and ns == namespace and matches(o)]
        last = self._rv
      else:
        try:
          last = int(resource_version)
        except ValueError:
          raise bad_request(  # pylint: disable=raise-missing-from
              f'invalid resource version: {resource_version}')
        waited = time.monotonic() + 3
        while last > self._rv and time.monotonic() < waited:
          self._cond.wait(0.1)
        if last > self._rv:
          raise StatusError(
              504, 'Timeout', f'Too large resource version: {last}, '
              f'current: {self._rv}', {'causes': [{
                  'reason': 'ResourceVersionTooLarge',
                  'message': 'Too large resource version'}],
                                       'retryAfterSeconds': 1})
        oldest = self._events[0].rv if self._events else self._rv + 1
        initial = []
        if self._dropped and last < oldest - 1:
          initial = [{'type': 'ERROR', 'object': expired(
              f'too old resource version: {last} ({oldest - 1})').status}]
    yield from initial
    if initial and initial[0]['type'] == 'ERROR':
      return
    while True:
      with self._cond:
        while (not self._events or self._events[-1].rv <= last) and (
            time.monotonic() < deadline and not (stop and stop.is_set())):
          self._cond.wait(min(0.2, max(0.0, deadline - time.monotonic())))
        if time.monotonic() >= deadline or (stop and stop.is_set()):
          return
        oldest = self._events[0].rv
        batch = [e for e in self._events if e.rv > last]
        # Fell out of the window while following.
        behind = last < oldest - 1 and f'too old resource version: {last} ' \
            f'({oldest - 1})'
        last = self._events[-1].rv
      if behind:
        yield {'type': 'ERROR', 'object': expired(behind).status}
        return
      for event in batch:
        if event.plural != plural or event.namespace != namespace:
          continue
        now_in, was_in = matches(event.obj), matches(event.old)
        if event.type == 'MODIFIED':
          kind = ('MODIFIED' if now_in and was_in else 'ADDED' if now_in
                  else 'DELETED' if was_in else None)
        else:
          kind = event.type if now_in else None
        if kind:
          yield {'type': kind, 'object': event.obj}


# Certificates.


def certificate(subject, issuer_name, key, issuer_key, ca,
                addresses=('127.0.0.1',)):
  """An X.509 certificate: a CA's, or a server's for `addresses` (and
  localhost)."""
  moment = datetime.datetime.now(datetime.timezone.utc)
  builder = (x509.CertificateBuilder()
             .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                         subject)]))
             .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                        issuer_name)]))
             .public_key(key.public_key())
             .serial_number(x509.random_serial_number())
             .not_valid_before(moment - datetime.timedelta(minutes=5))
             .not_valid_after(moment + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None),
                            critical=True))
  if ca:
    builder = builder.add_extension(
        x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                      crl_sign=True, content_commitment=False,
                      key_encipherment=False, data_encipherment=False,
                      key_agreement=False, encipher_only=False,
                      decipher_only=False), critical=True)
  else:
    builder = builder.add_extension(x509.SubjectAlternativeName(
        [x509.DNSName('localhost')] +
        [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]),
        critical=False)
  return builder.sign(issuer_key, hashes.SHA256())


def write_tls(folder: str, addresses=('127.0.0.1',)) -> Dict[str, str]:
  """A CA (`ca.crt`) and a server certificate and key it signed for
  `addresses` (`tls.crt`, `tls.key`) in `folder`; their paths."""
  os.makedirs(folder, exist_ok=True)
  ca_key = ec.generate_private_key(ec.SECP256R1())
  server_key = ec.generate_private_key(ec.SECP256R1())
  ca = certificate('kube-ca', 'kube-ca', ca_key, ca_key, ca=True)
  server = certificate(addresses[0], 'kube-ca', server_key, ca_key, ca=False,
                       addresses=addresses)
  paths = {name: os.path.join(folder, name)
           for name in ('ca.crt', 'tls.crt', 'tls.key')}
  with open(paths['ca.crt'], 'wb') as f:
    f.write(ca.public_bytes(serialization.Encoding.PEM))
  with open(paths['tls.crt'], 'wb') as f:
    f.write(server.public_bytes(serialization.Encoding.PEM))
  with open(paths['tls.key'], 'wb') as f:
    f.write(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
  return paths


# The HTTP side.

_PATHS = (
    re.compile(r'^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/'
               r'(?P<ns>[^/]+)/(?P<plural>[^/]+)(?:/(?P<name>[^/]+)'
               r'(?:/(?P<sub>[^/]+))?)?$'),
    re.compile(r'^/api/(?P<version>v1)/namespaces/(?P<ns>[^/]+)/'
               r'(?P<plural>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$'),
)
_SUBRESOURCES = {('pods', 'log')}

Call = collections.namedtuple('Call', 'verb group resource name code')


def _rule_allows(rule, verb, group, resource, name) -> bool:
  """rbac/v1 helpers: VerbMatches, APIGroupMatches, ResourceMatches (`*`,
  `*/sub`), ResourceNameMatches."""
  if not ({'*', verb} & set(rule.get('verbs', []))):
    return False
  if not ({'*', group} & set(rule.get('apiGroups', []))):
    return False
  resources = set(rule.get('resources', []))
  sub = resource.partition('/')[2]
  if not ({'*', resource} & resources or (sub and f'*/{sub}' in resources)):
    return False
  names = rule.get('resourceNames') or []
  return not names or name in names


class KubeAPI:
  """The stand-in API server (module docstring), in a thread.

  Attributes:
    store: The `Store`.
    calls: Every request, as `Call(verb, group, resource, name, code)`.
    namespace, service_account, token, port, url.
    rules: The Role's rules granted to the token (settable).
    service_account_dir: The folder to mount at /var/run/secrets/
      kubernetes.io/serviceaccount.
    environ: KUBERNETES_SERVICE_HOST and _PORT for a pod (host network).
  """

  def __init__(self, folder: str, rules: List[Dict[str, Any]],
               namespace: str = 'kubeflow-user',
               service_account: str = 'pipeline-runner',
               extra_host: Optional[str] = None,
               window: int = DEFAULT_WINDOW, webhooks: bool = True):
    self.store = Store(window=window, webhooks=webhooks)
    self.rules = rules
    self.namespace, self.service_account = namespace, service_account
    self.user = f'system:serviceaccount:{namespace}:{service_account}'
    self.token = secrets.token_urlsafe(32)
    self.calls: List[Call] = []
    self.folder = folder
    self.hosts = ['127.0.0.1'] + ([extra_host] if extra_host else [])
    self.tls = write_tls(os.path.join(folder, 'tls'), tuple(self.hosts))
    self.service_account_dir = os.path.join(folder, 'serviceaccount')
    os.makedirs(self.service_account_dir, exist_ok=True)
    for name, text in (('token', self.token), ('namespace', namespace),
                       ('ca.crt', open(self.tls['ca.crt']).read())):
      with open(os.path.join(self.service_account_dir, name), 'w') as f:
        f.write(text)
    for name in os.listdir(self.service_account_dir):
      os.chmod(os.path.join(self.service_account_dir, name), 0o644)
    os.chmod(self.service_account_dir, 0o755)
    self._servers: List[http.server.ThreadingHTTPServer] = []
    self._threads: List[threading.Thread] = []
    self._stop = threading.Event()
    self.port = 0

  @property
  def url(self) -> str:
    return f'https://127.0.0.1:{self.port}'

  @property
  def environ(self) -> Dict[str, str]:
    return {'KUBERNETES_SERVICE_HOST': '127.0.0.1',
            'KUBERNETES_SERVICE_PORT': str(self.port)}

  def api_client(self):
    """A `kubernetes.client.ApiClient` with this server's URL, CA and
    token, as `load_incluster_config` would make it."""
    from kubernetes import client  # pylint: disable=g-import-not-at-top
    configuration = client.Configuration()
    configuration.host = self.url
    configuration.ssl_ca_cert = self.tls['ca.crt']
    configuration.api_key = {'authorization': f'Bearer {self.token}'}
    return client.ApiClient(configuration)

  def start(self) -> 'KubeAPI':
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(self.tls['tls.crt'], self.tls['tls.key'])
    handler = _handler(self)
    for attempt in range(20):
      servers = []
      try:
        for host in self.hosts:
          server = http.server.ThreadingHTTPServer(
              (host, servers[0].server_address[1] if servers else 0),
              handler)
          servers.append(server)
        break
      except OSError:
        for server in servers:
          server.server_close()
        if attempt == 19:
          raise
    for server in servers:
      server.daemon_threads = True
      server.socket = context.wrap_socket(
          server.socket, server_side=True, do_handshake_on_connect=False)
      thread = threading.Thread(target=server.serve_forever,
                                kwargs={'poll_interval': 0.05}, daemon=True)
      thread.start()
      self._threads.append(thread)
    self._servers = servers
    self.port = servers[0].server_address[1]
    return self

  def stop(self) -> None:
    self._stop.set()
    for server in self._servers:
      server.shutdown()
      server.server_close()

  def __enter__(self) -> 'KubeAPI':
    return self.start()

  def __exit__(self, *exc) -> None:
    self.stop()

  def authorize(self, verb, group, resource, name, namespace) -> None:
    """The Role binds in `self.namespace` only."""
    if namespace == self.namespace and any(
        _rule_allows(r, verb, group, resource, name) for r in self.rules):
      return
    qualified = (f'{resource.partition("/")[0]}.{group}' if group else
                 resource.partition('/')[0])
    message = (f'User "{self.user}" cannot {verb} resource "{resource}" in '
               f'API group "{group}" in the namespace "{namespace}"')
    message = (f'{qualified} "{name}" is forbidden: {message}' if name else
               f'{qualified} is forbidden: {message}')
    raise StatusError(403, 'Forbidden', message,
                      {'name': name, 'group': group,
                       'kind': resource.partition('/')[0]})


def _handler(api: KubeAPI):

  class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):  # pylint: disable=arguments-differ
      pass

    def do_GET(self):  # pylint: disable=invalid-name
      self._serve('GET')

    def do_POST(self):  # pylint: disable=invalid-name
      self._serve('POST')

    def do_DELETE(self):  # pylint: disable=invalid-name
      self._serve('DELETE')

    def do_PATCH(self):  # pylint: disable=invalid-name
      self._serve('PATCH')

    def do_PUT(self):  # pylint: disable=invalid-name
      self._serve('PUT')

    def _serve(self, method):
      url = parse.urlsplit(self.path)
      query = {k: v[-1] for k, v in parse.parse_qs(url.query).items()}
      length = int(self.headers.get('Content-Length') or 0)
      body = self.rfile.read(length) if length else b''
      call = ['', '', '', '', 0]
      try:
        self._route(method, url.path, query, body, call)
      except StatusError as e:
        call[4] = e.code
        self._json(e.code, e.status)
      except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
        pass
      finally:
        api.calls.append(Call(*call))

    def _route(self, method, path, query, body, call):
      # pkg/authentication/request/bearertoken/bearertoken.go: the scheme
      # is case-insensitive (load_incluster_config sends "bearer").
      parts = (self.headers.get('Authorization') or '').strip().split(' ')
      if len(parts) != 2 or parts[0].lower() != 'bearer' or (
          parts[1] != api.token):
        raise StatusError(401, 'Unauthorized', 'Unauthorized')
      match = next(filter(None, (p.match(path) for p in _PATHS)), None)
      res = RESOURCES.get(match.group('plural')) if match else None
      group = match.groupdict().get('group') or '' if match else ''
      if (not match or res is None or res.group != group or
          res.version != match.group('version') or (
              match.group('sub') and
              (res.plural, match.group('sub')) not in _SUBRESOURCES)):
        raise StatusError(404, 'NotFound',
                          'the server could not find the requested resource',
                          {})
      ns, name, sub = match.group('ns'), match.group('name') or '', \
          match.group('sub')
      resource = f'{res.plural}/{sub}' if sub else res.plural
      # requestinfo.go: strconv.ParseBool(watch).
      watching = query.get('watch') in ('1', 't', 'T', 'TRUE', 'true', 'True')
      verb = {'GET': 'get' if name else 'watch' if watching else 'list',
              'POST': 'create', 'PUT': 'update', 'PATCH': 'patch',
              'DELETE': 'delete' if name else 'deletecollection'}[method]
      if verb in ('list', 'watch') and not name:
        name = selected_name(query.get('fieldSelector'))
      call[:4] = [verb, group, resource, name]
      api.authorize(verb, group, resource, name, ns)
      if verb == 'create' and not name:
        try:
          obj = json.loads(body or b'null')
        except ValueError as e:
          raise bad_request(f'json: {e}')  # pylint: disable=raise-missing-from
        if not isinstance(obj, dict):
          raise bad_request('the object provided is unrecognized')
        result = api.store.create(res.plural, ns, obj)
        call[3] = result['metadata']['name']
        return self._done(call, 201, result)
      if verb == 'get' and sub == 'log':
        tail = query.get('tailLines')
        text = api.store.read_log(ns, name, query.get('container'),
                                  int(tail) if tail is not None else None)
        return self._done(call, 200, text.encode(), 'text/plain')
      if verb == 'get':
        return self._done(call, 200, api.store.get(res.plural, ns, name))
      if verb == 'list':
        return self._done(call, 200, api.store.list(
            res.plural, ns, query.get('labelSelector'),
            query.get('fieldSelector')))
      if verb == 'watch':
        return self._watch(res, ns, query, call)
      if verb == 'delete':
        options = json.loads(body) if body else {}
        if options.get('orphanDependents') is not None:
          if options.get('propagationPolicy'):
            raise invalid('meta.k8s.io', 'DeleteOptions', '', [(
                'FieldValueInvalid', 'propagationPolicy',
                'Invalid value: "' + options['propagationPolicy'] +
                '": orphanDependents and deletionPropagation cannot be both '
                'set')])
          options['propagationPolicy'] = ('Orphan' if
                                          options['orphanDependents']
                                          else 'Background')
        policy = options.get('propagationPolicy') or query.get(
            'propagationPolicy')
        grace = options.get('gracePeriodSeconds', query.get(
            'gracePeriodSeconds'))
        result = api.store.delete(res.plural, ns, name, policy,
                                  int(grace) if grace is not None else None)
        return self._done(call, 200, result)
      if verb == 'patch':
        kind = (self.headers.get('Content-Type') or '').split(';')[0]
        if kind != 'application/merge-patch+json':
          raise StatusError(
              415, 'UnsupportedMediaType',
              f'the body of the request was in an unknown format - accepted '
              f'media types include: application/merge-patch+json (the '
              f'stand-in serves merge patches only; got {kind!r})')
        try:
          patch = json.loads(body)
        except ValueError as e:
          raise bad_request(f'json: {e}')  # pylint: disable=raise-missing-from
        return self._done(call, 200, api.store.patch(res.plural, ns, name,
                                                     patch))
      raise StatusError(
          405, 'MethodNotAllowed',
          f'{verb} is not supported on resources of kind "{_qualified(res)}"'
          ' (by the stand-in)', {'group': res.group, 'kind': res.plural})

    def _done(self, call, code, payload, content_type='application/json'):
      call[4] = code
      if content_type == 'application/json':
        self._json(code, payload)
      else:
        self._send(code, payload, content_type)

    def _json(self, code, payload):
      self._send(code, json.dumps(payload).encode(), 'application/json')

    def _send(self, code, data, content_type):
      self.send_response(code)
      self.send_header('Content-Type', content_type)
      self.send_header('Content-Length', str(len(data)))
      self.end_headers()
      self.wfile.write(data)

    def _watch(self, res, ns, query, call):
      timeout = float(query.get('timeoutSeconds') or 1800)
      events = api.store.watch(
          res.plural, ns, query.get('resourceVersion'), timeout,
          query.get('labelSelector'), query.get('fieldSelector'),
          stop=api._stop)  # pylint: disable=protected-access
      first = next(events, None)  # Errors before the stream are HTTP ones.
      call[4] = 200
      self.send_response(200)
      self.send_header('Content-Type', 'application/json')
      self.send_header('Transfer-Encoding', 'chunked')
      self.end_headers()
      try:
        if first is not None:
          self._chunk(first)
          for event in events:
            self._chunk(event)
        self.wfile.write(b'0\r\n\r\n')
        self.wfile.flush()
      except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
        self.close_connection = True

    def _chunk(self, event):
      data = json.dumps(event).encode() + b'\n'
      self.wfile.write(f'{len(data):x}\r\n'.encode() + data + b'\r\n')
      self.wfile.flush()

  return Handler
