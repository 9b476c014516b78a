"""A Kubeflow step with several workers launches a TrainJob or TFJob
(`generic_trainer.kubeflow.step_job`): what the compile hands the step,
the job it renders, and (against the stand-in API server, tests/kube_api.py)
how it launches, follows, reuses, removes and cancels it."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import KUBEFLOW_IMAGE
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import StepJobError
from generic_trainer.keys import STEP_JOB_ENV
from generic_trainer.keys import STEP_JOB_RECORD_ENV
from generic_trainer.kubeflow import compile as compile_lib
from generic_trainer.kubeflow import kfp_step
from generic_trainer.launch import cluster_environment
from generic_trainer.kubeflow.step_job import client as step_client
from generic_trainer.kubeflow.step_job import follow as step_follow
from generic_trainer.kubeflow.step_job import record as step_record
from generic_trainer.kubeflow.step_job import render as step_render
from generic_trainer.kubeflow.step_job import step as step_lib
from generic_trainer.kubeflow.step_job.rbac import rbac
import crd_schema


def _compiled(tmp_path, target='kubeflow', num_workers=2, **kwargs):
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  root = ('gs://bucket/root' if target != 'kfp-local' else
          str(tmp_path / 'root'))
  return penguin_pipeline_kubeflow.compile_pipeline(
      str(tmp_path / 'penguin.yaml'), KUBEFLOW_IMAGE, root,
      'gs://bucket/serving' if target != 'kfp-local' else str(
          tmp_path / 'serving'), target=target, num_workers=num_workers,
      trainer_resources={'cpu': 2, 'memory': '4G',
                         'node_selector': {'pool': 'train'}}, **kwargs)


def _env(job):
  container = kfp_step.container(job, 'GenericTrainer')
  return {e['name']: e['value'] for e in container.get('env', [])}


def test_the_kubeflow_step_with_two_workers_is_told_to_launch_a_trainjob(
    tmp_path):
  """The compile hands the step the job's kind, the image and every pod's
  resources (node selector included, which the step's own spec lacks)."""
  job = _compiled(tmp_path)
  asked = json.loads(_env(job)[STEP_JOB_ENV])
  assert asked == {'kind': 'TrainJob', 'image': KUBEFLOW_IMAGE,
                   'resources': {'cpu': 2.0, 'memory': 4.0,
                                 'node_selector': {'pool': 'train'}}}
  # The step only waits: the job's pods ask for the trainer's resources.
  assert kfp_step.container(job, 'GenericTrainer')['resources'] == (
      compile_lib.WAITING_STEP_RESOURCES)
  alone = _compiled(tmp_path, num_workers=1)
  assert kfp_step.container(alone, 'GenericTrainer')['resources'][
      'cpuLimit'] == 2.0


def test_the_waiting_step_asks_for_what_waiting_takes_and_a_quota_admits_it(
    tmp_path):
  """A namespace whose ResourceQuota sets requests.cpu and requests.memory
  admits only pods that ask for both: the step that launches a job asks
  for its process's memory and half a core (none of the trainer's GPU),
  as KFP's driver writes them into the pod (driver.go: memory "%vG"); a
  step asking for nothing, as before, is refused "must specify"."""
  import kube_api  # pylint: disable=g-import-not-at-top
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  from kfp.pipeline_spec import pipeline_spec_pb2  # pylint: disable=g-import-not-at-top
  job = _compiled(tmp_path)
  asked = kfp_step.container(job, 'GenericTrainer')['resources']
  json_format.ParseDict(asked, pipeline_spec_pb2.PipelineDeploymentConfig
                        .PipelineContainerSpec.ResourceSpec())

  def step_pod(spec):
    resources = {'limits': {}, 'requests': {}}
    for key, field, unit in (('memory', 'memory', 'G'), ('cpu', 'cpu', '')):
      for side in ('Limit', 'Request'):
        if f'{field}{side}' in spec:
          resources[side.lower() + 's'][key] = f'{spec[field + side]:g}{unit}'
    return {'metadata': {'name': 'step'}, 'spec': {'containers': [
        {'name': 'main', 'image': KUBEFLOW_IMAGE, 'resources': resources}]}}

  store = kube_api.Store()
  store.set_quota(NAMESPACE, 'compute', {'requests.cpu': '8',
                                         'requests.memory': '32Gi'})
  store.admit_pod(NAMESPACE, step_pod(asked))
  with pytest.raises(kube_api.StatusError, match='must specify requests.cpu,'
                     'requests.memory'):
    store.admit_pod(NAMESPACE, step_pod({}))


@pytest.mark.parametrize('target,num_workers,kwargs', [
    ('kubeflow', 1, {}),
    ('kubeflow', 2, {'step_job': None}),
    ('kfp-local', 2, {}),
    ('vertex', 2, {}),
])
def test_no_job_where_the_step_trains_alone(tmp_path, target, num_workers,
                                            kwargs):
  """One worker, step_job=None, and by default kfp.local and Vertex: the
  step trains in its own pod, as before."""
  job = _compiled(tmp_path, target, num_workers, **kwargs)
  assert STEP_JOB_ENV not in _env(job)


def test_a_tfjob_on_request_and_none_on_vertex(tmp_path):
  asked = json.loads(_env(_compiled(tmp_path, step_job='TFJob'))[
      STEP_JOB_ENV])
  assert asked['kind'] == 'TFJob'
  with pytest.raises(InvalidArgumentError, match=(
      r"step_job='TrainJob' cannot be launched from a Vertex AI step.*"
      r'Expected step_job=None on Vertex')):
    _compiled(tmp_path, 'vertex', step_job='TrainJob')
  with pytest.raises(InvalidArgumentError, match=(
      r"must be one of \('TrainJob', 'TFJob'\).*Received: 'PyTorchJob'")):
    _compiled(tmp_path, step_job='PyTorchJob')


def _where(environ, exec_properties):
  """Where the plan trains in the cluster `environ` describes."""
  from generic_trainer.plan import plan as plan_lib  # pylint: disable=g-import-not-at-top
  return plan_lib.from_settings(
      {'module_file': 'unused.py', **exec_properties},
      cluster=cluster_environment.detect(environ)).where


def test_the_step_launches_and_its_pods_train(tmp_path):
  """The step (no cluster placement) launches; a pod of its job
  (TF_CONFIG, or the JobSet's variables) trains; one worker never
  launches; a damaged variable is refused, saying what the compile
  writes."""
  from generic_trainer.plan.plan import Where  # pylint: disable=g-import-not-at-top
  value = step_render.to_env('TrainJob', 'img', None)['value']
  two = {'num_workers': 2}
  step = cluster_environment.detect({STEP_JOB_ENV: value})
  assert (step.kind, step.image) == ('TrainJob', 'img')
  assert _where({STEP_JOB_ENV: value}, two) == Where.KUBEFLOW_JOB
  assert _where({STEP_JOB_ENV: value}, {'num_workers': 1}) == Where.HERE
  assert _where({STEP_JOB_ENV: value},
                {'num_workers': '1:3'}) == Where.KUBEFLOW_JOB
  tf_config = json.dumps({'cluster': {'worker': ['a:1', 'b:1']},
                          'task': {'type': 'worker', 'index': 0}})
  assert _where({STEP_JOB_ENV: value, 'TF_CONFIG': tf_config},
                two) == Where.HERE
  assert _where({STEP_JOB_ENV: value, 'JOBSET_NAME': 'gt-x',
                 'REPLICATED_JOB_NAME': 'node', 'JOB_INDEX': '0',
                 'JOB_COMPLETION_INDEX': '1',
                 'GENERIC_TRAINER_NUM_NODES': '2'}, two) == Where.HERE
  assert _where({}, two) == Where.LOCAL_WORKERS
  with pytest.raises(InvalidArgumentError, match=(
      f'{STEP_JOB_ENV} is not what the compile writes.*Received: .*PyTorch')):
    cluster_environment.detect(
        {STEP_JOB_ENV: '{"kind": "PyTorchJob", "image": "x"}'})
  with pytest.raises(InvalidArgumentError, match=(
      "compile writes: its 'image' must be .*Received: image=''.*Received: ")):
    cluster_environment.detect(
        {STEP_JOB_ENV: '{"kind": "TrainJob", "image": ""}'})


def _step_argv(job, output_file='/tmp/kfp_outputs/output_metadata.json'):
  invocation = kfp_step.executor_input(job, 'GenericTrainer', {}, {},
                                       output_file)
  command = kfp_step.command_line(job, 'GenericTrainer', invocation)
  # What the step's Python sees: the entrypoint module's path, then its
  # arguments.
  return ['/usr/local/lib/python3.10/site-packages/tfx/orchestration/'
          'kubeflow/v2/container/kubeflow_v2_run_executor.py',
          *command[3:]], invocation


def test_the_pods_run_the_steps_arguments_with_their_own_output_file(
    tmp_path):
  job = _compiled(tmp_path)
  argv, invocation = _step_argv(job)
  args = step_render.pod_args(argv[1:])
  at = args.index('--json_serialized_invocation_args') + 1
  theirs = json.loads(args[at])
  assert theirs['outputs']['outputFile'] == (
      '/tmp/generic-trainer/kfp_outputs/output_metadata.json')
  theirs['outputs']['outputFile'] = invocation['outputs']['outputFile']
  assert theirs == invocation
  assert args[:at] == argv[1:at + 1]
  with pytest.raises(StepJobError, match=(
      "not started by TFX's KFP v2 entrypoint.*Expected the arguments "
      '--executor_class_path')):
    step_render.pod_args(['--json_serialized_invocation_args', '{}'])


@pytest.mark.parametrize('kind', ['TrainJob', 'TFJob'])
def test_the_rendered_job_passes_the_pinned_crds_and_is_labelled_ours(
    tmp_path, kind):
  """Owner label, the spec's digest (the same for two attempts, whose
  nonces differ), the record's place in every pod's environment, the
  component's restarts and the compile's resources."""
  job = _compiled(tmp_path, step_job=kind)
  argv, _ = _step_argv(job)
  properties = {'num_workers': 3, 'max_restarts': 1, 'pod_settings': None}

  def render(nonce):
    return step_render.render(
        kind, step_render.job_name('gs://b/r/model'), KUBEFLOW_IMAGE,
        step_render.pod_args(argv[1:]), 'team-a', properties, {'cpu': 2},
        nonce, 'gs://b/r/model_run/' + step_record.RECORD_NAME)
  first, second = render('a' * 32), render('b' * 32)
  for objects in (first, second):
    for key, manifest in objects.items():
      crd = {'trainjob': crd_schema.TRAINJOB_CRD,
             'runtime': crd_schema.TRAININGRUNTIME_CRD,
             'tfjob': crd_schema.TFJOB_CRD}[key]
      assert crd_schema.errors(manifest, crd) == []
      metadata = manifest['metadata']
      assert metadata['labels'][
          step_render.MANAGED_BY_LABEL] == 'generic-trainer'
      assert metadata['namespace'] == 'team-a'
  digests = {m['metadata']['annotations'][step_render.SPEC_ANNOTATION]
             for objects in (first, second) for m in objects.values()}
  assert len(digests) == 1
  text = json.dumps(first)
  assert json.dumps('a' * 32)[1:-1] in text and STEP_JOB_RECORD_ENV in text
  if kind == 'TrainJob':
    runtime = first['runtime']['spec']['template']['spec']
    assert runtime['failurePolicy'] == {'maxRestarts': 1}
    assert first['trainjob']['spec']['trainer']['numNodes'] == 3
    assert first['trainjob']['spec']['trainer']['resourcesPerNode'][
        'limits']['cpu'] == '2'
  else:
    specs = first['tfjob']['spec']['tfReplicaSpecs']
    assert specs['Chief']['replicas'] + specs['Worker']['replicas'] == 3
    assert specs['Worker']['restartPolicy'] == 'OnFailure'


@pytest.mark.parametrize('kind', ['TrainJob', 'TFJob'])
@pytest.mark.parametrize('settings,expected', [
    (None, 'default-editor'),
    ({'service_account': 'trainer-sa'}, 'trainer-sa')])
def test_the_jobs_pods_run_as_the_steps_service_account(kind, settings,
                                                        expected):
  """Unless pod_settings names one, the pods run as the step's account
  (the bucket's credentials), not the namespace's `default`."""
  from generic_trainer.kubeflow import pod_settings  # pylint: disable=g-import-not-at-top
  properties = {'num_workers': 2, 'max_restarts': None, 'pod_settings':
                settings and pod_settings.from_value(settings).to_json()}
  objects = step_render.render(
      kind, 'gt-x', KUBEFLOW_IMAGE, [], 'team-a', properties, None,
      'n' * 32, 'gs://b/r/model_run/' + step_record.RECORD_NAME,
      'default-editor')
  accounts = set(re.findall(r'"serviceAccountName": "([^"]*)"',
                            json.dumps(objects)))
  assert accounts == {expected}


def test_the_job_name_is_one_per_step_and_fits_the_longest_pod_names():
  from generic_trainer.kubeflow import trainjob  # pylint: disable=g-import-not-at-top
  name = step_render.job_name('gs://b/root/run-1/GenericTrainer/model')
  assert name == step_render.job_name('gs://b/root/run-1/GenericTrainer/model')
  assert name != step_render.job_name('gs://b/root/run-2/GenericTrainer/model')
  assert len(name) <= trainjob.longest_name(10)


# The step against the stand-in API server (tests/kube_api.py), granted
# exactly the Role `step_job.rbac` renders; the test writes the job's
# status as Trainer's controller does (tests/kube_controller.py runs real
# pods: tests/test_step_job_pods.py).

NAMESPACE = 'team-a'
STEP_POD = 'penguin-x7k2q-system-container-impl-2280339813'


@pytest.fixture
def cluster(tmp_path):
  import kube_api  # pylint: disable=g-import-not-at-top
  (role, _) = rbac('pipeline-runner', NAMESPACE)
  with kube_api.KubeAPI(str(tmp_path / 'api'), role['rules'],
                        namespace=NAMESPACE) as api:
    # The step's own pod, which KFP made: the job's owner.
    pod = api.store.create('pods', NAMESPACE, {
        'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': STEP_POD},
        'spec': {'containers': [{'name': 'main', 'image': KUBEFLOW_IMAGE}]}})
    api.step_pod_uid = pod['metadata']['uid']
    yield api


