"""The Kubeflow penguin pipeline: compiles, and its trainer step runs as KFP runs it."""

import json
import os
import subprocess
import sys

import pytest

from conftest import KUBEFLOW_IMAGE as IMAGE
from conftest import REPO, penguin_statistics
from message_parts import assert_four_parts


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


def test_the_baseline_resolver_only_where_the_backend_runs_it(
    tmp_path, capsys):
  """Vertex gets the latest-blessed-model Resolver by default; on
  open-source KFP asking for it is refused at compile time with the
  reason its Argo compiler gives."""
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  common = ['--image', IMAGE, '--pipeline-root', 'gs://b/root',
            '--serving-model-dir', 'gs://b/serving']
  assert penguin_pipeline_kubeflow.main(
      common + ['--target', 'vertex', '--output', str(tmp_path / 'v.json')]
      ) == 0
  tasks = kfp_step.load(str(tmp_path / 'v.json'))['pipelineSpec']['root'][
      'dag']['tasks']
  assert 'latest_blessed_model_resolver-model-resolver' in tasks
  capsys.readouterr()
  assert penguin_pipeline_kubeflow.main(
      common + ['--baseline', '--output', str(tmp_path / 'k.yaml')]) == 2
  error = capsys.readouterr().err
  assert 'resolver executors not implemented' in error
  assert "target='vertex'" in error and '--no-baseline' in error
  assert_four_parts(error)
  assert not (tmp_path / 'k.yaml').exists()


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
  # No resolver: open-source KFP's Argo compiler refuses one.
  assert steps == ['CsvExampleGen', 'Evaluator', 'GenericTrainer', 'Pusher',
                   'SchemaGen', 'StatisticsGen']


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
  assert container['args'][:4] == [
      '--executor_class_path',
      'generic_trainer.component.executor.GenericExecutor',
      '--json_serialized_invocation_args', json.dumps(invocation)]
  # Pipeline spec 2.1: TFX's entrypoint types the parameterValues by it.
  assert container['args'][4] == '--json_serialized_inputs_spec_args'
  assert '"parameterType": "STRING"' in container['args'][5]


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


def _tasks(job):
  spec = job['pipelineSpec']
  return spec, spec['root']['dag']['tasks']


def test_open_source_package_holds_only_what_kfp_driver_resolves(
    compiled_kubeflow):
  """Schema 2.1.0 (the only one KFP's API server takes); every constant of
  every step as `runtimeValue.constant` (the only form its driver
  resolves: driver.go in 2.4/2.5, resolve.go from 2.14); the gs:// root
  in the package itself (else KFP writes to its minio:// default, which
  TFX cannot open); and the driver's
  rules resolve every container step."""
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  job, path = compiled_kubeflow
  spec, tasks = _tasks(job)
  assert spec['schemaVersion'] == '2.1.0'
  assert spec['defaultPipelineRoot'] == 'gs://bucket/root'
  assert kfp_step.load(path)['defaultPipelineRoot'] == 'gs://bucket/root'
  forms = {json.dumps(sorted(value['runtimeValue']))
           for task in tasks.values()
           for value in task.get('inputs', {}).get('parameters', {}).values()}
  assert forms == {'["constant"]'}, forms
  for task in tasks:
    resolved = kfp_step.resolve_parameters(job, task)
    assert all(not isinstance(v, int) or isinstance(v, bool)
               for v in resolved.values()), resolved  # numbers are doubles
  assert kfp_step.resolve_parameters(job, 'GenericTrainer')[
      'module_path'] == 'penguin_keras'


def test_a_2_1_spec_gives_num_workers_back_as_an_int(tmp_path):
  """2.1 writes `num_workers: 2.0`; our readers give the int its
  NUMBER_INTEGER declares, and the TFJob and TrainJob render from it; the
  ExecutorInput carries the double, as KFP's driver passes it."""
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step, tfjob, trainjob  # pylint: disable=g-import-not-at-top
  job = penguin_pipeline_kubeflow.compile_pipeline(
      str(tmp_path / 'p.yaml'), IMAGE, 'gs://b/root', 'gs://b/serving',
      num_workers=2)
  raw = job['pipelineSpec']['root']['dag']['tasks']['GenericTrainer'][
      'inputs']['parameters']['num_workers']['runtimeValue']['constant']
  assert raw == 2.0 and isinstance(raw, float)
  assert kfp_step.parameters(job, 'GenericTrainer')['num_workers'] == 2
  assert isinstance(kfp_step.parameters(job, 'GenericTrainer')['num_workers'],
                    int)
  invocation = kfp_step.executor_input(job, 'GenericTrainer', {}, {},
                                       kfp_step.LAUNCHER_OUTPUT_FILE)
  assert invocation['inputs']['parameterValues']['num_workers'] == 2.0
  assert 'parameters' not in invocation['inputs']
  manifest = tfjob.render_for_step(job, invocation, 'penguin-train')
  assert manifest['spec']['tfReplicaSpecs']['Worker']['replicas'] == 1
  rendered = trainjob.render_for_step(job, invocation, 'penguin-train')
  assert rendered['trainjob']['spec']['trainer']['numNodes'] == 2


