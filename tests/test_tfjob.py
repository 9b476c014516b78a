"""TFJob manifests for the Kubeflow Training Operator: shape, the operator's
CRD (v1.9.4, pinned in tests/schemas/, checked as the API server checks it:
`crd_schema`), the names its webhook and its Services accept, restarts, pod
settings, errors."""

import pytest

import compiled_steps
import crd_schema
from compiled_steps import ARGS, COMMAND, IMAGE, SETTINGS
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import pod_settings as pod_settings_lib
from generic_trainer.kubeflow import tfjob
from generic_trainer.kubeflow.pod_settings import PodSettings

_ISTIO_OFF = {'annotations': {'sidecar.istio.io/inject': 'false'}}


def _container():
  return {'name': 'tensorflow', 'image': IMAGE,
          'command': COMMAND, 'args': ARGS,
          'securityContext': pod_settings_lib.RESTRICTED_CONTAINER,
          'volumeMounts': [pod_settings_lib.TMP_MOUNT]}


def _render(name='penguin-train', num_workers=2, **kwargs):
  """A TFJob that has passed the pinned CRD as the API server checks it."""
  manifest = tfjob.render(name, IMAGE, COMMAND, ARGS,
                          num_workers=num_workers, **kwargs)
  crd_schema.check(manifest, crd_schema.TFJOB_CRD)
  return manifest


def test_three_workers_are_a_chief_and_two_workers():
  """num_workers=3 renders one Chief and two Workers running the entrypoint."""
  manifest = tfjob.render('penguin-train', 'example.com/trainer:1', COMMAND,
                          ARGS, num_workers=3, namespace='kubeflow',
                          active_deadline_seconds=3600)
  replica = {'replicas': 1, 'restartPolicy': 'Never',
             'template': {'metadata': _ISTIO_OFF,
                          'spec': {'containers': [_container()],
                                   'terminationGracePeriodSeconds': 60,
                                   'volumes': [pod_settings_lib.TMP_VOLUME]}}}
  assert manifest == {
      'apiVersion': 'kubeflow.org/v1',
      'kind': 'TFJob',
      'metadata': {'name': 'penguin-train', 'namespace': 'kubeflow'},
      'spec': {
          'runPolicy': {'activeDeadlineSeconds': 3600, 'backoffLimit': 0,
                        'cleanPodPolicy': 'Running'},
          'tfReplicaSpecs': {'Chief': replica,
                             'Worker': {**replica, 'replicas': 2}},
      },
  }


def test_pods_get_a_grace_period_for_the_preemption_checkpoint():
  """Every pod has terminationGracePeriodSeconds, 60 s unless given."""
  for given, expected in ((None, 60), (120, 120)):
    extra = {} if given is None else {'termination_grace_period_s': given}
    manifest = tfjob.render('penguin-train', 'example.com/trainer:1',
                            COMMAND, ARGS, num_workers=2, **extra)
    for replica in manifest['spec']['tfReplicaSpecs'].values():
      assert replica['template']['spec'][
          'terminationGracePeriodSeconds'] == expected


def test_one_worker_is_a_chief_alone():
  """num_workers=1 renders only the Chief."""
  manifest = tfjob.render('penguin-train', 'example.com/trainer:1', COMMAND,
                          ARGS, num_workers=1)
  assert list(manifest['spec']['tfReplicaSpecs']) == ['Chief']
  assert 'namespace' not in manifest['metadata']


def test_env_resources_and_service_account_reach_every_replica():
  """Extra pod settings are in the Chief's and the Workers' pods."""
  manifest = tfjob.render(
      'penguin-train', 'example.com/trainer:1', COMMAND, ARGS, 2,
      env={'GOOGLE_CLOUD_PROJECT': 'p'},
      resources={'limits': {'cpu': '2', 'memory': '4Gi'}},
      service_account='trainer')
  for replica in manifest['spec']['tfReplicaSpecs'].values():
    pod = replica['template']['spec']
    assert pod['serviceAccountName'] == 'trainer'
    assert pod['containers'][0]['env'] == [
        {'name': 'GOOGLE_CLOUD_PROJECT', 'value': 'p'}]
    assert pod['containers'][0]['resources'] == {
        'limits': {'cpu': '2', 'memory': '4Gi'}}