class Step:
  """`step_job.step.run` as the step runs it, in a thread of the test."""

  def __init__(self, api, tmp_path, argv, num_workers=2, kind='TrainJob'):
    import threading  # pylint: disable=g-import-not-at-top
    self.api, self.logs, self.error, self.record = api, [], None, None
    self.kind, self.plural = kind, kind.lower() + 's'
    self.model = str(tmp_path / 'model')
    self.model_run = str(tmp_path / 'model_run')
    self.name = step_render.job_name(self.model)
    self.properties = {'num_workers': num_workers, 'max_restarts': None,
                       'pod_settings': None}
    self.owner = {'apiVersion': 'v1', 'kind': 'Pod', 'name': STEP_POD,
                  'uid': api.step_pod_uid}
    self.argv = argv
    self.thread = threading.Thread(target=self._run, daemon=True)

  def _run(self):
    try:
      self.record = self.run()
    except Exception as e:  # pylint: disable=broad-except
      self.error = e

  def run(self):
    return step_lib.run(
        {'kind': self.kind, 'image': KUBEFLOW_IMAGE, 'resources': None},
        self.properties, self.model, self.model_run, self.argv,
        self.owner, api_client=self.api.api_client(),
        namespace=NAMESPACE, log=self.logs.append)

  def start(self):
    self.thread.start()
    return self

  def job(self, timeout_s=30):
    """The TrainJob once the step made it."""
    import time  # pylint: disable=g-import-not-at-top
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
      try:
        return self.api.store.get(self.plural, NAMESPACE, self.name)
      except Exception:  # pylint: disable=broad-except
        assert self.thread.is_alive(), self.error
        time.sleep(0.05)
    raise AssertionError(f'no TrainJob {self.name}: {self.logs}')

  def until(self, condition, timeout_s=30):
    """`condition()`'s first true value, while the step runs."""
    import time  # pylint: disable=g-import-not-at-top
    deadline = time.monotonic() + timeout_s
    while not condition():
      assert time.monotonic() < deadline, self.logs
      time.sleep(0.05)
    return condition()

  def end(self, timeout_s=90):
    self.thread.join(timeout_s)
    assert not self.thread.is_alive(), self.logs

  def publish_as_the_chief(self, job):
    """What the chief pod does before the job completes: the SavedModel in
    the Model artifact, the record at the place its environment names."""
    from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
    if job['kind'] == 'TrainJob':
      env = job['spec']['trainer']['env']
    else:
      (env,) = [c['env'] for c in job['spec']['tfReplicaSpecs']['Chief'][
          'template']['spec']['containers']]
    env = {e['name']: e['value'] for e in env}
    record = cluster_environment.detect({
        **env, 'TF_CONFIG': json.dumps({
            'cluster': {'worker': ['a:1']},
            'task': {'type': 'worker', 'index': 0}})}).step_record
    serving = os.path.join(self.model, 'Format-Serving')
    os.makedirs(os.path.join(serving, 'variables'))
    with open(os.path.join(serving, 'saved_model.pb'), 'wb') as f:
      f.write(b'the graph')
    with open(os.path.join(serving, 'variables',
                           'variables.data-00000-of-00001'), 'wb') as f:
      f.write(b'the weights')
    model = standard_artifacts.Model()
    model.uri = self.model
    model.set_int_custom_property('trained_steps', 40)
    step_record.write_record(record, {'model': [model]})


