"""What a cluster needs on a trainer pod besides its resources:
`GenericTrainer(pod_settings=...)`.

A Kubeflow profile namespace, OpenShift or a hardened cluster admits a pod
only with the right service account (storage credentials), annotations
(Istio's sidecar), labels, environment, volumes and security context.
One value, checked when the component is built, reaches every place a
trainer pod is described:
  - every pod of the TFJob and of the TrainJob (`apply`): all of it. Those
    pods also get `sidecar.istio.io/inject: "false"` unless the settings
    name that annotation: in a Kubeflow profile namespace Istio would add
    a sidecar that keeps a finished pod running and the job from ending
    (the Training Operator's TFJob guide says so);
  - the compiled KFP step (written by `generic_trainer.kubeflow.compile`):
    the environment in the step's container spec; labels and annotations,
    PVC, Secret, ConfigMap and emptyDir volumes, and runAsUser/runAsGroup/
    runAsNonRoot in the kfp-kubernetes platform spec, in the forms the
    cluster's KFP release parses (`generic_trainer.kubeflow.kfp_platform`),
    which KFP's driver applies to the step's pod. KFP does not
    carry a service account per step (it is the run's:
    `kfp.Client().create_run_from_pipeline_package(..., service_account=)`)
    nor `fsGroup` and other pod security fields, nor other volume kinds:
    `not_carried_by_kfp` names them, and the compile says so.

Restricted by default. Every pod of the TFJob and of the TrainJob meets
Pod Security "restricted" (kubernetes/kubernetes, staging/src/k8s.io/
pod-security-admission/policy: check_allowPrivilegeEscalation.go,
check_capabilities_restricted.go, check_runAsNonRoot.go,
check_seccompProfile_restricted.go) unless the settings say otherwise:
its training container gets `RESTRICTED_CONTAINER` as its
securityContext, and declares what it writes: `/tmp` (HOME in the image)
as an emptyDir, with a read-only root filesystem. A `security_context`
field a container takes (`CONTAINER_SECURITY_FIELDS`) goes on the training
container and replaces the default of that name; the pod-only fields
(fsGroup...) go on the pod.

The settings travel with the component as the `pod_settings` execution
property (JSON), so a TFJob or TrainJob rendered from a compiled pipeline
carries what the component was given.
"""

import json
import re
from typing import Any, Dict, List, Mapping, Optional

import attr

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import CLUSTER_PLACE_ENV
from generic_trainer.kubeflow.names import DNS1123_LABEL
from generic_trainer.kubeflow.names import DNS1123_SUBDOMAIN

KEYS = ('service_account', 'annotations', 'labels', 'env', 'volumes',
        'volume_mounts', 'security_context')
ISTIO_INJECT = 'sidecar.istio.io/inject'
# The volume sources the kfp-kubernetes platform spec can mount on a step.
KFP_VOLUME_SOURCES = ('persistentVolumeClaim', 'secret', 'configMap',
                      'emptyDir')
# securityContext fields (Kubernetes' PodSecurityContext and the
# container's SecurityContext) and their kinds; the first three the
# kfp-kubernetes platform spec carries.
_SECURITY_FIELDS = {'runAsUser': int, 'runAsGroup': int, 'runAsNonRoot': bool,
                    'fsGroup': int, 'fsGroupChangePolicy': str,
                    'supplementalGroups': list, 'seccompProfile': dict,
                    'seLinuxOptions': dict, 'sysctls': list,
                    'allowPrivilegeEscalation': bool, 'capabilities': dict,
                    'readOnlyRootFilesystem': bool, 'privileged': bool}
# The fields a container's SecurityContext takes: these go on the training
# container (the others on the pod).
CONTAINER_SECURITY_FIELDS = ('runAsUser', 'runAsGroup', 'runAsNonRoot',
                             'seccompProfile', 'seLinuxOptions',
                             'allowPrivilegeEscalation', 'capabilities',
                             'readOnlyRootFilesystem', 'privileged')
# Pod Security "restricted" for the training container (the policy files
# named in the module docstring), with a read-only root filesystem.
RESTRICTED_CONTAINER = {'allowPrivilegeEscalation': False,
                        'capabilities': {'drop': ['ALL']},
                        'runAsNonRoot': True,
                        'seccompProfile': {'type': 'RuntimeDefault'},
                        'readOnlyRootFilesystem': True}