def test_the_sdk_builds_the_same_manifest():
  """With the operator's SDK installed, its models give the same manifest."""
  pytest.importorskip('kubeflow.training')
  plain = {'apiVersion': 'kubeflow.org/v1', 'kind': 'TFJob',
           'metadata': {'name': 'a'},
           'spec': {'runPolicy': {'backoffLimit': 0,
                                  'cleanPodPolicy': 'Running'},
                    'tfReplicaSpecs': {'Chief': {
                        'replicas': 1, 'restartPolicy': 'Never',
                        'template': {'spec': {'containers': [
                            _container()]}}}}}}
  assert tfjob._through_sdk(plain) == plain  # pylint: disable=protected-access


@pytest.mark.parametrize('kwargs, message', [
    ({'name': 'Penguin_Train'},
     r"'name' must be an RFC 1035 label: .*TFJob webhook.*Received: "
     r"name='Penguin_Train'"),
    ({'num_workers': 0}, r"'num_workers' must be a positive int.*"
     r'Received: num_workers=0'),
    ({'restart_policy': 'Sometimes'}, r"'restart_policy' must be one of "
     r"\('Never', 'OnFailure', 'ExitCode', 'Always'\)"),
    ({'image': ''}, r'at spec/tfReplicaSpecs/Chief/template/spec/containers/0/'
     r"image: '' should be non-empty"),
])
def test_render_errors(kwargs, message):
  """A wrong argument is named, with the schema path when the schema fails."""
  arguments = {'name': 'penguin-train', 'image': 'example.com/trainer:1',
               'command': COMMAND, 'args': ARGS, 'num_workers': 2}
  arguments.update(kwargs)
  with pytest.raises(InvalidArgumentError, match=message):
    tfjob.render(**arguments)


@pytest.mark.parametrize('replica_specs, message', [
    ({'Chief': {'replicas': 2, 'template': {'spec': {'containers': [
        _container()]}}}}, r'2 is greater than the maximum of 1'),
    ({'Launcher': {'template': {'spec': {'containers': [_container()]}}}},
     r"'Launcher' is not one of \['Chief', 'Master', 'Worker', 'PS', "
     r"'Evaluator'\]"),
    ({'Worker': {'template': {'spec': {'containers': [
        {**_container(), 'name': 'trainer'}]}}}},
     r'does not contain items matching'),
])
def test_schema_rejects_what_the_operator_rejects(replica_specs, message):
  """Replica counts, types and the 'tensorflow' container are checked."""
  manifest = {'apiVersion': 'kubeflow.org/v1', 'kind': 'TFJob',
              'metadata': {'name': 'a'},
              'spec': {'tfReplicaSpecs': replica_specs}}
  with pytest.raises(InvalidArgumentError, match=message):
    tfjob.validate(manifest)


def test_the_schema_refuses_a_name_the_webhook_refuses():
  """tfjob.validate, for a manifest written elsewhere: an RFC 1035 name."""
  manifest = {'apiVersion': 'kubeflow.org/v1', 'kind': 'TFJob',
              'metadata': {'name': '1-penguin'},
              'spec': {'tfReplicaSpecs': {'Chief': {'template': {'spec': {
                  'containers': [_container()]}}}}}}
  with pytest.raises(InvalidArgumentError,
                     match=r"at metadata/name: '1-penguin' does not match"):
    tfjob.validate(manifest)


@pytest.mark.parametrize('kwargs', [
    {},
    {'num_workers': 1},
    {'num_workers': 3, 'namespace': 'kubeflow', 'active_deadline_seconds': 60,
     'env': {'A': '1'}, 'resources': {'limits': {'cpu': '2'}},
     'restart_policy': 'OnFailure', 'backoff_limit': 4,
     'pod_settings': SETTINGS},
])
def test_every_render_passes_the_pinned_crd(kwargs):
  """What render writes, settings and all, is what the API server takes."""
  _render(**kwargs)


def test_the_pinned_crd_refuses_an_unknown_field():
  """Strict field validation: an undeclared field is refused."""
  manifest = _render()
  manifest['spec']['runPolicy']['backofLimit'] = 3
  assert crd_schema.errors(manifest, crd_schema.TFJOB_CRD) == [
      'spec.runPolicy: Additional properties are not allowed '
      "('backofLimit' was unexpected)"]


@pytest.mark.parametrize('num_workers, longest, service', [
    (1, 55, 'chief-0'), (2, 54, 'worker-0'), (11, 54, 'worker-9'),
    (12, 53, 'worker-10')])