def _complete(api, name, kind_type='Complete'):
  api.store.update_status('trainjobs', NAMESPACE, name, {'conditions': [{
      'type': kind_type, 'status': 'True',
      'reason': 'AllJobsCompleted' if kind_type == 'Complete' else
                'ReachedMaxRestarts',
      'message': 'jobset completed successfully' if kind_type == 'Complete'
                 else 'jobset failed due to reaching max number of restarts',
      'lastTransitionTime': '2026-11-28T16:00:00Z'}]})


def _gone(api, plural, name):
  return not [o for o in api.store.list(plural, NAMESPACE)['items']
              if o['metadata']['name'] == name]


def _argv(tmp_path):
  argv, _ = _step_argv(_compiled(tmp_path / 'compiled', step_job='TrainJob'))
  return argv


def test_the_step_launches_follows_and_takes_the_chiefs_model(cluster,
                                                              tmp_path):
  """Runtime and TrainJob made (owned by the step's pod, passing the CRDs
  and Trainer's webhook), followed to Complete, the chief's record taken,
  both removed; every call the Role grants, none refused."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  step = Step(cluster, tmp_path, _argv(tmp_path)).start()
  job = step.job()
  assert job['metadata']['ownerReferences'] == [{
      'apiVersion': 'v1', 'kind': 'Pod', 'name': STEP_POD,
      'uid': cluster.step_pod_uid}]
  assert job['spec']['trainer']['numNodes'] == 2
  cluster.store.get('trainingruntimes', NAMESPACE, f'{step.name}-runtime')
  cluster.store.update_status('trainjobs', NAMESPACE, step.name, {
      'trainerStatus': {'progressPercentage': 45,
                        'estimatedRemainingSeconds': 30,
                        'lastUpdatedTime': '2026-11-28T16:00:00Z'}})
  step.publish_as_the_chief(job)
  _complete(cluster, step.name)
  step.end()
  assert step.error is None, step.error
  model = standard_artifacts.Model()
  step_record.apply_record(step.record, {'model': [model]})
  assert model.get_int_custom_property('trained_steps') == 40
  assert _gone(cluster, 'trainjobs', step.name)
  assert _gone(cluster, 'trainingruntimes', f'{step.name}-runtime')
  assert any('45% trained, about 30 s left' in line for line in step.logs)
  # None refused; the one 404 is the look for an earlier attempt's job.
  assert [(c.verb, c.resource, c.code) for c in cluster.calls
          if c.code >= 300] == [('get', 'trainjobs', 404),
                                ('get', 'trainingruntimes', 404)]


@pytest.mark.parametrize('forge', ['model replaced', 'record forged'])
def test_the_step_takes_only_the_model_its_chief_published(cluster,
                                                           tmp_path, forge):
  """A SavedModel changed after the chief published (a 0-byte
  saved_model.pb), or a record with this job's name and nonce (no secret)
  but no digest of the model: refused before anything is attached."""
  step = Step(cluster, tmp_path, _argv(tmp_path)).start()
  job = step.job()
  step.publish_as_the_chief(job)
  record_path = os.path.join(step.model_run, step_record.RECORD_NAME)
  pb = os.path.join(step.model, 'Format-Serving', 'saved_model.pb')
  if forge == 'model replaced':
    open(pb, 'wb').close()
  else:
    with open(record_path, encoding='utf-8') as f:
      record = json.load(f)
    del record['model_digest']
    with open(record_path, 'w', encoding='utf-8') as f:
      json.dump(record, f)
  _complete(cluster, step.name)
  step.end()
  assert isinstance(step.error, StepJobError), step.error
  message = str(step.error)
  assert f'The job {step.name} completed, but the SavedModel in the ' \
      "step's Model artifact" in message
  assert 'is not the one its chief published: its digest is sha256:' \
      in message
  assert ('Received: another model' in message and
          'Nothing was taken' in message)
  assert step.record is None


def test_pods_the_job_controller_may_not_create_fail_the_step(
    cluster, tmp_path, monkeypatch):
  """A quota refuses the pods (the Job controller's FailedCreate event):
  no pod starts within the deadline, the step fails naming the refusal,
  not the TrainJob's create, and deletes its job."""
  monkeypatch.setattr(step_follow, 'START_WITHIN_S', 2)
  step = Step(cluster, tmp_path, _argv(tmp_path)).start()
  step.job()
  quota = ('pods "%s-node-0-0-x" is forbidden: exceeded quota: '
           'compute, requested: limits.cpu=4, used: limits.cpu=8, limited: '
           'limits.cpu=8' % step.name)
  cluster.store.failed_create(NAMESPACE, 'Job', f'{step.name}-node-0',
                              quota)
  step.end()
  assert isinstance(step.error, StepJobError), step.error
  message = str(step.error)
  assert f'No pod of the TrainJob {step.name} started within 2 s: ' \
      f'Job {step.name}-node-0: FailedCreate: Error creating: {quota}' \
      in message
  assert 'quota and Pod Security admission act on pods' in message
  assert f'The step deleted the TrainJob' in message
  assert _gone(cluster, 'trainjobs', step.name)
  assert _gone(cluster, 'trainingruntimes', f'{step.name}-runtime')


def test_a_pod_whose_image_cannot_be_pulled_fails_the_step(
    cluster, tmp_path, monkeypatch):
  """ImagePullBackOff on the job's pod until the deadline: the step's
  error names the pod, the kubelet's reason and its event."""
  monkeypatch.setattr(step_follow, 'START_WITHIN_S', 2)
  step = Step(cluster, tmp_path, _argv(tmp_path)).start()
  step.job()
  pod = f'{step.name}-node-0-0-abcde'
  cluster.store.create('pods', NAMESPACE, {
      'apiVersion': 'v1', 'kind': 'Pod',
      'metadata': {'name': pod, 'labels': {
          'jobset.sigs.k8s.io/jobset-name': step.name}},
      'spec': {'containers': [{'name': 'node', 'image': KUBEFLOW_IMAGE}]}})
  cluster.store.image_pull_failure(NAMESPACE, pod, 'node', KUBEFLOW_IMAGE)
  step.end()
  assert isinstance(step.error, StepJobError), step.error
  message = str(step.error)
  assert f'pod {pod}: ImagePullBackOff: Back-off pulling image ' \
      f'"{KUBEFLOW_IMAGE}"' in message
  assert f'Pod {pod}: Failed: Failed to pull image' in message
  assert _gone(cluster, 'trainjobs', step.name)


def test_a_pod_that_started_is_not_held_to_the_deadline(cluster, tmp_path,
                                                        monkeypatch):
  """Once a container of the job ran, the deadline no longer applies."""
  monkeypatch.setattr(step_follow, 'START_WITHIN_S', 2)
  step = Step(cluster, tmp_path, _argv(tmp_path)).start()
  job = step.job()
  pod = f'{step.name}-node-0-0-abcde'
  cluster.store.create('pods', NAMESPACE, {
      'apiVersion': 'v1', 'kind': 'Pod',
      'metadata': {'name': pod, 'labels': {
          'jobset.sigs.k8s.io/jobset-name': step.name}},
      'spec': {'containers': [{'name': 'node', 'image': KUBEFLOW_IMAGE}]}})
  cluster.store.update_status('pods', NAMESPACE, pod, {
      'phase': 'Running', 'containerStatuses': [{
          'name': 'node', 'ready': True, 'restartCount': 0,
          'image': KUBEFLOW_IMAGE, 'imageID': '',
          'state': {'running': {'startedAt': '2026-11-28T16:00:00Z'}}}]})
  import time  # pylint: disable=g-import-not-at-top
  time.sleep(4)
  assert step.thread.is_alive(), step.error
  step.publish_as_the_chief(job)
  _complete(cluster, step.name)
  step.end()
  assert step.error is None, step.error


def test_a_runtime_kept_by_trainer_22s_finalizer_is_waited_for(
    cluster, tmp_path, monkeypatch):
  """Trainer 2.0-2.2: the earlier attempt's TrainingRuntime, deleted with
  its failed TrainJob, stays terminating with `resource-in-use` until the
  controller drops it; the step waits for it to go before making its own
  (no 409), and the new job runs."""
  from generic_trainer.kubeflow.step_job import takeover  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(takeover, 'GONE_POLL_S', 0.1)
  in_use = 'trainer.kubeflow.org/resource-in-use'
  step = Step(cluster, tmp_path, _argv(tmp_path))
  runtime = f'{step.name}-runtime'
  _earlier_attempt(cluster, step, 'Failed')
  cluster.store.modify('trainingruntimes', NAMESPACE, runtime,
                       lambda o: o['metadata'].__setitem__('finalizers',
                                                           [in_use]))
  step.start()
  step.until(lambda: 'deletionTimestamp' in cluster.store.get(
      'trainingruntimes', NAMESPACE, runtime)['metadata'])
  import time  # pylint: disable=g-import-not-at-top
  time.sleep(0.5)
  assert step.thread.is_alive(), step.error
  cluster.store.remove_finalizer('trainingruntimes', NAMESPACE, runtime,
                                 in_use)
  job = step.until(lambda: not _gone(cluster, 'trainjobs', step.name) and
                   step.job())
  made = cluster.store.get('trainingruntimes', NAMESPACE, runtime)
  assert 'deletionTimestamp' not in made['metadata']
  step.publish_as_the_chief(job)
  _complete(cluster, step.name)
  step.end()
  assert step.error is None, step.error
  assert not [c for c in cluster.calls if c.code == 409]


def test_a_failed_job_fails_the_step_with_its_reason_and_the_pods_log(
    cluster, tmp_path):
  step = Step(cluster, tmp_path, _argv(tmp_path)).start()
  step.job()
  pod = f'{step.name}-node-0-1-abcde'
  cluster.store.create('pods', NAMESPACE, {
      'apiVersion': 'v1', 'kind': 'Pod',
      'metadata': {'name': pod, 'labels': {
          'jobset.sigs.k8s.io/jobset-name': step.name}},
      'spec': {'containers': [{'name': 'node', 'image': KUBEFLOW_IMAGE}]}})
  cluster.store.update_status('pods', NAMESPACE, pod, {
      'phase': 'Failed', 'containerStatuses': [{
          'name': 'node', 'ready': False, 'restartCount': 0,
          'image': KUBEFLOW_IMAGE, 'imageID': '',
          'state': {'terminated': {'exitCode': 1,
                                   'finishedAt': '2026-11-28T16:01:00Z'}}}]})
  cluster.store.set_log(NAMESPACE, pod, 'line one\nRunFnError: boom in '
                        'run_fn\n')
  _complete(cluster, step.name, 'Failed')
  step.end()
  assert isinstance(step.error, StepJobError)
  message = str(step.error)
  assert f'The TrainJob {step.name} that trained the step on 2 workers ' \
      'failed: ReachedMaxRestarts: jobset failed due to reaching max ' \
      'number of restarts' in message
  assert f"The last lines of pod {pod}'s log:\nline one\nRunFnError: " \
      'boom in run_fn' in message
  assert 'Nothing was published' in message
  assert _gone(cluster, 'trainjobs', step.name)


def _earlier_attempt(cluster, step, status=None, ours=True):
  """The objects an earlier attempt of the step made (as it renders them)."""
  objects = step_render.render(
      'TrainJob', step.name, KUBEFLOW_IMAGE,
      step_render.pod_args(step.argv[1:]), NAMESPACE, step.properties, None, 'e' * 32,
      os.path.join(step.model_run, step_record.RECORD_NAME))
  for manifest in objects.values():
    if ours:
      manifest['metadata']['annotations'][
          step_render.MODEL_URI_ANNOTATION] = step.model
    else:
      del manifest['metadata']['labels'][step_render.MANAGED_BY_LABEL]
  cluster.store.create('trainingruntimes', NAMESPACE, objects['runtime'])
  job = cluster.store.create('trainjobs', NAMESPACE, objects['trainjob'])
  if status:
    _complete(cluster, step.name, status)
  return job


def test_a_running_job_of_an_earlier_attempt_is_taken_over(cluster,
                                                           tmp_path):
  """Not made again: the step owns it now, and its runtime (which the
  garbage collector would otherwise delete with the earlier step's pod),
  and follows it to its end."""
  step = Step(cluster, tmp_path, _argv(tmp_path))
  earlier = _earlier_attempt(cluster, step)
  step.start()
  step.until(lambda: step.job()['metadata'].get('ownerReferences'))
  step.until(lambda: cluster.store.get(
      'trainingruntimes', NAMESPACE, f'{step.name}-runtime')['metadata'].get(
          'ownerReferences') == [step.owner])
  step.publish_as_the_chief(earlier)
  _complete(cluster, step.name)
  step.end()
  assert step.error is None, step.error
  assert any(line.startswith(f'Reusing the TrainJob {step.name}')
             for line in step.logs)
  made = [c for c in cluster.calls
          if c.verb == 'create' and c.resource == 'trainjobs']
  assert not made


def test_a_job_whose_runtime_is_gone_is_made_again(cluster, tmp_path):
  """An earlier attempt's running TrainJob whose TrainingRuntime is gone
  (the garbage collector took it with that attempt's pod): Trainer's
  webhook refuses every update of it, the owner's patch included, so it
  is deleted and made again with its runtime."""
  import kube_api  # pylint: disable=g-import-not-at-top
  step = Step(cluster, tmp_path, _argv(tmp_path))
  _earlier_attempt(cluster, step)
  cluster.store.delete('trainingruntimes', NAMESPACE, f'{step.name}-runtime')
  with pytest.raises(kube_api.StatusError, match='specified trainingRuntime '
                     'must be created before the TrainJob is created'):
    cluster.store.patch('trainjobs', NAMESPACE, step.name, {
        'metadata': {'ownerReferences': [step.owner]}})
  step.start()
  step.until(lambda: any('its runtime is gone' in line
                         for line in step.logs))
  job = step.until(lambda: not _gone(cluster, 'trainjobs', step.name) and
                   step.job()['metadata'].get('ownerReferences') and
                   step.job())
  step.publish_as_the_chief(job)
  _complete(cluster, step.name)
  step.end()
  assert step.error is None, step.error


def test_a_failed_job_of_an_earlier_attempt_is_removed_and_made_again(
    cluster, tmp_path):
  step = Step(cluster, tmp_path, _argv(tmp_path))
  earlier = _earlier_attempt(cluster, step, status='Failed')
  step.start()
  job = step.until(lambda: (lambda j: j['metadata']['uid'] != earlier[
      'metadata']['uid'] and j)(step.job()))
  step.publish_as_the_chief(job)
  _complete(cluster, step.name)
  step.end()
  assert step.error is None, step.error
  assert any(line.startswith(f'Deleting the TrainJob {step.name}')
             for line in step.logs)
  deleted = [c for c in cluster.calls
             if c.verb == 'delete' and c.resource == 'trainjobs']
  assert deleted[0].code < 300


def test_a_job_of_that_name_that_is_not_ours_is_left_alone(cluster,
                                                          tmp_path):
  step = Step(cluster, tmp_path, _argv(tmp_path))
  _earlier_attempt(cluster, step, ours=False)
  with pytest.raises(StepJobError, match=(
      f'A TrainJob named {step.name} exists in namespace {NAMESPACE} and '
      'was not launched by this step.*neither used nor deleted')):
    step.run()
  cluster.store.get('trainjobs', NAMESPACE, step.name)  # Still there.
  assert not [c for c in cluster.calls if c.verb == 'delete']


def test_a_job_deleted_by_someone_else_fails_the_step(cluster, tmp_path):
  step = Step(cluster, tmp_path, _argv(tmp_path)).start()
  step.job()
  cluster.store.delete('trainjobs', NAMESPACE, step.name)
  step.end()
  assert isinstance(step.error, StepJobError)
  assert 'was deleted while it trained (by someone else' in str(step.error)


def test_an_expired_watch_is_read_again_and_followed(cluster, tmp_path):
  """410 Expired (the history moved past the version the step watches
  from): it reads the job again and watches from there."""
  cluster.store.set_window(2)
  step = Step(cluster, tmp_path, _argv(tmp_path)).start()
  job = step.job()
  for i in range(6):  # Other objects' events push the job's out.
    cluster.store.create('pods', NAMESPACE, {
        'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': f'p{i}'},
        'spec': {'containers': [{'name': 'c', 'image': 'x'}]}})
  step.publish_as_the_chief(job)
  _complete(cluster, step.name)
  step.end()
  assert step.error is None, step.error


