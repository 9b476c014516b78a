"""The compiled penguin pipeline, every step in the project image as KFP's
launcher runs it (tests/containers.py): the step's own image, command and
arguments, `{{$}}` replaced by the ExecutorInput, the artifacts on one
folder mounted at the same path in every container, no network, each
step's outputs read back from its executor-output file and handed on.

The first test in a session builds the image (`make image`; podman is
installed where no engine is, the base made from Debian's packages where
none can be pulled); they skip, saying why, only where no container engine
can be installed.
"""

import os
import shutil

import pytest

import containers
import worker_pair

pytestmark = pytest.mark.slow


@pytest.fixture(scope='session')
def image():
  return containers.build_image()


def test_compiled_penguin_pipeline_runs_step_by_step_in_containers(
    image, tmp_path_factory):
  """ExampleGen to Pusher in containers, compiled for KFP's local runner
  and run through our strict launcher, each step as a hardened cluster
  runs it: the model is blessed and pushed."""
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  root = str(tmp_path_factory.mktemp('kfp'))
  job = penguin_pipeline_kubeflow.compile_pipeline(
      os.path.join(root, 'penguin.json'), image,
      pipeline_root=os.path.join(root, 'root'),
      serving_model_dir=os.path.join(root, 'serving'), target='kfp-local',
      train_steps=100, eval_steps=5,
      trainer_resources={'cpu': 1, 'memory': '2G'})
  assert containers.order(job) == [
      'CsvExampleGen', 'StatisticsGen', 'SchemaGen', 'GenericTrainer',
      'Evaluator', 'Pusher']
  produced = {}
  for task in containers.order(job):
    # As a hardened cluster runs a pod: an arbitrary uid in group 0 with no
    # passwd entry (OpenShift), a read-only root and a writable /tmp, and
    # KFP's launcher before 2.3 making its mount points at the root first.
    produced[task] = containers.run_step(
        job, task, None, root, containers.inputs_of(job, task, produced),
        extra=['--network', 'none', '--user', '1000680000:0', '--read-only',
               '--tmpfs', '/tmp:rw,exec'], launcher_mount_points=True)
  (blessing,) = produced['Evaluator']['blessing']
  assert os.path.exists(os.path.join(blessing['uri'], 'BLESSED'))
  assert blessing['metadata'].get('blessed') in (1, 1.0, '1')
  (pushed,) = produced['Pusher']['pushed_model']
  assert pushed['metadata'].get('pushed') in (1, 1.0, '1')
  versions = os.listdir(os.path.join(root, 'serving'))
  assert len(versions) == 1
  assert os.path.exists(os.path.join(root, 'serving', versions[0],
                                     'saved_model.pb'))
  (model,) = produced['GenericTrainer']['model']
  assert os.listdir(model['uri']) == ['Format-Serving']


