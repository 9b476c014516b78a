"""A Kubeflow step with several workers launches a TrainJob or TFJob
(`generic_trainer.kubeflow.step_job`): what the compile hands the step,
the job it renders, and (against the stand-in API server, tests/kube_api.py)
how it launches, follows, reuses, removes and cancels it."""

import json
import os

import pytest

from conftest import KUBEFLOW_IMAGE
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import StepJobError
from generic_trainer.keys import STEP_JOB_ENV
from generic_trainer.keys import STEP_JOB_RECORD_ENV
from generic_trainer.kubeflow import kfp_step
from generic_trainer.kubeflow import step_job
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
  assert 'resources' not in kfp_step.container(job, 'GenericTrainer')
  alone = _compiled(tmp_path, num_workers=1)
  assert kfp_step.container(alone, 'GenericTrainer')['resources'][
      'cpuLimit'] == 2.0


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


def test_the_step_launches_and_its_pods_train(tmp_path):
  """`wanted`: the step (no cluster placement) launches; a pod of its job
  (TF_CONFIG, or the JobSet's variables) trains; one worker never
  launches; a damaged variable is refused, saying what the compile
  writes."""
  value = step_job.to_env('TrainJob', 'img', None)['value']
  two = {'num_workers': 2}
  assert step_job.wanted({STEP_JOB_ENV: value}, two)['kind'] == 'TrainJob'
  assert step_job.wanted({STEP_JOB_ENV: value}, {'num_workers': 1}) is None
  assert step_job.wanted({STEP_JOB_ENV: value}, {'num_workers': '1:3'})
  assert step_job.wanted({STEP_JOB_ENV: value, 'TF_CONFIG': '{}'},
                         two) is None
  assert step_job.wanted({STEP_JOB_ENV: value, 'JOBSET_NAME': 'gt-x'},
                         two) is None
  assert step_job.wanted({}, two) is None
  with pytest.raises(InvalidArgumentError, match=(
      f'{STEP_JOB_ENV} is not what the compile writes.*Received: .*PyTorch')):
    step_job.wanted({STEP_JOB_ENV: '{"kind": "PyTorchJob", "image": "x"}'},
                    two)


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
  args = step_job.pod_args(argv[1:])
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
    step_job.pod_args(['--json_serialized_invocation_args', '{}'])


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
    return step_job.render(kind, step_job.job_name('gs://b/r/model'),
                           KUBEFLOW_IMAGE, step_job.pod_args(argv[1:]),
                           'team-a', properties, {'cpu': 2}, nonce,
                           'gs://b/r/model_run/' + step_job.RECORD_NAME)
  first, second = render('a' * 32), render('b' * 32)
  for objects in (first, second):
    for key, manifest in objects.items():
      crd = {'trainjob': crd_schema.TRAINJOB_CRD,
             'runtime': crd_schema.TRAININGRUNTIME_CRD,
             'tfjob': crd_schema.TFJOB_CRD}[key]
      assert crd_schema.errors(manifest, crd) == []
      metadata = manifest['metadata']
      assert metadata['labels'][step_job.MANAGED_BY_LABEL] == 'generic-trainer'
      assert metadata['namespace'] == 'team-a'
  digests = {m['metadata']['annotations'][step_job.SPEC_ANNOTATION]
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


def test_the_job_name_is_one_per_step_and_fits_the_longest_pod_names():
  from generic_trainer.kubeflow import trainjob  # pylint: disable=g-import-not-at-top
  name = step_job.job_name('gs://b/root/run-1/GenericTrainer/model')
  assert name == step_job.job_name('gs://b/root/run-1/GenericTrainer/model')
  assert name != step_job.job_name('gs://b/root/run-2/GenericTrainer/model')
  assert len(name) <= trainjob.longest_name(10)