def test_sigterm_to_the_step_deletes_its_job(cluster, tmp_path):
  """The run cancelled: SIGTERM to the step (here, this process, in the
  step's own preemption handling) deletes the TrainJob and its runtime,
  and says where the next run resumes."""
  import signal  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import PreemptedError  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import preemption  # pylint: disable=g-import-not-at-top
  step = Step(cluster, tmp_path, _argv(tmp_path))

  def cancel():
    import time  # pylint: disable=g-import-not-at-top
    deadline = time.monotonic() + 30
    while _gone(cluster, 'trainjobs', step.name):
      if time.monotonic() > deadline:
        return
      time.sleep(0.05)
    time.sleep(0.5)  # The step is in its watch.
    os.kill(os.getpid(), signal.SIGTERM)
  threading.Thread(target=cancel, daemon=True).start()
  try:
    with pytest.raises(PreemptedError, match=(
        f'SIGTERM to the step.*the TrainJob {step.name} it launched was '
        'deleted.*resumes from the checkpoint in the ModelRun artifact')):
      with preemption.handling(), preemption.stopping_anywhere():
        step.run()
  finally:
    preemption._requested.clear()  # pylint: disable=protected-access
  assert _gone(cluster, 'trainjobs', step.name)
  assert _gone(cluster, 'trainingruntimes', f'{step.name}-runtime')