def test_the_longest_name_the_services_allow(num_workers, longest, service):
  """The operator names each replica's Service `<name>-<type>-<index>`, at
  most 63: the longest name passes, one more character is refused."""
  assert tfjob.longest_name(num_workers) == longest
  _render('p' * longest, num_workers)
  with pytest.raises(
      InvalidArgumentError,
      match=rf"'name' must be at most {longest} characters \(the Training "
      rf"Operator's TFJob webhook, and the Service 'p{{{longest + 1}}}-"
      rf"{service}' it names after the job must fit in 63\)\. Received: "
      rf"name='p{{{longest + 1}}}' \({longest + 1} characters\)"):
    _render('p' * (longest + 1), num_workers)


@pytest.mark.parametrize('name', ['1-penguin', 'penguin.train', 'penguin-'])
def test_the_name_is_an_rfc_1035_label(name):
  """The webhook's NameIsDNS1035Label: a letter first, no dots."""
  with pytest.raises(InvalidArgumentError,
                     match=rf"'name' must be an RFC 1035 label.*Received: "
                     rf'name={name!r}'):
    _render(name)


def test_pod_settings_reach_the_chief_and_every_worker():
  """Service account, annotations, labels, env, volumes, mounts and the
  security context are in every replica's pod template."""
  manifest = _render(num_workers=3, env={'A': '1'},
                     pod_settings=PodSettings(**SETTINGS))
  specs = manifest['spec']['tfReplicaSpecs']
  assert sorted(specs) == ['Chief', 'Worker']
  for replica in specs.values():
    template = replica['template']
    assert template['metadata'] == {
        'annotations': {'sidecar.istio.io/inject': 'false',
                        'example.com/team': 'penguins'},
        'labels': {'team': 'penguins'}}
    pod = template['spec']
    assert pod['serviceAccountName'] == 'pipeline-runner'
    assert pod['volumes'] == SETTINGS['volumes'] + [
        pod_settings_lib.TMP_VOLUME]
    assert pod['securityContext'] == {'fsGroup': 0}
    (container,) = pod['containers']
    assert container['env'] == [{'name': 'A', 'value': '1'},
                                {'name': 'GOOGLE_CLOUD_PROJECT', 'value': 'p'}]
    assert container['volumeMounts'] == SETTINGS['volume_mounts'] + [
        pod_settings_lib.TMP_MOUNT]
    assert container['securityContext'] == (
        pod_settings_lib.RESTRICTED_CONTAINER)


@pytest.mark.parametrize('pod_settings, expected', [
    (None, 'false'),
    ({'annotations': {'sidecar.istio.io/inject': 'true'}}, 'true'),
])
def test_istio_sidecar_is_off_unless_the_settings_say(pod_settings, expected):
  """A sidecar would keep a finished pod running: off by default."""
  manifest = _render(pod_settings=pod_settings)
  for replica in manifest['spec']['tfReplicaSpecs'].values():
    assert replica['template']['metadata']['annotations'] == {
        'sidecar.istio.io/inject': expected}


def test_service_account_argument_and_pod_settings_agree():
  """service_account= sets the settings' account; two accounts are
  refused."""
  manifest = _render(service_account='trainer', pod_settings={'labels': {
      'team': 'penguins'}})
  pod = manifest['spec']['tfReplicaSpecs']['Chief']['template']['spec']
  assert pod['serviceAccountName'] == 'trainer'
  with pytest.raises(InvalidArgumentError,
                     match=r"'service_account' and pod_settings' "
                     r"service_account must not name two accounts.*Received: "
                     r"service_account='trainer', pod_settings service_account"
                     r"='pipeline-runner'"):
    _render(service_account='trainer', pod_settings=SETTINGS)


def test_a_compiled_step_gives_its_replicas_restarts_and_pod_settings():
  """A 2.1 step's num_workers 3.0, max_restarts 1.0 and pod_settings JSON
  reach the TFJob."""
  job = compiled_steps.job({'num_workers': 3.0, 'max_restarts': 1.0,
                            'pod_settings': PodSettings(**SETTINGS).to_json()})
  manifest = tfjob.render_for_step(job, {'inputs': {}}, 'penguin-train')
  crd_schema.check(manifest, crd_schema.TFJOB_CRD)
  specs = manifest['spec']['tfReplicaSpecs']
  assert (specs['Chief']['replicas'], specs['Worker']['replicas']) == (1, 2)
  assert manifest['spec']['runPolicy']['backoffLimit'] == 3
  for replica in specs.values():
    assert replica['restartPolicy'] == 'OnFailure'
    assert replica['template']['spec']['serviceAccountName'] == (
        'pipeline-runner')
    assert replica['template']['metadata']['labels'] == {'team': 'penguins'}


