"""Kubeflow Trainer v2: the TrainJob and TrainingRuntime, checked against the
CRDs the Trainer project publishes (v2.3.0, pinned in tests/schemas/) as the
API server checks them (`crd_schema`); the names Trainer and JobSet accept;
restarts; and the resources and pod settings a GenericTrainer asks for, in
every pod description."""

import hashlib
import json
import os

import pytest

import compiled_steps
import crd_schema
from compiled_steps import ARGS, COMMAND, IMAGE, SETTINGS
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import kfp_step
from generic_trainer.kubeflow import pod_settings as pod_settings_lib
from generic_trainer.kubeflow import resources as resources_lib
from generic_trainer.kubeflow import tfjob
from generic_trainer.kubeflow import trainjob
from generic_trainer.kubeflow.pod_settings import PodSettings

_RESOURCES = {'cpu': 4, 'memory': '16G', 'accelerator_type': 'NVIDIA_TESLA_T4',
              'accelerator_count': 2,
              'node_selector': {'cloud.google.com/gke-accelerator':
                                'nvidia-tesla-t4'},
              'tolerations': [{'key': 'nvidia.com/gpu', 'operator': 'Exists',
                               'effect': 'NoSchedule'}]}
_K8S = {'limits': {'cpu': '4', 'memory': '16G', 'nvidia.com/gpu': '2'},
        'requests': {'cpu': '4', 'memory': '16G'}}


def _valid(rendered):
  """Both manifests pass the pinned CRDs as the API server checks them."""
  crd_schema.check(rendered['trainjob'], crd_schema.TRAINJOB_CRD)
  crd_schema.check(rendered['runtime'], crd_schema.TRAININGRUNTIME_CRD)


def _render(name='penguin-train', num_nodes=2, **kwargs):
  return trainjob.render(name, IMAGE, COMMAND, ARGS,
                         num_nodes=num_nodes, **kwargs)


def _pod(rendered):
  """The runtime's pod template: every node's pod."""
  (job,) = rendered['runtime']['spec']['template']['spec']['replicatedJobs']
  return job['template']['spec']['template']


def test_trainjob_and_runtime_validate_against_the_pinned_crds():
  """Both manifests pass the Trainer project's CRDs, resources, restarts
  and pod settings and all."""
  rendered = trainjob.render(
      'penguin-train', 'example.com/trainer:1', COMMAND, ARGS, num_nodes=2,
      namespace='kubeflow', env={'EXTRA': '1'}, max_restarts=3,
      resources=resources_lib.from_value(_RESOURCES),
      pod_settings=PodSettings(**SETTINGS))
  _valid(rendered)
  assert rendered['trainjob']['spec']['runtimeRef'] == {
      'apiGroup': 'trainer.kubeflow.org', 'kind': 'TrainingRuntime',
      'name': 'penguin-train-runtime'}
  assert rendered['runtime']['metadata'] == {
      'name': 'penguin-train-runtime', 'namespace': 'kubeflow'}


@pytest.mark.parametrize('path', [crd_schema.TRAINJOB_CRD,
                                  crd_schema.TRAININGRUNTIME_CRD,
                                  crd_schema.TFJOB_CRD])
def test_the_pinned_crds_are_the_published_files(path):
  """Each pinned CRD is byte for byte the file tests/schemas/README.md
  names (repository, tag, commit, SHA-256)."""
  with open(os.path.join(crd_schema.SCHEMAS, 'README.md')) as f:
    readme = f.read()
  with open(path, 'rb') as f:
    digest = hashlib.sha256(f.read()).hexdigest()
  (row,) = [line for line in readme.splitlines()
            if f'`{os.path.basename(path)}`' in line]
  assert row.rstrip(' |').endswith(digest)


def test_the_pinned_crd_refuses_a_wrong_type():
  """The CRD is not an empty shell: numNodes as a string is refused."""
  rendered = _render()
  rendered['trainjob']['spec']['trainer']['numNodes'] = 'two'
  assert crd_schema.errors(rendered['trainjob'], crd_schema.TRAINJOB_CRD) == [
      "spec.trainer.numNodes: 'two' is not of type 'integer'"]


def test_the_pinned_crd_refuses_an_unknown_field():
  """Strict field validation: a field the CRD does not declare is refused,
  in the TrainJob and deep in the runtime's pod template."""
  rendered = _render()
  rendered['trainjob']['spec']['trainer']['numNode'] = 2
  _pod(rendered)['spec']['containers'][0]['imagePullPolicyy'] = 'Always'
  assert crd_schema.errors(rendered['trainjob'], crd_schema.TRAINJOB_CRD) == [
      'spec.trainer: Additional properties are not allowed (\'numNode\' was '
      'unexpected)']
  (error,) = crd_schema.errors(rendered['runtime'],
                               crd_schema.TRAININGRUNTIME_CRD)
  assert error.startswith('spec.template.spec.replicatedJobs.0.template.spec.'
                          'template.spec.containers.0: Additional properties '
                          "are not allowed ('imagePullPolicyy' was")