def test_a_step_without_the_role_is_told_to_apply_it(cluster, tmp_path):
  """The Role without `create` on trainjobs: the API's 403, named, and the
  command that applies the Role."""
  cluster.rules = [dict(rule, verbs=[v for v in rule['verbs']
                                     if v != 'create'])
                   if rule['resources'] == ['trainjobs'] else rule
                   for rule in cluster.rules]
  step = Step(cluster, tmp_path, _argv(tmp_path))
  with pytest.raises(StepJobError, match=(
      r"The Kubernetes API refused a call of the step's TrainJob \(403 "
      r'Forbidden\): trainjobs.trainer.kubeflow.org is forbidden: User '
      rf'"system:serviceaccount:{NAMESPACE}:pipeline-runner" cannot create '
      r'resource "trainjobs".*python -m generic_trainer.kubeflow.step_job '
      rf'rbac SERVICE_ACCOUNT {NAMESPACE} TrainJob \| kubectl apply')) as e:
    step.run()
  assert ("the run's service account: default-editor in a profile's "
          'namespace of multi-user Kubeflow, pipeline-runner in standalone '
          'KFP') in str(e.value)


def test_a_refusal_of_the_job_object_does_not_blame_the_pods():
  """A webhook's 403 on the TrainJob's create names the job object; a
  quota on resources and Pod Security act on pods (named when they do not
  start), and the message says so."""
  from kubernetes.client.exceptions import ApiException  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kinds  # pylint: disable=g-import-not-at-top
  error = ApiException(status=403, reason='Forbidden')
  error.body = json.dumps({'message': 'admission webhook "validator.'
                           'trainjob.trainer.kubeflow.org" denied the '
                           'request: spec.runtimeRef: Invalid value'})
  message = str(step_client.refused(error, kinds.named('TrainJob'),
                                    NAMESPACE))
  assert "The Kubernetes API refused the step's TrainJob (403 Forbidden): " \
      'admission webhook' in message
  assert 'the refusal above, of the job object itself' in message
  assert 'Pod Security act on its pods, which the step names when they do ' \
      'not start' in message