# What the training writes outside its artifacts: /tmp (HOME in the image).
TMP_VOLUME = {'name': 'generic-trainer-tmp', 'emptyDir': {}}
TMP_MOUNT = {'name': 'generic-trainer-tmp', 'mountPath': '/tmp'}
# The securityContext fields the kfp-kubernetes platform spec carries
# (from KFP 2.16: `kfp_platform`).
KFP_SECURITY = ('runAsUser', 'runAsGroup', 'runAsNonRoot')
_VOLUME_SOURCES = ('persistentVolumeClaim', 'secret', 'configMap', 'emptyDir',
                   'csi', 'nfs', 'projected', 'downwardAPI', 'hostPath',
                   'ephemeral')
_KEY_NAME = re.compile(r'^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')
_LABEL_VALUE = re.compile(r'^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$')
_ENV_NAME = re.compile(r'^[-._a-zA-Z][-._a-zA-Z0-9]*$')
_MOUNT_FIELDS = ('name', 'mountPath', 'subPath', 'subPathExpr', 'readOnly',
                 'mountPropagation', 'recursiveReadOnly')
_EXAMPLE = ("e.g. pod_settings={'service_account': 'pipeline-runner', "
            "'annotations': {'sidecar.istio.io/inject': 'false'}, "
            "'env': {'GENERIC_TRAINER_WORKER_NETWORK': 'any'}, "
            "'volumes': [{'name': 'data', 'persistentVolumeClaim': "
            "{'claimName': 'penguin'}}], 'volume_mounts': [{'name': 'data', "
            "'mountPath': '/data'}], 'security_context': {'fsGroup': 0}}")


@attr.s(frozen=True)
class PodSettings:
  """A trainer pod's settings, as Kubernetes spells them.

  Attributes:
    service_account: The pods' `serviceAccountName`, or None.
    annotations: The pods' annotations.
    labels: The pods' labels.
    env: Environment variables of the training container.
    volumes: The pods' volumes (Kubernetes `Volume` dicts).
    volume_mounts: The training container's mounts (`VolumeMount` dicts),
      each naming one of `volumes`.
    security_context: securityContext fields: those a container takes
      (`CONTAINER_SECURITY_FIELDS`) on the training container, over
      `RESTRICTED_CONTAINER`; the others (fsGroup...) on the pod.
  """
  service_account = attr.ib(type=Optional[str], default=None)
  annotations = attr.ib(type=Dict[str, str], factory=dict)
  labels = attr.ib(type=Dict[str, str], factory=dict)
  env = attr.ib(type=Dict[str, str], factory=dict)
  volumes = attr.ib(type=List[Dict[str, Any]], factory=list)
  volume_mounts = attr.ib(type=List[Dict[str, Any]], factory=list)
  security_context = attr.ib(type=Dict[str, Any], factory=dict)

  def to_json(self) -> str:
    """The execution property's value: the settings that are set."""
    return json.dumps({key: value for key, value in attr.asdict(self).items()
                       if value}, sort_keys=True)

  def apply(self, template: Dict[str, Any],
            container_name: Optional[str] = None) -> Dict[str, Any]:
    """Returns the pod template (`{'metadata': ..., 'spec': ...}`) with
    these settings added: metadata, service account, volumes and the
    pod-only security fields on the pod; env, mounts and the container
    securityContext (`container_security`) on the container named
    `container_name` (every container when None), which also mounts an
    emptyDir at /tmp unless a mount of the settings is there. Istio's
    sidecar is turned off unless the annotations say otherwise."""
    template = json.loads(json.dumps(template))
    metadata = template.setdefault('metadata', {})
    annotations = {ISTIO_INJECT: 'false', **metadata.get('annotations', {}),
                   **self.annotations}
    metadata['annotations'] = annotations
    if self.labels:
      metadata['labels'] = {**metadata.get('labels', {}), **self.labels}
    spec = template.setdefault('spec', {})
    if self.service_account:
      spec['serviceAccountName'] = self.service_account
    own_tmp = not any(m['mountPath'].rstrip('/') == '/tmp'
                      for m in self.volume_mounts)
    volumes = [dict(v) for v in self.volumes] + (
        [json.loads(json.dumps(TMP_VOLUME))] if own_tmp else [])
    spec['volumes'] = spec.get('volumes', []) + volumes
    if self.pod_security():
      spec['securityContext'] = {**spec.get('securityContext', {}),
                                 **self.pod_security()}
    for container in spec.get('containers', []):
      if container_name is not None and container['name'] != container_name:
        continue
      if self.env:
        named = {e['name'] for e in self.env_list()}
        container['env'] = [e for e in container.get('env', [])
                            if e['name'] not in named] + self.env_list()
      container['volumeMounts'] = container.get('volumeMounts', []) + [
          dict(m) for m in self.volume_mounts] + (
              [dict(TMP_MOUNT)] if own_tmp else [])
      container['securityContext'] = {
          **container.get('securityContext', {}), **self.container_security()}
    return template

  def container_security(self) -> Dict[str, Any]:
    """The training container's securityContext: `RESTRICTED_CONTAINER`,
    each field the settings give (`CONTAINER_SECURITY_FIELDS`) in place of
    its default."""
    given = {key: value for key, value in self.security_context.items()
             if key in CONTAINER_SECURITY_FIELDS}
    return {**json.loads(json.dumps(RESTRICTED_CONTAINER)), **given}

  def pod_security(self) -> Dict[str, Any]:
    """The pod's securityContext: the fields only a pod takes."""
    return {key: value for key, value in self.security_context.items()
            if key not in CONTAINER_SECURITY_FIELDS}

  def env_list(self) -> List[Dict[str, str]]:
    return [{'name': k, 'value': v} for k, v in sorted(self.env.items())]

  def not_carried_by_kfp(self) -> List[str]:
    """The settings a compiled KFP step cannot carry, each with where it
    goes instead."""
    missing = []
    if self.service_account:
      missing.append(
          f'service_account={self.service_account!r} (KFP sets one service '
          'account per run: create_run_from_pipeline_package(..., '
          'service_account=...))')
    for volume in self.volumes:
      kind = next((k for k in _VOLUME_SOURCES if k in volume), None)
      if kind not in KFP_VOLUME_SOURCES:
        missing.append(f'volume {volume["name"]!r} of kind {kind!r} (the '
                       f'platform spec mounts only {KFP_VOLUME_SOURCES})')
    for key in sorted(set(self.security_context) - set(KFP_SECURITY)):
      missing.append(f'security_context {key} (the platform spec carries '
                     f'only {KFP_SECURITY})')
    return missing