def test_the_pinned_crd_refuses_an_empty_runtime_ref_name():
  """runtimeRef.name has minLength 1 in the CRD."""
  rendered = _render()
  rendered['trainjob']['spec']['runtimeRef']['name'] = ''
  assert crd_schema.errors(rendered['trainjob'], crd_schema.TRAINJOB_CRD) == [
      "spec.runtimeRef.name: '' should be non-empty"]


def test_the_pinned_crd_cel_rules_refuse_a_name():
  """The TrainJob CRD's CEL rules: an RFC 1035 label of at most 63."""
  rendered = _render()
  rendered['trainjob']['metadata']['name'] = '1-penguin'
  rendered['runtime']['spec']['mlPolicy']['torch'] = {}
  rendered['runtime']['spec']['mlPolicy']['mpi'] = {}
  assert crd_schema.errors(rendered['trainjob'], crd_schema.TRAINJOB_CRD) == [
      '(root): metadata.name must match RFC 1035 DNS label format (CEL: '
      "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$'))"]
  assert crd_schema.errors(
      rendered['runtime'], crd_schema.TRAININGRUNTIME_CRD)[0].startswith(
          'spec.mlPolicy: Only one of the policy can be configured')


def test_the_crd_check_refuses_a_float_for_an_integer():
  """numNodes 2.0 (a 2.1 pipeline spec's number) is not an integer."""
  rendered = _render()
  rendered['trainjob']['spec']['trainer']['numNodes'] = 2.0
  assert crd_schema.errors(rendered['trainjob'], crd_schema.TRAINJOB_CRD) == [
      "spec.trainer.numNodes: 2.0 is not of type 'integer'"]


def test_the_crd_check_knows_every_cel_rule_it_meets(tmp_path):
  """A CEL rule the check does not translate stops it, rather than being
  skipped."""
  crd = {'spec': {'group': 'example.com', 'names': {'kind': 'Thing'},
                  'versions': [{'name': 'v1', 'served': True, 'storage': True,
                                'schema': {'openAPIV3Schema': {
                                    'type': 'object',
                                    'x-kubernetes-validations': [
                                        {'rule': 'self.spec.size() > 2'}]}}}]}}
  path = tmp_path / 'crd.yaml'
  path.write_text(json.dumps(crd))
  with pytest.raises(crd_schema.UnknownRule,
                     match=r"CEL rule 'self.spec.size\(\) > 2'"):
    crd_schema.schema(str(path))


def test_jobset_pods_learn_their_place_and_names_resolve():
  """The runtime names stable host names and hands each pod the JobSet's
  labels; the TrainJob adds the node count: all the executor needs."""
  rendered = _render(num_nodes=3)
  spec = rendered['runtime']['spec']
  assert spec['mlPolicy'] == {'numNodes': 3}
  assert spec['template']['spec']['network']['enableDNSHostnames'] is True
  (job,) = spec['template']['spec']['replicatedJobs']
  assert job['name'] == 'node' and job['replicas'] == 1
  assert job['template']['metadata']['labels'] == {
      'trainer.kubeflow.org/trainjob-ancestor-step': 'trainer'}
  assert job['template']['spec']['completionMode'] == 'Indexed'
  (container,) = job['template']['spec']['template']['spec']['containers']
  assert container['name'] == 'node'
  assert [e['name'] for e in container['env']] == [
      'JOBSET_NAME', 'REPLICATED_JOB_NAME', 'JOB_INDEX']
  assert rendered['trainjob']['spec']['trainer']['env'] == [
      {'name': 'GENERIC_TRAINER_NUM_NODES', 'value': '3'}]


@pytest.mark.parametrize('num_nodes, longest', [(1, 48), (10, 48), (11, 47),
                                                (101, 46)])
def test_the_longest_name_jobset_accepts(num_nodes, longest):
  """JobSet's pod names `<name>-node-0-<last index>-abcde` fit in 63: the
  longest name is accepted, one more character refused, naming the limit."""
  assert trainjob.longest_name(num_nodes) == longest
  _valid(_render('p' * longest, num_nodes))
  with pytest.raises(
      InvalidArgumentError,
      match=rf"'name' must be at most {longest} characters .*JobSet's: the pod "
      rf"names 'p{{{longest + 1}}}-node-0-{num_nodes - 1}-abcde' of "
      rf'{num_nodes} node\(s\) must fit in 63\)\. Received: '
      rf"name='p{{{longest + 1}}}' \({longest + 1} characters\)\. Shorten it"):
    _render('p' * (longest + 1), num_nodes)