def test_a_tfjob_on_request_is_launched_and_followed_the_same_way(tmp_path):
  """`--step-job TFJob`: the Training Operator's TFJob, granted its own
  Role; Succeeded is its end."""
  import kube_api  # pylint: disable=g-import-not-at-top
  (role, _) = rbac('pipeline-runner', NAMESPACE, 'TFJob')
  with kube_api.KubeAPI(str(tmp_path / 'api'), role['rules'],
                        namespace=NAMESPACE) as api:
    pod = api.store.create('pods', NAMESPACE, {
        'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': STEP_POD},
        'spec': {'containers': [{'name': 'main', 'image': KUBEFLOW_IMAGE}]}})
    api.step_pod_uid = pod['metadata']['uid']
    step = Step(api, tmp_path, _argv(tmp_path), kind='TFJob').start()
    job = step.job()
    replicas = job['spec']['tfReplicaSpecs']
    assert replicas['Chief']['replicas'] + replicas['Worker']['replicas'] == 2
    step.publish_as_the_chief(job)
    api.store.update_status('tfjobs', NAMESPACE, step.name, {'conditions': [{
        'type': 'Succeeded', 'status': 'True', 'reason': 'TFJobSucceeded',
        'message': f'TFJob {NAMESPACE}/{step.name} successfully completed.',
        'lastUpdateTime': '2026-11-28T16:00:00Z',
        'lastTransitionTime': '2026-11-28T16:00:00Z'}]})
    step.end()
    assert step.error is None, step.error
    assert step.record['outputs']['model'][0]['trained_steps']
    assert _gone(api, 'tfjobs', step.name)


