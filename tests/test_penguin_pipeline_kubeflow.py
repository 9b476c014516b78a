"""The Kubeflow penguin pipeline: compiles, and its trainer step runs as KFP runs it."""

import json
import os
import subprocess
import sys

import pytest

from conftest import KUBEFLOW_IMAGE as IMAGE
from conftest import REPO, penguin_statistics


@pytest.fixture
def compiled(compiled_kubeflow):
  return compiled_kubeflow[0]


def test_package_is_a_pipeline_spec_kfp_uploads(compiled_kubeflow):
  """The YAML package parses as KFP's PipelineSpec, the same as the job's."""
  import yaml  # pylint: disable=g-import-not-at-top
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  from kfp.pipeline_spec import pipeline_spec_pb2  # pylint: disable=g-import-not-at-top
  job, path = compiled_kubeflow
  with open(path) as f:
    package = yaml.safe_load(f)
  spec = json_format.ParseDict(package, pipeline_spec_pb2.PipelineSpec())
  assert spec.pipeline_info.name == 'penguin-generic-trainer'
  assert package == job['pipelineSpec']


def test_no_baseline_leaves_out_the_resolver(tmp_path):
  """--no-baseline compiles without the KFP resolver steps."""
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  assert penguin_pipeline_kubeflow.main([
      '--image', IMAGE, '--pipeline-root', 'gs://b/root',
      '--serving-model-dir', 'gs://b/serving', '--no-baseline',
      '--output', str(tmp_path / 'p.yaml')]) == 0
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  spec = kfp_step.load(str(tmp_path / 'p.yaml'))
  assert sorted(spec['root']['dag']['tasks']) == [
      'CsvExampleGen', 'Evaluator', 'GenericTrainer', 'Pusher', 'SchemaGen',
      'StatisticsGen']


def test_trainer_step_runs_generic_trainer_in_the_project_image(compiled):
  """The compiled trainer step runs GenericExecutor through TFX's entrypoint."""
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  task = kfp_step.find_task(compiled)
  assert task == 'GenericTrainer'
  container = kfp_step.container(compiled, task)
  assert container['image'] == IMAGE
  assert container['command'] == [
      'python', '-m',
      'tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor']
  assert container['args'][:2] == ['--executor_class_path',
                                   'generic_trainer.component.executor.GenericExecutor']
  assert kfp_step.parameters(compiled, task)['module_path'] == 'penguin_keras'
  steps = sorted(compiled['pipelineSpec']['root']['dag']['tasks'])
  assert steps == ['CsvExampleGen', 'Evaluator', 'GenericTrainer', 'Pusher',
                   'SchemaGen', 'StatisticsGen',
                   'latest_blessed_model_resolver-model-blessing-resolver',
                   'latest_blessed_model_resolver-model-resolver']