@pytest.mark.parametrize('name', ['Penguin', '1-penguin', 'penguin-',
                                  'penguin.train', ''])
def test_the_trainjob_name_is_an_rfc_1035_label(name):
  """A capital, a leading digit, a trailing '-' or a dot are refused."""
  with pytest.raises(InvalidArgumentError,
                     match=r"'name' must be an RFC 1035 label: .*Received: "
                     rf'name={name!r}\. Pass a name'):
    _render(name)


def test_the_runtime_name_is_an_object_name():
  """The runtime's name is a DNS-1123 subdomain (dots allowed, capitals
  not)."""
  _valid(_render(runtime_name='penguin.runtime-1'))
  with pytest.raises(InvalidArgumentError,
                     match=r"'runtime_name' must be a DNS-1123 subdomain.*"
                     r"Received: runtime_name='Penguin_Runtime'"):
    _render(runtime_name='Penguin_Runtime')


def test_num_nodes_must_be_positive():
  """A TrainJob of no nodes is refused, naming the argument."""
  with pytest.raises(InvalidArgumentError,
                     match=r"'num_nodes' must be a positive int.*"
                     r'Received: num_nodes=0'):
    trainjob.render('p', 'i', COMMAND, ARGS, num_nodes=0)


def test_resources_reach_every_pod_of_the_tfjob_and_the_trainjob():
  """Requests, limits, node selector and tolerations: every TFJob replica,
  the TrainJob's resourcesPerNode and the runtime's pod template."""
  resources = resources_lib.from_value(_RESOURCES)
  manifest = tfjob.render('penguin-train', 'example.com/trainer:1', COMMAND,
                          ARGS, num_workers=3, resources=resources)
  for replica in manifest['spec']['tfReplicaSpecs'].values():
    pod = replica['template']['spec']
    assert pod['containers'][0]['resources'] == _K8S
    assert pod['nodeSelector'] == _RESOURCES['node_selector']
    assert pod['tolerations'] == _RESOURCES['tolerations']
  rendered = trainjob.render('penguin-train', 'example.com/trainer:1',
                             COMMAND, ARGS, num_nodes=3,
                             resources=resources)
  assert rendered['trainjob']['spec']['trainer']['resourcesPerNode'] == _K8S
  pod = rendered['runtime']['spec']['template']['spec']['replicatedJobs'][0][
      'template']['spec']['template']['spec']
  assert pod['nodeSelector'] == _RESOURCES['node_selector']
  assert pod['tolerations'] == _RESOURCES['tolerations']


@pytest.mark.parametrize('value, message', [
    ('4 cores', r"'resources' must be a dict with keys among.*Received: "
     r'resources that is a str'),
    ({'gpu': 1}, r"'resources' has unknown keys \['gpu'\]"),
    ({'cpu': 'lots'}, r"'resources' cpu must be a positive number of cores.*"
     r"Received: cpu='lots'"),
    ({'memory': '16 gigs'}, r"'resources' memory must be Kubernetes' quantity"
     r".*Received: memory='16 gigs'"),
    ({'accelerator_count': 1}, r'accelerator_count needs accelerator_type'),
    ({'accelerator_type': 'NVIDIA_TESLA_T4', 'accelerator_count': 0},
     r"'resources' accelerator_count must be a positive int"),
    ({'tolerations': 'gpu'}, r"'resources' tolerations must be a list of "
     r'dicts'),
])
def test_wrong_resources_are_refused_when_the_component_is_built(
    penguin_artifacts, value, message):
  """GenericTrainer(resources=...) checks them in its constructor."""
  from tfx.types import channel_utils, standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer import GenericTrainer  # pylint: disable=g-import-not-at-top
  examples = channel_utils.as_channel([standard_artifacts.Examples()])
  with pytest.raises(InvalidArgumentError, match=message):
    GenericTrainer(examples=examples, module_path='penguin_keras',
                   resources=value)