def test_chief_and_worker_train_as_two_containers(
    image, compiled_kubeflow, penguin_artifacts, tmp_path):
  """Two containers of the image, TF_CONFIG as the Training Operator sets
  it (loopback ports, host network): the chief trains, validates and
  publishes; the worker trains and publishes nothing."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from conftest import penguin_statistics  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch.local_cluster import free_ports  # pylint: disable=g-import-not-at-top
  examples, schema = penguin_artifacts
  job, _ = compiled_kubeflow
  root = str(tmp_path)
  for artifact, name in ((examples, 'examples'), (schema, 'schema')):
    shutil.copytree(artifact.uri, os.path.join(root, name))
    artifact.uri = os.path.join(root, name)
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri, model_run.uri = (os.path.join(root, 'model'),
                              os.path.join(root, 'model_run'))
  invocation = kfp_step.executor_input(
      job, 'GenericTrainer',
      {'examples': [examples], 'schema': [schema],
       'statistics': [penguin_statistics(tmp_path)]},
      {'model': [model], 'model_run': [model_run]},
      os.path.join(root, 'executor_output.json'))
  inputs = {key: value['artifacts'] for key, value in
            invocation['inputs']['artifacts'].items()}
  outputs = {key: value['artifacts'] for key, value in
             invocation['outputs']['artifacts'].items()}
  ports = free_ports(2)
  processes = {}
  for task_type, tf_config in worker_pair.tf_configs(ports).items():
    processes[task_type] = containers.run_step(
        job, 'GenericTrainer', image, root, inputs,
        env={'TF_CONFIG': tf_config}, extra=['--network', 'host'],
        outputs=outputs, detach_name=f'gt-{task_type}-{ports[0]}')
  logs = worker_pair.ended(processes, timeout_s=600)
  for task_type, process in processes.items():
    assert process.returncode == 0, logs[task_type][-5000:]
  assert 'training as worker 1 of 2 (worker 0); the chief publishes' in logs[
      'worker']
  assert 'export validated: ' in logs['chief']
  assert 'export validated: ' not in logs['worker']
  assert os.listdir(model.uri) == ['Format-Serving']


def test_sigterm_to_the_worker_container_saves_the_step_and_the_rerun_resumes(
    image, compiled_kubeflow, penguin_artifacts, tmp_path):
  """SIGTERM to the worker's container: it asks the chief to stop, both
  stop at one step, which is saved, and publish nothing; the same two
  containers again resume there and train the rest: 0 steps twice."""
  import glob  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  from conftest import REPO, penguin_statistics  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch.local_cluster import free_ports  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples, schema = penguin_artifacts
  job, _ = compiled_kubeflow
  root = str(tmp_path)
  for artifact, name in ((examples, 'examples'), (schema, 'schema')):
    shutil.copytree(artifact.uri, os.path.join(root, name))
    artifact.uri = os.path.join(root, name)
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri, model_run.uri = (os.path.join(root, 'model'),
                              os.path.join(root, 'model_run'))
  invocation = kfp_step.executor_input(
      job, 'GenericTrainer',
      {'examples': [examples], 'schema': [schema],
       'statistics': [penguin_statistics(tmp_path)]},
      {'model': [model], 'model_run': [model_run]},
      os.path.join(root, 'executor_output.json'))
  inputs = {key: value['artifacts'] for key, value in
            invocation['inputs']['artifacts'].items()}
  outputs = {key: value['artifacts'] for key, value in
             invocation['outputs']['artifacts'].items()}
  record = os.path.join(root, 'record')
  parameters = {
      'module_path': None,
      'module_file': containers.module_in(
          root, 'tests/testdata/slow_worker_spec.py',
          'module_files/penguin_spec.py'),
      'train_args': json.dumps({'num_steps': 40}),
      'eval_args': json.dumps({'num_steps': 0}),
      'custom_config': json.dumps({'record_dir': record})}

  def start(tag):
    ports = free_ports(2)
    return {task_type: containers.run_step(
        job, 'GenericTrainer', image, root, inputs,
        env={'TF_CONFIG': tf_config},
        extra=['--network', 'host', '-v', f'{REPO}:{REPO}:ro'],
        outputs=outputs, detach_name=f'gt-{task_type}-{tag}-{ports[0]}',
        parameters=parameters)
            for task_type, tf_config in worker_pair.tf_configs(ports).items()}

  def finish(processes):
    return worker_pair.ended(processes, timeout_s=600)

  def saved_step():
    for path in glob.glob(os.path.join(model_run.uri, 'resume-*',
                                       'latest.json')):
      with open(path) as f:
        return json.load(f).get('step', 0)
    return 0

  def chief_steps():
    with open(os.path.join(record, 'steps.log')) as f:
      return [int(line.split()[2]) for line in f if line.split()[1] == '0']

  processes = start('first')
  deadline = time.monotonic() + 400
  while saved_step() < 10:
    assert time.monotonic() < deadline and all(
        p.poll() is None for p in processes.values()), finish(processes)
    time.sleep(0.2)
  worker_name = processes['worker'].args[
      processes['worker'].args.index('--name') + 1]
  containers.engine('kill', '--signal', 'TERM', worker_name)
  logs = finish(processes)
  for task_type, process in processes.items():
    assert process.returncode != 0, logs[task_type][-3000:]
  saved = saved_step()
  assert 10 <= saved < 40, logs['chief'][-3000:]
  assert chief_steps()[-1] == saved, logs['chief'][-3000:]
  assert not os.path.exists(model.uri) or not os.listdir(model.uri)

  os.remove(os.path.join(record, 'steps.log'))
  processes = start('again')
  logs = finish(processes)
  for task_type, process in processes.items():
    assert process.returncode == 0, logs[task_type][-5000:]
  assert chief_steps() == list(range(saved + 1, 41))  # 0 steps twice.
  assert os.listdir(model.uri) == ['Format-Serving']