@pytest.mark.slow
def test_trainer_step_runs_through_the_container_entrypoint(
    compiled, penguin_artifacts, tmp_path):
  """Run with the arguments KFP passes, the step publishes a model that serves."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  examples, schema = penguin_artifacts
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri = str(tmp_path / 'GenericTrainer' / 'model')
  model_run.uri = str(tmp_path / 'GenericTrainer' / 'model_run')
  output_file = str(tmp_path / 'GenericTrainer' / 'executor_output.json')
  invocation = kfp_step.executor_input(
      compiled, 'GenericTrainer',
      {'examples': [examples], 'schema': [schema],
       'statistics': [penguin_statistics(tmp_path)]},
      {'model': [model], 'model_run': [model_run]}, output_file)
  env = dict(os.environ)
  # As the Dockerfile sets it: the module files are importable.
  env['PYTHONPATH'] = os.pathsep.join(
      [os.path.join(REPO, 'module_files'), REPO, env.get('PYTHONPATH', '')])
  completed = subprocess.run(
      kfp_step.command_line(compiled, 'GenericTrainer', invocation,
                            python=sys.executable),
      env=env, cwd=str(tmp_path), capture_output=True, text=True,
      timeout=420, check=False)
  assert completed.returncode == 0, completed.stderr[-5000:]

  serving = os.path.join(model.uri, 'Format-Serving')
  assert os.listdir(model.uri) == ['Format-Serving']
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      os.path.join(examples.uri, 'Split-eval', 'data.gz'), 'GZIP').take(8)]
  outputs = tf.saved_model.load(serving).signatures['serving_default'](
      examples=tf.constant(records))['outputs']
  assert outputs.shape == (8, 3)
  with open(output_file) as f:
    metadata = json.load(f)
  assert sorted(metadata['artifacts']) == ['model', 'model_run']
  assert metadata['artifacts']['model']['artifacts'][0]['uri'] == model.uri
  assert metadata['artifacts']['model_run']['artifacts'][0]['uri'] == (
      model_run.uri)
  assert 'tfx_version' in metadata['artifacts']['model']['artifacts'][0][
      'metadata']


def test_trainer_step_renders_a_tfjob(compiled, tmp_path):
  """The TFJob CLI runs the compiled step's command on a Chief and Workers."""
  import yaml  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import tfjob  # pylint: disable=g-import-not-at-top
  pipeline = tmp_path / 'penguin_kubeflow.json'
  pipeline.write_text(json.dumps(compiled))  # The PipelineJob form.
  invocation = {'inputs': {'artifacts': {}}, 'outputs': {
      'artifacts': {}, 'outputFile': 'gs://bucket/root/out.json'}}
  (tmp_path / 'executor_input.json').write_text(json.dumps(invocation))
  out = tmp_path / 'tfjob.yaml'
  with open(out, 'w') as f:
    sys.stdout, saved = f, sys.stdout
    try:
      assert tfjob.main([
          '--pipeline', str(pipeline), '--executor-input',
          str(tmp_path / 'executor_input.json'), '--name', 'penguin-train',
          '--namespace', 'kubeflow', '--num-workers', '3']) == 0
    finally:
      sys.stdout = saved
  manifest = yaml.safe_load(out.read_text())
  specs = manifest['spec']['tfReplicaSpecs']
  assert (specs['Chief']['replicas'], specs['Worker']['replicas']) == (1, 2)
  assert specs['Worker']['restartPolicy'] == 'OnFailure'  # Resumes.
  assert manifest['spec']['runPolicy']['backoffLimit'] == 6
  container = specs['Chief']['template']['spec']['containers'][0]
  assert container['image'] == IMAGE
  assert container['command'][-1] == (
      'tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor')
  assert container['args'] == ['--executor_class_path',
                               'generic_trainer.component.executor.GenericExecutor',
                               '--json_serialized_invocation_args',
                               json.dumps(invocation)]


def test_dockerfile_puts_module_and_data_where_the_pipeline_looks():
  """The image has the module on PYTHONPATH and the CSV at the data root."""
  from pipelines import penguin_pipeline_kubeflow as kubeflow  # pylint: disable=g-import-not-at-top
  with open(os.path.join(REPO, 'Dockerfile')) as f:
    dockerfile = f.read()
  assert f'ENV PYTHONPATH={kubeflow.IMAGE_ROOT}/module_files' in dockerfile
  assert os.path.exists(os.path.join(REPO, 'module_files',
                                     kubeflow.MODULE_PATH + '.py'))
  assert f"write_penguin_csv('{kubeflow.IMAGE_DATA_ROOT}')" in dockerfile
  assert ('uv pip install --system --link-mode copy --compile-bytecode \\\n'
          '      -r requirements/lock.txt') in dockerfile
  # The lock is installed before the code is copied: a code change reuses it.
  assert dockerfile.index('requirements/lock.txt') < dockerfile.index(
      'COPY generic_trainer')
  assert 'USER 1000:1000' in dockerfile