@pytest.mark.parametrize('value, cpu, memory_gb, k8s_memory', [
    ({'cpu': '500m', 'memory': '512Mi'}, 0.5, 0.536870912, '537M'),
    ({'cpu': 2, 'memory': 8}, 2.0, 8.0, '8G'),
])
def test_units_as_kubernetes_and_kfp_write_them(value, cpu, memory_gb,
                                                k8s_memory):
  """Kubernetes' quantities become KFP's cores and GB, and back."""
  resources = resources_lib.from_value(value)
  assert (resources.cpu, resources.memory_gb) == (cpu, pytest.approx(
      memory_gb))
  assert resources.container()['limits']['memory'] == k8s_memory


def test_compiled_step_carries_the_trainer_resources(tmp_path):
  """The compiled trainer step asks for the CPU, memory and accelerator,
  and a TFJob or TrainJob rendered from it asks for the same."""
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / 'p.json')
  assert penguin_pipeline_kubeflow.main([
      '--image', 'example.com/trainer:1', '--pipeline-root', 'gs://b/root',
      '--serving-model-dir', 'gs://b/serving', '--trainer-cpu', '4',
      '--trainer-memory', '16G', '--trainer-accelerator', 'nvidia.com/gpu:2',
      '--output', path]) == 0
  job = kfp_step.load(path)
  container = kfp_step.container(job, 'GenericTrainer')
  assert container['resources'] == {
      'cpuLimit': 4.0, 'memoryLimit': 16.0, 'cpuRequest': 4.0,
      'memoryRequest': 16.0,
      'accelerator': {'type': 'nvidia.com/gpu', 'count': '2'}}
  assert 'resources' not in kfp_step.container(job, 'StatisticsGen')
  executor_input = {'inputs': {}, 'outputs': {'outputFile': '/tmp/out.json'}}
  manifest = tfjob.render_for_step(job, executor_input, 'penguin-train',
                                   num_workers=2)
  for replica in manifest['spec']['tfReplicaSpecs'].values():
    assert replica['template']['spec']['containers'][0]['resources'] == {
        'limits': {'cpu': '4', 'memory': '16G', 'nvidia.com/gpu': '2'},
        'requests': {'cpu': '4', 'memory': '16G'}}
  rendered = trainjob.render_for_step(job, executor_input, 'penguin-train',
                                      num_nodes=2)
  _valid(rendered)
  assert rendered['trainjob']['spec']['trainer']['resourcesPerNode'][
      'limits']['nvidia.com/gpu'] == '2'
  assert rendered['trainjob']['spec']['trainer']['args'][:2] == [
      '--executor_class_path', kfp_step.TRAINER_EXECUTOR]


def test_component_renders_its_trainjob(penguin_artifacts):
  """GenericTrainer.to_trainjob: its num_workers and resources."""
  from tfx.types import channel_utils, standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer import GenericTrainer  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(
      examples=channel_utils.as_channel([standard_artifacts.Examples()]),
      module_path='penguin_keras', num_workers=3,
      resources={'cpu': 2, 'memory': '4G'})
  rendered = trainer.to_trainjob('penguin-train', 'example.com/trainer:1',
                                 {'inputs': {}})
  assert rendered['trainjob']['spec']['trainer']['numNodes'] == 3
  assert rendered['trainjob']['spec']['trainer']['resourcesPerNode'] == {
      'limits': {'cpu': '2', 'memory': '4G'},
      'requests': {'cpu': '2', 'memory': '4G'}}
  _valid(rendered)


@pytest.mark.parametrize('max_restarts, expected', [(None, 2), (0, 0),
                                                    (5, 5)])
def test_restarts_follow_max_restarts(max_restarts, expected):
  """The JobSet restarts the group max_restarts times (None: 2); a pod
  failure fails its Job at once, which is what triggers the restart."""
  rendered = _render(max_restarts=max_restarts)
  _valid(rendered)
  spec = rendered['runtime']['spec']['template']['spec']
  assert spec['failurePolicy'] == {'maxRestarts': expected}
  (job,) = spec['replicatedJobs']
  assert job['template']['spec']['backoffLimit'] == 0
  assert _pod(rendered)['spec']['restartPolicy'] == 'Never'


def test_the_crd_types_failure_policy():
  """failurePolicy.maxRestarts is a field the CRD declares, as an integer."""
  rendered = _render()
  rendered['runtime']['spec']['template']['spec']['failurePolicy'][
      'maxRestarts'] = 'two'
  assert crd_schema.errors(
      rendered['runtime'], crd_schema.TRAININGRUNTIME_CRD) == [
          'spec.template.spec.failurePolicy.maxRestarts: '
          "'two' is not of type 'integer'"]


def test_wrong_max_restarts_is_refused():
  """A negative max_restarts is refused, naming the argument."""
  with pytest.raises(InvalidArgumentError,
                     match=r"'max_restarts' must be a non-negative int.*"
                     r'Received: max_restarts=-1'):
    _render(max_restarts=-1)


