"""The compiled step's kfp-kubernetes platform spec, as each Kubeflow
Pipelines backend release reads it.

KFP's driver and Argo compiler build the step's pod from the platform
spec's `KubernetesExecutorConfig` (kubeflow/pipelines,
`kubernetes_platform/proto/kubernetes_executor_config.proto`), and what
that message holds changed between releases. A field a release does not
have is not an error there: KFP 2.5's Argo compiler parses the config
strictly and, on one unknown field, skips the step's labels and
annotations; its driver parses leniently and drops the field (a PVC's
`subPath`: the volume's root is mounted; a `securityContext`). So the
compile writes, for the release the cluster runs (`RELEASES`; default
the oldest, `OLDEST`), only the forms that release parses, and refuses a
setting it cannot carry, naming the release that would:

  - 2.4: a PVC, Secret or ConfigMap by name (`pvcMount.constant`,
    `secretAsVolume.secretName`, `configMapAsVolume.configMapName`);
    `podMetadata`, `emptyDirMounts`, `nodeSelector.labels`, `tolerations`.
  - from 2.5 (`NAME_PARAMETERS_FROM`): those names as input parameters
    (`pvcNameParameter`, `secretNameParameter`, `configMapNameParameter`);
    the old fields are deprecated there.
  - from 2.16 (`SECURITY_FROM`): `pvcMount.subPath` and `securityContext`
    (`runAsUser`, `runAsGroup`, `runAsNonRoot`; the driver puts them on
    the step's container, `backend/src/v2/driver/k8s.go`), and KFP's Argo
    compiler gives every executor container `allowPrivilegeEscalation:
    false`, `capabilities.drop: [ALL]` and `seccompProfile:
    RuntimeDefault`, and the pod `seccompProfile: RuntimeDefault`
    (`backend/src/v2/compiler/argocompiler/security_context.go`), but not
    `runAsNonRoot`, since a user's image may run as root.

Restricted by default: from 2.16 the compile writes `securityContext:
{runAsNonRoot: true}` (the image runs as uid 1000), so that, with what
the Argo compiler adds, the step's container meets Pod Security
"restricted"; the settings' `runAsNonRoot` replaces it. Before 2.16 the
platform spec has no field that could, and KFP's compiler adds none: the
step's pod is admitted only where the namespace does not enforce
"restricted" (`restricted_gap` says so; the compile logs it).

A step that trains in its own pod (no job launched) also gets the
trainer's `node_selector` and `tolerations` (`resources`), which KFP's
PipelineSpec cannot carry.
"""

from typing import Any, Dict, Optional

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow.pod_settings import KFP_SECURITY

# The backend releases whose platform spec was read (the pinned
# tests/schemas/kfp/kubernetes_executor_config-<release>.proto).
RELEASES = ('2.4', '2.5', '2.14', '2.15', '2.16', '2.17')
OLDEST = RELEASES[0]
NAME_PARAMETERS_FROM = '2.5'
SECURITY_FROM = '2.16'
_TOLERATION_FIELDS = ('key', 'operator', 'value', 'effect',
                      'tolerationSeconds')


def check_release(release: Any) -> str:
  """Refuses a release whose platform spec was not read."""
  if release not in RELEASES:
    raise InvalidArgumentError(
        f'Unknown Kubeflow Pipelines backend release {release!r}: the '
        "compile writes each step's platform spec in the forms its release "
        f'parses. Expected one of {RELEASES} (major.minor). Received: '
        f'kfp_release={release!r}. Pass the release your cluster runs (the '
        "image tag of its ml-pipeline deployment); for a newer one, "
        f'{RELEASES[-1]!r}.')
  return release


def _at_least(release: str, first: str) -> bool:
  return tuple(map(int, release.split('.'))) >= tuple(
      map(int, first.split('.')))


def executor_config(settings, resources, release: str,
                    component_id: str = 'GenericTrainer',
                    trains_in_step: bool = True) -> Dict[str, Any]:
  """The step's `KubernetesExecutorConfig` (JSON names) for `release`.

  Args:
    settings: The trainer's `pod_settings.PodSettings`, or None.
    resources: The trainer's `resources.Resources`, or None.
    release: One of `RELEASES`.
    component_id: Names the component in a refusal.
    trains_in_step: The step trains in its own pod: it gets the trainer's
      nodeSelector and tolerations (a step that launches a job only waits,
      and its job's pods get them).

  Raises:
    InvalidArgumentError: a setting `release` cannot carry.
  """
  check_release(release)
  config: Dict[str, Any] = {}
  if settings is not None:
    _add_settings(config, settings, release, component_id)
  security = dict(config.pop('securityContext', {}))
  if _at_least(release, SECURITY_FROM):
    config['securityContext'] = {'runAsNonRoot': True, **security}
  if trains_in_step and resources is not None:
    if resources.node_selector:
      config['nodeSelector'] = {'labels': dict(resources.node_selector)}
    if resources.tolerations:
      config['tolerations'] = [_toleration(t, component_id)
                               for t in resources.tolerations]
  return config


