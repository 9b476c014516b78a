"""One compile per KFP release: the step's platform spec holds only what
the cluster's release parses (each pinned kubernetes_executor_config.proto,
parsed strictly: tests/kfp_proto.py), a setting it cannot carry is refused
naming the release that would, and from 2.16 the step's pod meets Pod
Security "restricted" as KFP builds it."""

import json
import logging

import pytest
from google.protobuf import json_format

import kfp_proto
import kube_api
from conftest import KUBEFLOW_IMAGE as IMAGE
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import STEP_JOB_ENV
from generic_trainer.kubeflow import kfp_platform
from generic_trainer.kubeflow import kfp_step
from message_parts import assert_four_parts

# What every supported release carries: volumes of each kind the platform
# spec mounts, labels and annotations.
SETTINGS = {
    'annotations': {'sidecar.istio.io/inject': 'false'},
    'labels': {'team': 'penguins'},
    'volumes': [{'name': 'data', 'persistentVolumeClaim': {
        'claimName': 'penguin-data'}},
                {'name': 'creds', 'secret': {'secretName': 'gcs-key'}},
                {'name': 'conf', 'configMap': {'name': 'penguin-conf'}},
                {'name': 'scratch', 'emptyDir': {'sizeLimit': '1Gi'}}],
    'volume_mounts': [{'name': 'data', 'mountPath': '/data'},
                      {'name': 'creds', 'mountPath': '/creds'},
                      {'name': 'conf', 'mountPath': '/conf'},
                      {'name': 'scratch', 'mountPath': '/scratch'}]}
RESOURCES = {'node_selector': {'cloud.google.com/gke-nodepool': 'train'},
             'tolerations': [{'key': 'nvidia.com/gpu', 'operator': 'Exists',
                              'effect': 'NoSchedule'}]}


def _compile(tmp_path, release, settings=SETTINGS, resources=None,
             **pipeline_args):
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / f'p-{release}.yaml')
  penguin_pipeline_kubeflow.compile_pipeline(
      path, IMAGE, 'gs://b/root', 'gs://b/serving', kfp_release=release,
      trainer_pod_settings=settings, trainer_resources=resources,
      **pipeline_args)
  job = kfp_step.load(path)
  label = kfp_step._component(job, 'GenericTrainer')['executorLabel']  # pylint: disable=protected-access
  executors = job.get('platformSpec', {}).get('platforms', {}).get(
      'kubernetes', {}).get('deploymentSpec', {}).get('executors', {})
  return job, executors.get(label)


def test_the_pinned_protos_are_upstreams_and_the_releases_the_compile_knows():
  """Each pinned file is upstream's bytes (the SHA-256 its header
  records), and the compile knows exactly the releases pinned."""
  assert tuple(kfp_proto.releases()) == kfp_platform.RELEASES
  for release in kfp_platform.RELEASES:
    text, _ = kfp_proto.pinned_text(release)
    assert 'message KubernetesExecutorConfig' in text
  assert kfp_platform.OLDEST == '2.4'


@pytest.mark.parametrize('release', kfp_platform.RELEASES)
def test_each_release_gets_a_platform_spec_its_own_proto_parses(
    release, tmp_path):
  """The compiled platform spec parses strictly with the release's own
  .proto; names are parameters from 2.5 (plain strings before); the
  security context only from 2.16; a single-worker step gets the
  trainer's node selector and tolerations on every release."""
  _, config = _compile(tmp_path, release, resources=RESOURCES)
  kfp_proto.parse(release, config)
  named = release != '2.4'
  assert ('pvcNameParameter' in config['pvcMount'][0]) == named
  assert ('constant' in config['pvcMount'][0]) == (not named)
  assert ('secretNameParameter' in config['secretAsVolume'][0]) == named
  assert ('configMapNameParameter' in config['configMapAsVolume'][0]) == named
  assert config['nodeSelector'] == {'labels': RESOURCES['node_selector']}
  assert config['tolerations'] == RESOURCES['tolerations']
  assert ('securityContext' in config) == (release in ('2.16', '2.17'))
  # What a newer release writes, an older one's strict parse refuses.
  secure = release in ('2.16', '2.17')
  for other in kfp_platform.RELEASES[:kfp_platform.RELEASES.index(release)]:
    if other == '2.4' or (secure and other not in ('2.16', '2.17')):
      with pytest.raises(json_format.ParseError, match='has no field named'):
        kfp_proto.parse(other, config)
    else:
      kfp_proto.parse(other, config)

def test_the_same_settings_for_the_newest_release_break_the_oldest(tmp_path):
  """Why the release matters: 2.17's spec (the form main wrote for every
  release) is not what 2.4 or 2.5 parse."""
  _, config = _compile(tmp_path, '2.17')
  for old in ('2.4', '2.5', '2.14', '2.15'):
    with pytest.raises(json_format.ParseError):
      kfp_proto.parse(old, config)