def test_pod_settings_reach_every_pod():
  """Service account, annotations, labels, env, volumes, mounts and the
  security context are in the runtime's pod template, which every node's
  pod is made from; the JobSet's own variables stay."""
  rendered = _render(pod_settings=PodSettings(**SETTINGS))
  _valid(rendered)
  pod = _pod(rendered)
  assert pod['metadata'] == {
      'annotations': {'sidecar.istio.io/inject': 'false',
                      'example.com/team': 'penguins'},
      'labels': {'team': 'penguins'}}
  assert pod['spec']['serviceAccountName'] == 'pipeline-runner'
  assert pod['spec']['volumes'] == SETTINGS['volumes'] + [
      pod_settings_lib.TMP_VOLUME]
  assert pod['spec']['securityContext'] == {'fsGroup': 0}
  (container,) = pod['spec']['containers']
  assert container['volumeMounts'] == SETTINGS['volume_mounts'] + [
      pod_settings_lib.TMP_MOUNT]
  assert container['securityContext'] == pod_settings_lib.RESTRICTED_CONTAINER
  assert [e['name'] for e in container['env']] == [
      'JOBSET_NAME', 'REPLICATED_JOB_NAME', 'JOB_INDEX',
      'GOOGLE_CLOUD_PROJECT']


@pytest.mark.parametrize('pod_settings, expected', [
    (None, 'false'),
    ({'annotations': {'sidecar.istio.io/inject': 'true'}}, 'true'),
])
def test_istio_sidecar_is_off_unless_the_settings_say(pod_settings, expected):
  """Istio's sidecar would keep a finished pod running: off by default."""
  pod = _pod(_render(pod_settings=pod_settings))
  assert pod['metadata']['annotations'] == {
      'sidecar.istio.io/inject': expected}


def test_a_compiled_step_gives_its_nodes_restarts_and_pod_settings():
  """A 2.1 step's num_workers 3.0, max_restarts 4.0 and pod_settings JSON
  reach the TrainJob and its runtime; an argument overrides the step's."""
  job = compiled_steps.job({'num_workers': 3.0, 'max_restarts': 4.0,
                       'pod_settings': PodSettings(**SETTINGS).to_json()})
  rendered = trainjob.render_for_step(job, {'inputs': {}}, 'penguin-train')
  _valid(rendered)
  assert rendered['trainjob']['spec']['trainer']['numNodes'] == 3
  assert rendered['runtime']['spec']['template']['spec'][
      'failurePolicy'] == {'maxRestarts': 4}
  pod = _pod(rendered)
  assert pod['spec']['serviceAccountName'] == 'pipeline-runner'
  assert pod['metadata']['labels'] == {'team': 'penguins'}
  again = trainjob.render_for_step(job, {'inputs': {}}, 'penguin-train',
                                   max_restarts=0)
  assert again['runtime']['spec']['template']['spec']['failurePolicy'] == {
      'maxRestarts': 0}


def test_component_gives_its_trainjob_restarts_and_pod_settings():
  """GenericTrainer(max_restarts=..., pod_settings=...).to_trainjob."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from conftest import PENGUIN_MODULE  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                           module_file=PENGUIN_MODULE, num_workers=2,
                           max_restarts=1, pod_settings=SETTINGS)
  rendered = trainer.to_trainjob('penguin-train', 'example.com/trainer:1',
                                 {'inputs': {}})
  _valid(rendered)
  assert rendered['runtime']['spec']['template']['spec'][
      'failurePolicy'] == {'maxRestarts': 1}
  assert _pod(rendered)['spec']['securityContext'] == {'fsGroup': 0}
  (container,) = _pod(rendered)['spec']['containers']
  assert container['securityContext']['runAsNonRoot'] is True


def test_every_node_is_restricted_by_default_and_declares_its_tmp():
  """With no pod settings, the node container meets Pod Security
  "restricted" and writes only to an emptyDir at /tmp; the CRD takes both."""
  rendered = _render()
  _valid(rendered)
  spec = _pod(rendered)['spec']
  (container,) = spec['containers']
  assert container['securityContext'] == {
      'allowPrivilegeEscalation': False, 'capabilities': {'drop': ['ALL']},
      'runAsNonRoot': True, 'seccompProfile': {'type': 'RuntimeDefault'},
      'readOnlyRootFilesystem': True}
  assert container['volumeMounts'] == [
      {'name': 'generic-trainer-tmp', 'mountPath': '/tmp'}]
  assert spec['volumes'] == [{'name': 'generic-trainer-tmp', 'emptyDir': {}}]
