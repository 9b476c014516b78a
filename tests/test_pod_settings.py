"""`GenericTrainer(pod_settings=...)`: checked when the component is built,
carried to every pod template and, where KFP can, to the compiled step."""

import pytest

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import kfp_platform
from generic_trainer.kubeflow import pod_settings
from message_parts import assert_four_parts

SETTINGS = {
    'service_account': 'pipeline-runner',
    'annotations': {'example.com/owner': 'penguins'},
    'labels': {'team': 'penguins'},
    'env': {'GENERIC_TRAINER_WORKER_NETWORK': 'any'},
    'volumes': [{'name': 'data', 'persistentVolumeClaim': {
        'claimName': 'penguin-data'}},
                {'name': 'scratch', 'emptyDir': {'sizeLimit': '1Gi'}},
                {'name': 'certs', 'csi': {'driver': 'example.com/certs'}}],
    'volume_mounts': [{'name': 'data', 'mountPath': '/data'},
                      {'name': 'scratch', 'mountPath': '/scratch'},
                      {'name': 'certs', 'mountPath': '/certs'}],
    'security_context': {'fsGroup': 0, 'runAsNonRoot': True},
}


def test_apply_adds_every_setting_and_turns_istio_off():
  settings = pod_settings.from_value(SETTINGS)
  template = {'spec': {'containers': [
      {'name': 'tensorflow', 'env': [{'name': 'GENERIC_TRAINER_WORKER_NETWORK',
                                      'value': 'loopback'}]},
      {'name': 'sidecar'}]}}
  applied = settings.apply(template, 'tensorflow')
  assert applied['metadata'] == {
      'annotations': {'sidecar.istio.io/inject': 'false',
                      'example.com/owner': 'penguins'},
      'labels': {'team': 'penguins'}}
  spec = applied['spec']
  assert spec['serviceAccountName'] == 'pipeline-runner'
  assert [v['name'] for v in spec['volumes']] == [
      'data', 'scratch', 'certs', 'generic-trainer-tmp']
  assert spec['securityContext'] == {'fsGroup': 0}
  trainer, sidecar = spec['containers']
  assert trainer['securityContext'] == pod_settings.RESTRICTED_CONTAINER
  # The settings' value wins over the template's, once.
  assert trainer['env'] == [{'name': 'GENERIC_TRAINER_WORKER_NETWORK',
                             'value': 'any'}]
  assert [m['mountPath'] for m in trainer['volumeMounts']] == [
      '/data', '/scratch', '/certs', '/tmp']
  assert sidecar == {'name': 'sidecar'}
  assert 'metadata' not in template  # The template given is not changed.


def test_pods_are_restricted_by_default_with_tmp_declared():
  """With no settings, the training container meets Pod Security
  "restricted" and writes only to an emptyDir at /tmp."""
  applied = pod_settings.PodSettings().apply(
      {'spec': {'containers': [{'name': 'node'}]}}, 'node')
  (container,) = applied['spec']['containers']
  assert container['securityContext'] == {
      'allowPrivilegeEscalation': False, 'capabilities': {'drop': ['ALL']},
      'runAsNonRoot': True, 'seccompProfile': {'type': 'RuntimeDefault'},
      'readOnlyRootFilesystem': True}
  assert container['volumeMounts'] == [
      {'name': 'generic-trainer-tmp', 'mountPath': '/tmp'}]
  assert applied['spec']['volumes'] == [
      {'name': 'generic-trainer-tmp', 'emptyDir': {}}]
  assert 'securityContext' not in applied['spec']


def test_the_user_overrides_each_restricted_field():
  """A container field of `security_context` replaces its default; a /tmp
  of the settings' replaces the emptyDir."""
  settings = pod_settings.from_value({
      'security_context': {'allowPrivilegeEscalation': True,
                           'capabilities': {'add': ['NET_RAW']},
                           'readOnlyRootFilesystem': False,
                           'runAsNonRoot': False, 'runAsUser': 0,
                           'fsGroup': 0},
      'volumes': [{'name': 'scratch', 'emptyDir': {'medium': 'Memory'}}],
      'volume_mounts': [{'name': 'scratch', 'mountPath': '/tmp'}]})
  applied = settings.apply({'spec': {'containers': [{'name': 'node'}]}},
                           'node')
  (container,) = applied['spec']['containers']
  assert container['securityContext'] == {
      'allowPrivilegeEscalation': True, 'capabilities': {'add': ['NET_RAW']},
      'runAsNonRoot': False, 'seccompProfile': {'type': 'RuntimeDefault'},
      'readOnlyRootFilesystem': False, 'runAsUser': 0}
  assert applied['spec']['securityContext'] == {'fsGroup': 0}
  assert [v['name'] for v in applied['spec']['volumes']] == ['scratch']
  assert container['volumeMounts'] == [{'name': 'scratch',
                                        'mountPath': '/tmp'}]