def from_value(value: Optional[Mapping[str, Any]]) -> Optional[PodSettings]:
  """Checks `GenericTrainer(pod_settings=...)`; None stays None.

  Raises:
    InvalidArgumentError: an unknown key, a value of the wrong kind, a name
      Kubernetes refuses, or a mount of a volume that is not declared.
  """
  if value is None or isinstance(value, PodSettings):
    return value
  if isinstance(value, str):
    value = from_json(value)
    return value
  if not isinstance(value, Mapping):
    raise InvalidArgumentError(
        f"'pod_settings' must be a dict with keys among {KEYS}, {_EXAMPLE}. "
        f'Received: pod_settings that is a {type(value).__name__}. Pass a '
        'dict.')
  unknown = sorted(set(value) - set(KEYS))
  if unknown:
    raise InvalidArgumentError(
        f"'pod_settings' has unknown keys {unknown}. Expected keys among "
        f'{KEYS}, {_EXAMPLE}. Received: pod_settings={dict(value)!r}. Rename '
        'or remove them (CPU, memory and accelerators go in `resources`).')
  account = value.get('service_account')
  if account is not None and (not isinstance(account, str) or
                              not DNS1123_SUBDOMAIN.match(account)):
    _wrong('service_account', account, 'a service account name (lowercase '
           "letters, digits, '-' and '.'), e.g. 'pipeline-runner'")
  annotations = _string_map('annotations', value.get('annotations'))
  labels = _string_map('labels', value.get('labels'))
  for key, text in labels.items():
    if len(text) > 63 or not _LABEL_VALUE.match(text):
      _wrong(f'labels[{key!r}]', text, 'a label value: at most 63 letters, '
             "digits, '-', '_' or '.', starting and ending with a letter or "
             'digit')
  env = _string_map('env', value.get('env'), env=True)
  volumes = _volumes(value.get('volumes'))
  mounts = _mounts(value.get('volume_mounts'), {v['name'] for v in volumes})
  security = _security(value.get('security_context'))
  return PodSettings(service_account=account, annotations=annotations,
                     labels=labels, env=env, volumes=volumes,
                     volume_mounts=mounts, security_context=security)