def test_a_cluster_without_trainer_is_named(cluster, tmp_path, monkeypatch):
  """No TrainingRuntime API served (Trainer v2 not installed): said so,
  with the other ways, not the API's bare 404."""
  import kube_api  # pylint: disable=g-import-not-at-top
  monkeypatch.delitem(kube_api.RESOURCES, 'trainingruntimes')
  step = Step(cluster, tmp_path, _argv(tmp_path))
  with pytest.raises(StepJobError, match=(
      r'The cluster serves no TrainJob API \(trainer.kubeflow.org/v1alpha1\)'
      r': Kubeflow Trainer v2 .* is not installed.*Received: 404 "the server '
      r'could not find the requested resource"\. Install it, or compile with '
      r'--step-job TFJob')):
    step.run()


def _owned_job(cluster, step, owner):
  """A running job of the step, owned by `owner` (a pod's reference), and
  its pods' record variable (what `bound.watching` reads)."""
  job = _earlier_attempt(cluster, step)
  cluster.store.modify('trainjobs', NAMESPACE, step.name,
                       lambda o: o['metadata'].__setitem__(
                           'ownerReferences', [owner]))
  env = {e['name']: e['value'] for e in job['spec']['trainer']['env']}
  return env[STEP_JOB_RECORD_ENV]


def _watch_until(cluster, record, condition, grace_s=0.3, timeout_s=20):
  import time  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow.step_job import bound  # pylint: disable=g-import-not-at-top
  with bound.watching(record, api_client=cluster.api_client(),
                      namespace=NAMESPACE, every_s=0.05,
                      grace_s=grace_s) as watch:
    assert watch is not None
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
      time.sleep(0.05)
  return watch