@pytest.mark.parametrize('release,settings,named', [
    ('2.15', {'volumes': [{'name': 'data', 'persistentVolumeClaim': {
        'claimName': 'penguin-data'}}], 'volume_mounts': [
            {'name': 'data', 'mountPath': '/data', 'subPath': 'penguin'}]},
     "the subPath 'penguin'"),
    ('2.5', {'security_context': {'runAsUser': 1000680000}},
     "the securityContext {'runAsUser': 1000680000}"),
    ('2.4', {'security_context': {'runAsNonRoot': False}},
     "the securityContext {'runAsNonRoot': False}"),
])
def test_a_setting_the_release_cannot_carry_is_refused_naming_the_release(
    release, settings, named, tmp_path):
  with pytest.raises(InvalidArgumentError) as raised:
    _compile(tmp_path, release, settings=settings)
  message = str(raised.value)
  assert named in message and f'Kubeflow Pipelines {release}' in message
  assert '--kfp-release 2.16' in message
  assert_four_parts(message)
  assert not (tmp_path / f'p-{release}.yaml').exists()
  _, config = _compile(tmp_path, '2.16', settings=settings)
  kfp_proto.parse('2.16', config)


def test_an_unknown_release_is_refused(tmp_path, capsys):
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  with pytest.raises(InvalidArgumentError) as raised:
    _compile(tmp_path, '2.3')
  assert "Received: kfp_release='2.3'" in str(raised.value)
  assert_four_parts(str(raised.value))
  with pytest.raises(SystemExit):
    penguin_pipeline_kubeflow.main([
        '--kfp-release', '2.3', '--image', IMAGE, '--pipeline-root',
        'gs://b/r', '--serving-model-dir', 'gs://b/s'])
  assert 'invalid choice' in capsys.readouterr().err


def test_a_step_that_launches_a_job_leaves_placement_to_the_job(tmp_path):
  """With several workers the step only waits: the node selector and
  tolerations go to the job's pods (in the step's environment), not to
  the step."""
  job, config = _compile(tmp_path, '2.5', settings=None, resources=RESOURCES,
                         num_workers=2)
  assert config is None or 'nodeSelector' not in config
  (asked,) = [json.loads(e['value']) for e in kfp_step.container(
      job, 'GenericTrainer')['env'] if e['name'] == STEP_JOB_ENV]
  assert asked['resources']['node_selector'] == RESOURCES['node_selector']


def _step_pod_as_kfp_builds_it(release, container, config):
  """The step's pod as KFP builds it (what matters to Pod Security): the
  executor template of KFP's Argo compiler, then the driver's patch.
  From 2.16 (`backend/src/v2/compiler/argocompiler/security_context.go`,
  `applySecurityContextToExecutorTemplate`): the pod gets
  `seccompProfile: RuntimeDefault`; the main container, unless set,
  `allowPrivilegeEscalation: false`, `capabilities.drop: [ALL]`,
  `seccompProfile: RuntimeDefault` (not runAsNonRoot); the kfp-launcher
  init container also `runAsNonRoot: true`. The driver then copies the
  platform spec's securityContext onto the main container
  (`backend/src/v2/driver/k8s.go`). Before 2.16 neither adds anything
  (2.14's argo.go sets only an admin's runAsUser). Argo's own init and
  wait containers take the workflow controller's executor settings (a
  cluster's configuration), left out here."""
  main = {'name': 'main', 'image': container['image']}
  launcher = {'name': 'kfp-launcher', 'image': 'ghcr.io/kubeflow/kfp-launcher'}
  pod = {'containers': [main], 'initContainers': [launcher]}
  if release in ('2.16', '2.17'):
    pod['securityContext'] = {'seccompProfile': {'type': 'RuntimeDefault'}}
    restricted = {'allowPrivilegeEscalation': False,
                  'capabilities': {'drop': ['ALL']},
                  'seccompProfile': {'type': 'RuntimeDefault'}}
    main['securityContext'] = dict(restricted)
    launcher['securityContext'] = {**restricted, 'runAsNonRoot': True}
    main['securityContext'].update((config or {}).get('securityContext', {}))
  return pod


@pytest.mark.parametrize('release', kfp_platform.RELEASES)
def test_the_step_pod_meets_restricted_from_2_16_and_the_compile_says_when_not(
    release, tmp_path, caplog):
  """From 2.16 the compiled step's pod, as KFP builds it, passes the
  stand-in's Pod Security "restricted" checks with no settings given;
  before, it fails them, and the compile names why."""
  with caplog.at_level(logging.WARNING):
    job, config = _compile(tmp_path, release, settings=None)
  pod = _step_pod_as_kfp_builds_it(
      release, kfp_step.container(job, 'GenericTrainer'), config)
  violations = kube_api.pod_security_violations(pod, 'restricted')
  if release in ('2.16', '2.17'):
    assert config == {'securityContext': {'runAsNonRoot': True}}
    kfp_proto.parse(release, config)
    assert not violations, violations
    assert 'restricted' not in caplog.text
  else:
    assert config is None
    assert violations
    assert (f'does not meet Pod Security "restricted" on KFP {release}'
            in caplog.text)
    assert '--kfp-release 2.16' in caplog.text


def test_a_toleration_with_a_field_kubernetes_lacks_is_refused(tmp_path):
  with pytest.raises(InvalidArgumentError) as raised:
    _compile(tmp_path, '2.4', settings=None, resources={'tolerations': [
        {'key': 'gpu', 'operator': 'Exists', 'effects': 'NoSchedule'}]})
  assert "fields ['effects']" in str(raised.value)
  assert_four_parts(str(raised.value))