def test_the_driver_rules_refuse_what_kfp_refuses(compiled_kubeflow,
                                                  tmp_path):
  """A 2.0 spec, a 2.0 constant, a missing value, a string for a number:
  each refused with the reason KFP's API server or driver gives, before
  any container runs."""
  import copy  # pylint: disable=g-import-not-at-top
  import containers  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  job, _ = compiled_kubeflow

  def refused(change, reason):
    broken = copy.deepcopy(job)
    change(broken['pipelineSpec'])
    with pytest.raises(InvalidArgumentError, match=reason) as raised:
      containers.run_step(broken, 'GenericTrainer', IMAGE, str(tmp_path), {})
    assert_four_parts(str(raised.value))

  def trainer_inputs(spec):
    return spec['root']['dag']['tasks']['GenericTrainer']['inputs'][
        'parameters']

  refused(lambda spec: spec.update(schemaVersion='2.0.0'),
          'KFP only supports schema version 2.1.0, but the pipeline spec '
          'has version 2.0.0')
  refused(lambda spec: trainer_inputs(spec).update(module_path={
      'runtimeValue': {'constantValue': {'stringValue': 'penguin_keras'}}}),
          r'param runtime value spec of type \*pipelinespec.'
          'ValueOrRuntimeParameter_ConstantValue not implemented')
  refused(lambda spec: trainer_inputs(spec).pop('module_path'),
          'neither value nor default value provided for non-optional '
          'parameter "module_path"')
  def string_for_a_number(spec):
    component = spec['root']['dag']['tasks']['GenericTrainer'][
        'componentRef']['name']
    spec['components'][component]['inputDefinitions']['parameters'][
        'num_workers'] = {'parameterType': 'NUMBER_INTEGER'}
    trainer_inputs(spec)['num_workers'] = {'runtimeValue': {'constant': '2'}}

  refused(string_for_a_number,
          'input parameter "num_workers" type mismatch: expect '
          'NUMBER_INTEGER, got string')
  assert kfp_step.check_schema(job) is None


@pytest.mark.parametrize('target,root,named', [
    ('kubeflow', 'minio://mlpipeline/v2/artifacts', 'minio://'),
    ('kubeflow', 's3://bucket/penguin', 'tensorflow-io'),
    ('kubeflow', '/mnt/shared/penguin', 'unsupported storage scheme'),
    ('vertex', '/mnt/shared/penguin', 'GCS only'),
    ('kfp-local', 'gs://bucket/penguin', 'local absolute pipeline root'),
])
def test_a_pipeline_root_the_target_cannot_use_is_refused_at_compile_time(
    target, root, named, tmp_path, capsys):
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  assert penguin_pipeline_kubeflow.main([
      '--target', target, '--image', IMAGE, '--pipeline-root', root,
      '--serving-model-dir', '/tmp/serving', '--no-baseline',
      '--output', str(tmp_path / 'p.yaml')]) == 2
  error = capsys.readouterr().err
  assert named in error and root in error, error
  if target != 'kfp-local':
    assert 'gs://BUCKET/penguin' in error
  assert_four_parts(error)
  assert not (tmp_path / 'p.yaml').exists()


@pytest.mark.parametrize('target,given,named', [
    ('kubeflow', 'NVIDIA_TESLA_T4:1', "'nvidia.com/gpu'"),
    ('kubeflow', 'TPU_V3:8', "'google.com/tpu'"),
    ('vertex', 'nvidia.com/gpu:1', "'NVIDIA_TESLA_T4'"),
])
def test_the_other_targets_accelerator_spelling_is_refused(
    target, given, named, tmp_path, capsys):
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  assert penguin_pipeline_kubeflow.main([
      '--target', target, '--image', IMAGE, '--pipeline-root', 'gs://b/r',
      '--serving-model-dir', 'gs://b/s', '--trainer-accelerator', given,
      '--output', str(tmp_path / 'p.json')]) == 2
  error = capsys.readouterr().err
  assert named in error and repr(given.split(':')[0]) in error, error
  assert_four_parts(error)