@pytest.mark.parametrize('phase', ['Failed', 'Succeeded'])
def test_a_job_whose_step_pod_ended_without_sigterm_deletes_itself(
    cluster, tmp_path, phase):
  """A step pod OOM-killed (no SIGTERM, so the step's code deleted
  nothing) and left by Argo in its final phase (KFP 2.5: no podGC), so
  the garbage collector deletes nothing either: the job's pods read their
  step's phase and delete their job, with the step's own Role."""
  step = Step(cluster, tmp_path, _argv(tmp_path))
  record = _owned_job(cluster, step, step.owner)
  assert json.loads(record)['kind'] == 'TrainJob'
  # While the step runs, the job stays.
  _watch_until(cluster, record, lambda: False, timeout_s=0.5)
  assert not _gone(cluster, 'trainjobs', step.name)
  cluster.store.update_status('pods', NAMESPACE, STEP_POD, {'phase': phase})
  watch = _watch_until(cluster, record,
                       lambda: _gone(cluster, 'trainjobs', step.name))
  assert watch.deleted and _gone(cluster, 'trainjobs', step.name)
  assert cluster.store.get('pods', NAMESPACE, STEP_POD)  # Left as it was.


def test_a_job_a_retry_took_over_follows_its_new_step(cluster, tmp_path):
  """The first attempt's pod failed, but a retry's pod owns the job now:
  the job is the retry's and stays; when that pod ends, it goes."""
  step = Step(cluster, tmp_path, _argv(tmp_path))
  retry = cluster.store.create('pods', NAMESPACE, {
      'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'step-retry'},
      'spec': {'containers': [{'name': 'main', 'image': KUBEFLOW_IMAGE}]}})
  cluster.store.update_status('pods', NAMESPACE, STEP_POD, {'phase': 'Failed'})
  cluster.store.update_status('pods', NAMESPACE, 'step-retry',
                              {'phase': 'Running'})
  record = _owned_job(cluster, step, {
      'apiVersion': 'v1', 'kind': 'Pod', 'name': 'step-retry',
      'uid': retry['metadata']['uid']})
  watch = _watch_until(cluster, record, lambda: False, timeout_s=0.8)
  assert not watch.deleted and not _gone(cluster, 'trainjobs', step.name)
  cluster.store.update_status('pods', NAMESPACE, 'step-retry',
                              {'phase': 'Failed'})
  _watch_until(cluster, record, lambda: _gone(cluster, 'trainjobs', step.name))
  assert _gone(cluster, 'trainjobs', step.name)


def test_the_verdict_on_a_step_pod_gone_replaced_or_ended():
  """The decision alone: no owner, nothing to watch; the owner's pod
  missing, of another uid, being deleted or in a final phase: ended."""
  from generic_trainer.kubeflow.step_job.bound import verdict  # pylint: disable=g-import-not-at-top
  owner = {'apiVersion': 'v1', 'kind': 'Pod', 'name': 'step', 'uid': 'u1'}
  job = {'metadata': {'ownerReferences': [owner]}}

  def pod(uid='u1', phase='Running', **metadata):
    return {'metadata': {'name': 'step', 'uid': uid, **metadata},
            'status': {'phase': phase}}
  assert verdict({'metadata': {}}, None) is None
  assert verdict(job, pod()) is None
  assert verdict(job, pod(phase='Pending')) is None
  assert 'is gone' in verdict(job, None)
  assert 'another uid' in verdict(job, pod(uid='u2'))
  assert 'being deleted' in verdict(
      job, pod(deletionTimestamp='2026-11-29T00:00:00Z'))
  assert 'phase Failed' in verdict(job, pod(phase='Failed'))
  assert 'phase Succeeded' in verdict(job, pod(phase='Succeeded'))


def test_a_pod_without_the_role_says_it_cannot_watch_and_trains_on(
    tmp_path, caplog):
  """A service account that may not read the job (pod_settings named
  another): one warning, the job left to its owner reference."""
  import logging  # pylint: disable=g-import-not-at-top
  import kube_api  # pylint: disable=g-import-not-at-top
  with kube_api.KubeAPI(str(tmp_path / 'api'), [],
                        namespace=NAMESPACE) as api:
    record = json.dumps({'path': '/x', 'job': 'j', 'kind': 'TrainJob',
                         'nonce': 'n'})
    with caplog.at_level(logging.WARNING):
      watch = _watch_until(api, record, lambda: 'cannot watch' in caplog.text,
                           timeout_s=5)
    assert not watch.deleted
    assert 'cannot watch its step (HTTP 403)' in caplog.text


_WAITING_STEP_IMPORTS = """
import tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor
import generic_trainer.component.executor
import generic_trainer.kubeflow.step_job.step
with open('/proc/self/status') as status:
  print([line.split()[1] for line in status if line.startswith('VmHWM:')][0])
"""
# VmHWM, this process's own peak: getrusage's ru_maxrss would keep the
# test process's (the kernel folds the pre-exec memory's peak into it at
# exec: 2.6 GB in a full session of the suite).


def test_the_waiting_step_fits_in_the_memory_it_asks_for(tmp_path):
  """The step that launches a job asks for WAITING_STEP_RESOURCES' memory
  (GB): its process, TFX's KFP entrypoint with the executor and the step's
  job code imported, must peak well under it (it peaked at 892 MB when
  the request was set), or the step pod is OOM-killed while it waits.
  Measured as the image runs it, with its modules compiled to bytecode
  (the Dockerfile compiles them), here into a cache folder of the test's
  filled by a first import."""
  env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp_path / 'pycache'))
  env.pop('PYTHONDONTWRITEBYTECODE', None)
  for _ in range(2):  # The first compiles; the second is measured.
    done = subprocess.run([sys.executable, '-c', _WAITING_STEP_IMPORTS],
                          capture_output=True, text=True, timeout=600,
                          check=True, env=env)
  peak_mb = int(done.stdout.split()[-1]) / 1024
  asked_mb = compile_lib.WAITING_STEP_RESOURCES['memoryRequest'] * 1000
  print(f'the waiting step peaked at {peak_mb:.0f} MB of {asked_mb:.0f} MB')
  assert peak_mb < 0.6 * asked_mb, (peak_mb, asked_mb)