def restricted_gap(release: str) -> Optional[str]:
  """Why a step compiled for `release` does not meet Pod Security
  "restricted", or None when it does."""
  if _at_least(release, SECURITY_FROM):
    return None
  return (f"the step's pod does not meet Pod Security \"restricted\" on KFP "
          f'{release}: its platform spec has no securityContext before '
          f'{SECURITY_FROM}, and its Argo compiler adds none, so a '
          'namespace labelled pod-security.kubernetes.io/enforce=restricted '
          f'refuses it (compile with --kfp-release {SECURITY_FROM} or later '
          'for a cluster that runs it, or run the pipeline in a namespace '
          'that enforces "baseline")')


def _add_settings(config: Dict[str, Any], settings, release: str,
                  component_id: str) -> None:
  named = _at_least(release, NAME_PARAMETERS_FROM)
  if settings.labels or settings.annotations:
    config['podMetadata'] = {
        **({'labels': dict(settings.labels)} if settings.labels else {}),
        **({'annotations': dict(settings.annotations)}
           if settings.annotations else {})}
  mounts = {m['name']: m for m in settings.volume_mounts}
  for volume in settings.volumes:
    mount = mounts.get(volume['name'])
    if mount is None:
      continue
    path = mount['mountPath']
    if 'persistentVolumeClaim' in volume:
      claim = volume['persistentVolumeClaim']['claimName']
      entry = ({'pvcNameParameter': _constant(claim)} if named
               else {'constant': claim})
      if mount.get('subPath'):
        _needs(release, SECURITY_FROM, component_id,
               f"the subPath {mount['subPath']!r} of volume "
               f"{volume['name']!r}", "its driver mounts the claim's root")
        entry['subPath'] = mount['subPath']
      config.setdefault('pvcMount', []).append({'mountPath': path, **entry})
    elif 'secret' in volume:
      name = volume['secret']['secretName']
      config.setdefault('secretAsVolume', []).append({
          'mountPath': path, **({'secretNameParameter': _constant(name)}
                                if named else {'secretName': name})})
    elif 'configMap' in volume:
      name = volume['configMap']['name']
      config.setdefault('configMapAsVolume', []).append({
          'mountPath': path, **({'configMapNameParameter': _constant(name)}
                                if named else {'configMapName': name})})
    elif 'emptyDir' in volume:
      config.setdefault('emptyDirMounts', []).append({
          'volumeName': volume['name'], 'mountPath': path,
          **({'medium': volume['emptyDir']['medium']}
             if volume['emptyDir'].get('medium') else {}),
          **({'sizeLimit': volume['emptyDir']['sizeLimit']}
             if volume['emptyDir'].get('sizeLimit') else {})})
  security = {key: settings.security_context[key] for key in KFP_SECURITY
              if key in settings.security_context}
  if security:
    _needs(release, SECURITY_FROM, component_id,
           f'the securityContext {security}',
           'its driver drops the field')
    config['securityContext'] = security


def _needs(release: str, first: str, component_id: str, what: str,
           otherwise: str) -> None:
  if _at_least(release, first):
    return
  raise InvalidArgumentError(
      f"{component_id}: the step's pod_settings ask for {what}, which the "
      f'platform spec of Kubeflow Pipelines {release} cannot carry '
      f'({otherwise}; kubernetes_executor_config.proto has it from '
      f'{first}). Expected settings KFP {release} carries, or a cluster of '
      f'KFP {first} or later. '
      f'Received: kfp_release={release!r}. Pass --kfp-release '
      f"{first} (compile_pipeline(kfp_release='{first}')) if your cluster "
      'runs it, or leave that setting out (the TrainJob and TFJob pods carry '
      'it on every release).')


def _constant(value: str) -> Dict[str, Any]:
  return {'runtimeValue': {'constant': value}}


def _toleration(toleration: Dict[str, Any],
                component_id: str) -> Dict[str, Any]:
  unknown = sorted(set(toleration) - set(_TOLERATION_FIELDS))
  if unknown:
    raise InvalidArgumentError(
        f"{component_id}: the toleration {toleration!r} in 'resources' has "
        f"fields {unknown} that Kubernetes' Toleration (and KFP's platform "
        f'spec) does not have. Expected fields among {_TOLERATION_FIELDS}. '
        f'Received: {toleration!r}. Rename or remove them.')
  return dict(toleration)