def test_the_sdk_path_keeps_every_pod_field():
  """The Kubernetes client's V1PodTemplateSpec, which the SDK path builds,
  gives back the pod template with its settings, field for field."""
  k8s = pytest.importorskip('kubernetes.client')
  template = _render(pod_settings=SETTINGS, resources={'limits': {
      'cpu': '2'}})['spec']['tfReplicaSpecs']['Chief']['template']
  model = tfjob._pod_template(template)  # pylint: disable=protected-access
  assert k8s.ApiClient().sanitize_for_serialization(model) == template


def test_component_renders_its_tfjob():
  """GenericTrainer(num_workers=2).to_tfjob gives a Chief and one Worker."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from conftest import PENGUIN_MODULE  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                           module_file=PENGUIN_MODULE, num_workers=2)
  manifest = trainer.to_tfjob('penguin-train', 'example.com/trainer:1',
                              {'inputs': {}, 'outputs': {}})
  specs = manifest['spec']['tfReplicaSpecs']
  assert (specs['Chief']['replicas'], specs['Worker']['replicas']) == (1, 1)
  container = specs['Worker']['template']['spec']['containers'][0]
  assert container['command'] == COMMAND
  assert container['args'][:2] == ARGS[:2]
  # max_restarts unset: 2 restarts of both replicas, from the checkpoint.
  assert [r['restartPolicy'] for r in specs.values()] == ['OnFailure'] * 2
  assert manifest['spec']['runPolicy']['backoffLimit'] == 4
  crd_schema.check(manifest, crd_schema.TFJOB_CRD)


def test_component_gives_every_pod_its_pod_settings():
  """GenericTrainer(pod_settings=...).to_tfjob: the Chief and the Worker."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from conftest import PENGUIN_MODULE  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                           module_file=PENGUIN_MODULE, num_workers=2,
                           pod_settings=SETTINGS)
  manifest = trainer.to_tfjob('penguin-train', 'example.com/trainer:1',
                              {'inputs': {}, 'outputs': {}})
  crd_schema.check(manifest, crd_schema.TFJOB_CRD)
  for replica in manifest['spec']['tfReplicaSpecs'].values():
    assert replica['template']['spec']['securityContext'] == {'fsGroup': 0}
    (container,) = replica['template']['spec']['containers']
    assert container['securityContext']['runAsNonRoot'] is True


def test_component_without_restarts_renders_a_job_that_fails_fast():
  """max_restarts=0: a failed pod fails the job, as before restarts."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from conftest import PENGUIN_MODULE  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                           module_file=PENGUIN_MODULE, num_workers=2,
                           max_restarts=0)
  manifest = trainer.to_tfjob('penguin-train', 'example.com/trainer:1',
                              {'inputs': {}, 'outputs': {}})
  specs = manifest['spec']['tfReplicaSpecs']
  assert [r['restartPolicy'] for r in specs.values()] == ['Never'] * 2
  assert manifest['spec']['runPolicy']['backoffLimit'] == 0


@pytest.mark.parametrize('max_restarts, replicas, expected', [
    (None, 3, {'restart_policy': 'OnFailure', 'backoff_limit': 6}),
    (1, 2, {'restart_policy': 'OnFailure', 'backoff_limit': 2}),
    (0, 3, {'restart_policy': 'Never', 'backoff_limit': 0}),
])
def test_restart_settings_follow_max_restarts(max_restarts, replicas,
                                              expected):
  """Failed pods restart (and resume) max_restarts times per replica."""
  assert tfjob.restart_settings(max_restarts, replicas) == expected


def test_every_replica_is_restricted_by_default_and_declares_its_tmp():
  """With no pod settings, Chief and Workers meet Pod Security
  "restricted" and write only to an emptyDir at /tmp; the CRD takes both."""
  manifest = _render(num_workers=2)
  for replica in manifest['spec']['tfReplicaSpecs'].values():
    spec = replica['template']['spec']
    (container,) = spec['containers']
    assert container['securityContext'] == {
        'allowPrivilegeEscalation': False, 'capabilities': {'drop': ['ALL']},
        'runAsNonRoot': True, 'seccompProfile': {'type': 'RuntimeDefault'},
        'readOnlyRootFilesystem': True}
    assert container['volumeMounts'] == [
        {'name': 'generic-trainer-tmp', 'mountPath': '/tmp'}]
    assert spec['volumes'] == [{'name': 'generic-trainer-tmp',
                                'emptyDir': {}}]