@pytest.mark.parametrize('target,given', [
    ('kubeflow', 'nvidia.com/gpu'), ('vertex', 'NVIDIA_TESLA_T4')])
def test_each_targets_accelerator_reaches_the_step(target, given, tmp_path):
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  assert penguin_pipeline_kubeflow.main([
      '--target', target, '--image', IMAGE, '--pipeline-root', 'gs://b/r',
      '--serving-model-dir', 'gs://b/s', '--trainer-accelerator', f'{given}:2',
      '--output', str(tmp_path / 'p.json')]) == 0
  job = kfp_step.load(str(tmp_path / 'p.json'))
  resources = kfp_step.container(job, 'GenericTrainer')['resources']
  assert resources['accelerator'] == {'type': given, 'count': '2'}


def test_pod_settings_reach_the_compiled_step_where_kfp_carries_them(
    tmp_path, caplog):
  """The environment in the step's container spec; labels, annotations,
  volumes and runAsUser in the kfp-kubernetes platform spec of a KFP 2.16
  cluster, the YAML package's second document; a service account and
  fsGroup named as not carried (KFP sets the first per run and has no
  field for the second)."""
  import logging  # pylint: disable=g-import-not-at-top
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  settings = {
      'service_account': 'pipeline-runner',
      'annotations': {'sidecar.istio.io/inject': 'false'},
      'labels': {'team': 'penguins'},
      'env': {'GENERIC_TRAINER_WORKER_NETWORK': 'any'},
      'volumes': [{'name': 'data', 'persistentVolumeClaim': {
          'claimName': 'penguin-data'}},
                  {'name': 'creds', 'secret': {'secretName': 'gcs-key'}}],
      'volume_mounts': [{'name': 'data', 'mountPath': '/data'},
                        {'name': 'creds', 'mountPath': '/creds'}],
      'security_context': {'fsGroup': 0, 'runAsUser': 1000680000}}
  path = str(tmp_path / 'p.yaml')
  with caplog.at_level(logging.WARNING):
    penguin_pipeline_kubeflow.compile_pipeline(
        path, IMAGE, 'gs://b/root', 'gs://b/serving',
        trainer_pod_settings=settings, kfp_release='2.16')
  job = kfp_step.load(path)
  assert kfp_step.container(job, 'GenericTrainer')['env'] == [
      {'name': 'GENERIC_TRAINER_WORKER_NETWORK', 'value': 'any'}]
  (label,) = job['platformSpec']['platforms']['kubernetes']['deploymentSpec'][
      'executors']
  assert label == kfp_step._component(job, 'GenericTrainer')['executorLabel']  # pylint: disable=protected-access
  config = job['platformSpec']['platforms']['kubernetes']['deploymentSpec'][
      'executors'][label]
  assert config == {
      'podMetadata': {'labels': {'team': 'penguins'}, 'annotations': {
          'sidecar.istio.io/inject': 'false'}},
      'pvcMount': [{'mountPath': '/data', 'pvcNameParameter': {
          'runtimeValue': {'constant': 'penguin-data'}}}],
      'secretAsVolume': [{'mountPath': '/creds', 'secretNameParameter': {
          'runtimeValue': {'constant': 'gcs-key'}}}],
      'securityContext': {'runAsNonRoot': True, 'runAsUser': 1000680000}}
  warned = caplog.text
  assert "service_account='pipeline-runner'" in warned
  assert 'security_context fsGroup' in warned
  # The TFJob rendered from this package carries all of them.
  assert kfp_step.parameters(job, 'GenericTrainer')['pod_settings']


def _documented_compile(target, workers=False):
  """The compile command the scaling-out guide gives for `target` (with
  several workers: the step's job), as arguments of the pipeline script."""
  import shlex  # pylint: disable=g-import-not-at-top
  with open(os.path.join(REPO, 'docs', 'guides', 'scaling-out.md')) as f:
    text = f.read().replace('\\\n', ' ')
  (line,) = [l for l in text.splitlines() if l.startswith(
      '.venv/bin/python -m pipelines.penguin_pipeline_kubeflow --target '
      f'{target} ') and ('--num-workers' in l) == workers]
  return shlex.split(line, comments=True)[3:]