def from_json(text: Optional[str]) -> Optional[PodSettings]:
  """The settings an execution property holds (`PodSettings.to_json`)."""
  if not text:
    return None
  try:
    value = json.loads(text)
  except ValueError as e:
    raise InvalidArgumentError(
        f"'pod_settings' must be JSON of a dict with keys among {KEYS}. "
        f'Received: {text[:300]!r} ({e}). Pass a dict to GenericTrainer.'
        ) from e
  return from_value(value)


def _string_map(key: str, value: Any, env: bool = False) -> Dict[str, str]:
  value = value or {}
  if not isinstance(value, Mapping) or not all(
      isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
    _wrong(key, value, 'a dict of str to str (quote numbers and booleans: '
           "'false', '1')")
  for name in value:
    if env and not _ENV_NAME.match(name):
      _wrong(f'{key} name', name, "an environment variable's name: letters, "
             "digits, '_', '-' or '.', not starting with a digit")
    if env and name in CLUSTER_PLACE_ENV:
      _wrong(f'{key} name', name, 'a name the cluster does not set: '
             f'{sorted(CLUSTER_PLACE_ENV)} give a pod its place in the training '
             'group')
    if not env:
      prefix, _, rest = name.rpartition('/')
      if (prefix and not DNS1123_SUBDOMAIN.match(prefix)) or len(rest) > 63 or (
          not _KEY_NAME.match(rest)):
        _wrong(f'{key} key', name, "a Kubernetes key: an optional DNS prefix "
               "and '/', then at most 63 letters, digits, '-', '_' or '.'")
  return dict(value)


def _volumes(value: Any) -> List[Dict[str, Any]]:
  value = value or []
  if not isinstance(value, (list, tuple)) or not all(
      isinstance(v, Mapping) for v in value):
    _wrong('volumes', value, "a list of Kubernetes volumes, e.g. [{'name': "
           "'data', 'persistentVolumeClaim': {'claimName': 'penguin'}}]")
  names = set()
  for volume in value:
    name = volume.get('name')
    sources = [k for k in volume if k != 'name']
    if not isinstance(name, str) or not DNS1123_LABEL.match(name) or len(
        name) > 63:
      _wrong('volumes name', name, 'a DNS label (lowercase letters, digits, '
             "'-', at most 63)")
    if name in names:
      _wrong('volumes name', name, 'a name no other volume has')
    names.add(name)
    if len(sources) != 1 or sources[0] not in _VOLUME_SOURCES or (
        not isinstance(volume[sources[0]], Mapping)):
      _wrong(f'volume {name!r}', dict(volume),
             f'a name and exactly one source among {_VOLUME_SOURCES}')
  return [json.loads(json.dumps(v)) for v in value]


def _mounts(value: Any, volumes) -> List[Dict[str, Any]]:
  value = value or []
  if not isinstance(value, (list, tuple)) or not all(
      isinstance(m, Mapping) for m in value):
    _wrong('volume_mounts', value, "a list of mounts, e.g. [{'name': 'data', "
           "'mountPath': '/data'}]")
  for mount in value:
    unknown = sorted(set(mount) - set(_MOUNT_FIELDS))
    if unknown:
      _wrong('volume_mounts key', unknown[0],
             f"one of a VolumeMount's fields {_MOUNT_FIELDS}")
    if mount.get('name') not in volumes:
      _wrong('volume_mounts name', mount.get('name'),
             f'the name of one of the volumes {sorted(volumes)}')
    path = mount.get('mountPath')
    if not isinstance(path, str) or not path.startswith('/'):
      _wrong('volume_mounts mountPath', path, 'an absolute path')
  return [dict(m) for m in value]


def _security(value: Any) -> Dict[str, Any]:
  value = value or {}
  if not isinstance(value, Mapping):
    _wrong('security_context', value, "a pod securityContext dict, e.g. "
           "{'fsGroup': 0, 'runAsNonRoot': True}")
  for key, item in value.items():
    kind = _SECURITY_FIELDS.get(key)
    if kind is None:
      _wrong('security_context key', key,
             'one of the pod and container securityContext fields '
             f'{sorted(_SECURITY_FIELDS)}')
    if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
      _wrong(f'security_context {key}', item, f'a {kind.__name__}')
  return dict(value)


def _wrong(key: str, value: Any, expected: str):
  raise InvalidArgumentError(
      f"'pod_settings' {key} must be {expected}. Received: {value!r}. Fix "
      f'that value ({_EXAMPLE}).')