def test_the_istio_annotation_can_be_set_otherwise():
  settings = pod_settings.from_value(
      {'annotations': {'sidecar.istio.io/inject': 'true'}})
  applied = settings.apply({'spec': {'containers': []}})
  assert applied['metadata']['annotations'] == {
      'sidecar.istio.io/inject': 'true'}
  assert pod_settings.PodSettings().apply({'spec': {}})['metadata'] == {
      'annotations': {'sidecar.istio.io/inject': 'false'}}


def test_it_round_trips_through_the_execution_property():
  settings = pod_settings.from_value(SETTINGS)
  assert pod_settings.from_json(settings.to_json()) == settings
  assert pod_settings.from_json(None) is None
  assert pod_settings.from_json(pod_settings.PodSettings().to_json()) == (
      pod_settings.PodSettings())


def test_what_kfp_cannot_carry_is_named_with_where_it_goes():
  settings = pod_settings.from_value(SETTINGS)
  missing = settings.not_carried_by_kfp()
  assert any('service_account=' in m and 'per run' in m for m in missing)
  assert any("volume 'certs' of kind 'csi'" in m for m in missing)
  assert any('security_context fsGroup' in m for m in missing)
  assert not any(m.startswith('security_context runAsNonRoot') for m in missing)
  config = kfp_platform.executor_config(settings, None, '2.16')
  assert config['emptyDirMounts'] == [
      {'volumeName': 'scratch', 'mountPath': '/scratch', 'sizeLimit': '1Gi'}]
  assert config['securityContext'] == {'runAsNonRoot': True}
  assert 'certs' not in str(config)


@pytest.mark.parametrize('value,named', [
    ('not json', 'must be JSON'),
    ({'service_acount': 'x'}, "unknown keys ['service_acount']"),
    ({'resources': {}}, 'go in `resources`'),
    ({'service_account': 'Pipeline_Runner'}, "Received: 'Pipeline_Runner'"),
    ({'annotations': {'sidecar.istio.io/inject': False}},
     "quote numbers and booleans"),
    ({'labels': {'team': 'x' * 64}}, 'at most 63'),
    ({'labels': {'bad key!': 'x'}}, 'a Kubernetes key'),
    ({'env': {'1ST': 'x'}}, "an environment variable's name"),
    ({'env': {'TF_CONFIG': '{}'}}, 'a name the cluster does not set'),
    ({'env': {'JOB_INDEX': '0'}}, 'a name the cluster does not set'),
    ({'volumes': [{'name': 'd', 'emptyDir': {}}],
      'volume_mounts': [{'name': 'd', 'mountPath': '/d', 'readonly': True}]},
     "one of a VolumeMount's fields"),
    ({'volumes': [{'name': 'data'}]}, 'exactly one source'),
    ({'volumes': [{'name': 'd', 'emptyDir': {}}, {'name': 'd', 'emptyDir': {}}]},
     'a name no other volume has'),
    ({'volume_mounts': [{'name': 'data', 'mountPath': '/data'}]},
     'the name of one of the volumes []'),
    ({'volumes': [{'name': 'd', 'emptyDir': {}}],
      'volume_mounts': [{'name': 'd', 'mountPath': 'data'}]}, 'absolute path'),
    ({'security_context': {'fsgroup': 0}}, 'container securityContext fields'),
    ({'security_context': {'capabilities': ['ALL']}}, 'a dict'),
    ({'security_context': {'fsGroup': True}}, 'a int'),
])
def test_a_wrong_setting_is_refused_naming_it(value, named):
  with pytest.raises(InvalidArgumentError, match='pod_settings') as raised:
    pod_settings.from_value(value)
  assert named in str(raised.value)
  assert_four_parts(str(raised.value))


def test_the_component_checks_them_and_carries_them_as_json():
  from generic_trainer import GenericTrainer  # pylint: disable=g-import-not-at-top
  from generic_trainer.keys import POD_SETTINGS_KEY  # pylint: disable=g-import-not-at-top
  from tfx.types import channel_utils, standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = channel_utils.as_channel([standard_artifacts.Examples()])
  trainer = GenericTrainer(examples=examples, module_path='penguin_keras',
                           pod_settings=SETTINGS)
  assert pod_settings.from_json(
      trainer.exec_properties[POD_SETTINGS_KEY]) == trainer.pod_settings
  assert trainer.pod_settings.service_account == 'pipeline-runner'
  with pytest.raises(InvalidArgumentError, match="unknown keys \\['cpu'\\]"):
    GenericTrainer(examples=examples, module_path='penguin_keras',
                   pod_settings={'cpu': 2})