def test_the_documented_multi_worker_compile_launches_a_trainjob(
    tmp_path, monkeypatch):
  """The guide's command with --num-workers 2: the step is told to launch
  a TrainJob of the image, and asks for nothing itself."""
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  from generic_trainer.keys import STEP_JOB_ENV  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  args = _documented_compile('kubeflow', workers=True)
  monkeypatch.chdir(tmp_path)
  assert penguin_pipeline_kubeflow.main(args) == 0
  job = kfp_step.load(str(tmp_path / args[args.index('--output') + 1]))
  container = kfp_step.container(job, 'GenericTrainer')
  (asked,) = [json.loads(e['value']) for e in container['env']
              if e['name'] == STEP_JOB_ENV]
  assert asked['kind'] == 'TrainJob'
  assert asked['image'] == args[args.index('--image') + 1]
  assert 'accelerator' not in container['resources']  # No GPU held idle.


@pytest.mark.parametrize('target', ['kubeflow', 'vertex'])
def test_the_documented_compile_writes_what_its_backend_takes(
    target, tmp_path, monkeypatch):
  """The guide's command for each target, run as written: schema 2.1.0,
  constants in the only form KFP's driver resolves, the gs:// root, the
  accelerator in the target's spelling."""
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  args = _documented_compile(target)
  output = args[args.index('--output') + 1]
  monkeypatch.chdir(tmp_path)
  assert penguin_pipeline_kubeflow.main(args) == 0
  job = kfp_step.load(str(tmp_path / output))
  spec, tasks = _tasks(job if 'pipelineSpec' in job else
                       {'pipelineSpec': job})
  assert spec['schemaVersion'] == '2.1.0'
  for task in tasks:
    kfp_step.resolve_parameters({'pipelineSpec': spec}, task)
  accelerator = kfp_step.container({'pipelineSpec': spec}, 'GenericTrainer')[
      'resources']['accelerator']['type']
  assert accelerator == ('nvidia.com/gpu' if target == 'kubeflow'
                         else 'NVIDIA_TESLA_T4')
  if target == 'kubeflow':
    assert spec['defaultPipelineRoot'] == 'gs://BUCKET/penguin'
  else:
    assert job['runtimeConfig']['gcsOutputDirectory'] == 'gs://BUCKET/penguin'


@pytest.mark.parametrize('release,copies', [('2.5', 1), ('2.17', 2)])
def test_the_launcher_downloads_every_input_into_the_trainer_steps_pod(
    compiled, penguin_artifacts, tmp_path, release, copies):
  """Before the trainer step's command runs, KFP's launcher copies its
  input artifacts into the pod under /gcs (launcher_v2.go,
  downloadArtifacts; 2.4 and 2.5 the first of each input, from 2.14
  every one), though TFX opens the gs:// URIs and reads none of the
  copies: a step that only waits for its job still holds the whole
  Examples on its disk. Each input arrives whole, where the launcher
  puts it."""
  import shutil  # pylint: disable=g-import-not-at-top
  import containers  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  examples, schema = penguin_artifacts
  bucket = tmp_path / 'bucket'
  shutil.copytree(examples.uri, bucket / 'CsvExampleGen' / 'examples')
  shutil.copytree(schema.uri, bucket / 'SchemaGen' / 'schema')
  statistics = penguin_statistics(bucket)
  examples.uri = str(bucket / 'CsvExampleGen' / 'examples')
  schema.uri = str(bucket / 'SchemaGen' / 'schema')
  invocation = kfp_step.executor_input(
      compiled, 'GenericTrainer',
      {'examples': [examples] * copies, 'schema': [schema],
       'statistics': [statistics]}, {}, kfp_step.LAUNCHER_OUTPUT_FILE)
  invocation = containers._as_bucket_uris(invocation, str(bucket))  # pylint: disable=protected-access
  done = containers.launcher_downloads(
      invocation, {containers.BUCKET: str(bucket)}, str(tmp_path / 'pod'),
      release)
  paths = sorted({d['path'] for d in done})
  assert paths == ['/gcs/pipeline-root/CsvExampleGen/examples',
                   '/gcs/pipeline-root/SchemaGen/schema',
                   '/gcs/pipeline-root/statistics']
  assert len(done) == 2 + copies
  for item in done:
    local = tmp_path / 'pod' / item['path'].lstrip('/')
    source = bucket / item['path'][len('/gcs/pipeline-root/'):]
    assert sorted(p.name for p in local.rglob('*')) == sorted(
        p.name for p in source.rglob('*'))
  # On a local path (no bucket scheme) the launcher downloads nothing.
  assert containers.launcher_downloads(
      kfp_step.executor_input(compiled, 'GenericTrainer',
                              {'schema': [schema]}, {},
                              kfp_step.LAUNCHER_OUTPUT_FILE),
      {}, str(tmp_path / 'pod2')) == []
  print(f'KFP {release} launcher: {sum(d["bytes"] for d in done)} bytes '
        f'downloaded for the penguin trainer step ({len(done)} artifacts)')
