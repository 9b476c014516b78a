"""Kubeflow Trainer v2: the TrainJob and TrainingRuntime, checked against the
schemas the Trainer project publishes (pinned in tests/schemas/), and the
resources a GenericTrainer asks for, in every pod description."""

import json
import os

import jsonschema
import pytest

from conftest import REPO
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import kfp_step
from generic_trainer.kubeflow import resources as resources_lib
from generic_trainer.kubeflow import tfjob
from generic_trainer.kubeflow import trainjob

_SCHEMAS = os.path.join(REPO, 'tests', 'schemas')
_PINNED = '2.3.0'  # kubeflow-trainer-api (scripts/kubeflow_schemas.py).
_COMMAND = list(tfjob.KFP_ENTRYPOINT)
_ARGS = ['--executor_class_path', kfp_step.TRAINER_EXECUTOR,
         '--json_serialized_invocation_args', '{"inputs": {}}']
_RESOURCES = {'cpu': 4, 'memory': '16G', 'accelerator_type': 'NVIDIA_TESLA_T4',
              'accelerator_count': 2,
              'node_selector': {'cloud.google.com/gke-accelerator':
                                'nvidia-tesla-t4'},
              'tolerations': [{'key': 'nvidia.com/gpu', 'operator': 'Exists',
                               'effect': 'NoSchedule'}]}
_K8S = {'limits': {'cpu': '4', 'memory': '16G', 'nvidia.com/gpu': '2'},
        'requests': {'cpu': '4', 'memory': '16G'}}


def _schema(kind):
  with open(os.path.join(_SCHEMAS, f'{kind}-v1alpha1-{_PINNED}.json')) as f:
    return json.load(f)


def _valid(manifest, kind):
  errors = list(jsonschema.Draft202012Validator(_schema(kind)).iter_errors(
      manifest))
  assert not errors, [e.message for e in errors]


def test_trainjob_and_runtime_validate_against_the_pinned_schemas():
  """Both manifests pass the Trainer project's schemas, resources and all."""
  rendered = trainjob.render(
      'penguin-train', 'example.com/trainer:1', _COMMAND, _ARGS, num_nodes=2,
      namespace='kubeflow',
      resources=resources_lib.from_value(_RESOURCES))
  _valid(rendered['trainjob'], 'trainjob')
  _valid(rendered['runtime'], 'trainingruntime')
  assert rendered['trainjob']['spec']['runtimeRef'] == {
      'apiGroup': 'trainer.kubeflow.org', 'kind': 'TrainingRuntime',
      'name': 'penguin-train-runtime'}
  assert rendered['runtime']['metadata'] == {
      'name': 'penguin-train-runtime', 'namespace': 'kubeflow'}


def test_the_pinned_schemas_refuse_a_wrong_field():
  """The schemas are not empty shells: numNodes as a string is refused."""
  rendered = trainjob.render('penguin-train', 'example.com/trainer:1',
                             _COMMAND, _ARGS, num_nodes=2)
  rendered['trainjob']['spec']['trainer']['numNodes'] = 'two'
  with pytest.raises(jsonschema.ValidationError, match="'two' is not valid under any of the given schemas"):
    jsonschema.validate(rendered['trainjob'], _schema('trainjob'))


def test_jobset_pods_learn_their_place_and_names_resolve():
  """The runtime names stable host names and hands each pod the JobSet's
  labels; the TrainJob adds the node count: all the executor needs."""
  rendered = trainjob.render('penguin-train', 'example.com/trainer:1',
                             _COMMAND, _ARGS, num_nodes=3)
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


def test_num_nodes_must_be_positive():
  """A TrainJob of no nodes is refused, naming the argument."""
  with pytest.raises(InvalidArgumentError,
                     match=r"'num_nodes' must be a positive int.*"
                     r'Received: num_nodes=0'):
    trainjob.render('p', 'i', _COMMAND, _ARGS, num_nodes=0)


def test_resources_reach_every_pod_of_the_tfjob_and_the_trainjob():
  """Requests, limits, node selector and tolerations: every TFJob replica,
  the TrainJob's resourcesPerNode and the runtime's pod template."""
  resources = resources_lib.from_value(_RESOURCES)
  manifest = tfjob.render('penguin-train', 'example.com/trainer:1', _COMMAND,
                          _ARGS, num_workers=3, resources=resources)
  for replica in manifest['spec']['tfReplicaSpecs'].values():
    pod = replica['template']['spec']
    assert pod['containers'][0]['resources'] == _K8S
    assert pod['nodeSelector'] == _RESOURCES['node_selector']
    assert pod['tolerations'] == _RESOURCES['tolerations']
  rendered = trainjob.render('penguin-train', 'example.com/trainer:1',
                             _COMMAND, _ARGS, num_nodes=3,
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
      '--trainer-memory', '16G', '--trainer-accelerator', 'NVIDIA_TESLA_T4:2',
      '--output', path]) == 0
  job = kfp_step.load(path)
  container = kfp_step.container(job, 'GenericTrainer')
  assert container['resources'] == {
      'cpuLimit': 4.0, 'memoryLimit': 16.0, 'cpuRequest': 4.0,
      'memoryRequest': 16.0,
      'accelerator': {'type': 'NVIDIA_TESLA_T4', 'count': '2'}}
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
  _valid(rendered['trainjob'], 'trainjob')
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
  _valid(rendered['runtime'], 'trainingruntime')
