"""The compiled penguin pipeline's trainer step with two workers, as
Kubeflow runs it: the step, in a container of the image with a service
account's token, launches a TrainJob through the stand-in API server
(tests/kube_api.py, granted only the Role `step_job.rbac` renders); the
stand-in controller (tests/kube_controller.py) runs its two pods as
containers of the image, with JobSet's host names and environment; the
chief publishes into the step's Model artifact, and the pipeline's
Evaluator blesses it and Pusher pushes it. On the way: a pod killed
mid-training (the JobSet restarts the group, which resumes at its last
checkpoint), then the run cancelled (SIGTERM to the step: it deletes its
job, the pods save their step), then the step run again, which resumes
there and trains no step twice."""

import glob
import json
import os
import re
import shutil
import time
import uuid

import pytest

from conftest import REPO, penguin_statistics
from generic_trainer.keys import KFP_POD_NAME_ENV
from generic_trainer.keys import KFP_POD_UID_ENV
import containers
import kube_api
import kube_controller

pytestmark = pytest.mark.slow

NAMESPACE = 'kubeflow-user'
TRAIN_STEPS = 300
SERVICE_ACCOUNT_MOUNT = '/var/run/secrets/kubernetes.io/serviceaccount'
# Recorded for docs/guides/scaling-out.md: the TrainJob as `kubectl get
# trainjob` shows it while it trains, and its status.
RECORDED = os.path.join(REPO, 'build', 'trainjob-recorded.txt')
# What the step logged of its job: absl names the module that logged, one
# of the step_job package's.
_STEP_JOB_LOGS = re.compile(r' (%s)\.py:\d+\] ' % '|'.join(
    name[:-3] for name in os.listdir(os.path.join(
        REPO, 'generic_trainer', 'kubeflow', 'step_job'))
    if name.endswith('.py')))


@pytest.fixture(scope='module')
def image():
  return containers.build_image()


def _wait(what, check, processes, controller, timeout_s=420):
  deadline = time.monotonic() + timeout_s
  while True:
    value = check()
    if value:
      return value
    if controller.errors:
      raise controller.errors[0]
    for process in processes:
      if process.poll() is not None:
        raise AssertionError(f'ended while waiting for {what}: '
                             f'{process.stdout.read()[-5000:]}')
    assert time.monotonic() < deadline, f'no {what} in {timeout_s} s'
    time.sleep(0.3)


def test_a_two_pod_trainjob_trains_the_step_and_its_model_is_blessed(
    image, penguin_artifacts, tmp_path):
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow.step_job import render as step_render  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow.step_job.rbac import rbac  # pylint: disable=g-import-not-at-top
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  root = str(tmp_path / 'root')
  os.makedirs(root)
  job = penguin_pipeline_kubeflow.compile_pipeline(
      os.path.join(root, 'penguin.json'), image,
      pipeline_root=os.path.join(root, 'pipeline'),
      serving_model_dir=os.path.join(root, 'serving'), target='kfp-local',
      step_job='TrainJob', num_workers=2, train_steps=TRAIN_STEPS,
      eval_steps=5,
      # The uid and group OpenShift's restricted SCC gives every pod of the
      # namespace, the step's too (kube_controller.HARDENED): the stand-in
      # kubelet runs the job's pods as their spec says, nothing more.
      trainer_pod_settings={'security_context': {'runAsUser': 1000680000,
                                                 'runAsGroup': 0}},
      kfp_release='2.16')  # Whose platform spec carries them on the step.
  examples, schema = penguin_artifacts
  for artifact, name in ((examples, 'examples'), (schema, 'schema')):
    shutil.copytree(artifact.uri, os.path.join(root, name))
    artifact.uri = os.path.join(root, name)
  statistics = penguin_statistics(root)
  inputs = {key: value['artifacts'] for key, value in kfp_step.executor_input(
      job, 'GenericTrainer', {'examples': [examples], 'schema': [schema],
                              'statistics': [statistics]}, {},
      os.path.join(root, 'unused.json'))['inputs']['artifacts'].items()}
  model_uri = os.path.join(root, 'GenericTrainer', 'model')
  model_run_uri = os.path.join(root, 'GenericTrainer', 'model_run')
  outputs = {
      'model': [{'name': 'GenericTrainer-model', 'uri': model_uri,
                 'metadata': {}}],
      'model_run': [{'name': 'GenericTrainer-model_run',
                     'uri': model_run_uri, 'metadata': {}}]}
  record = os.path.join(root, 'record')
  parameters = {  # The slow penguin spec: ~0.1 s a step, steps recorded.
      'module_path': None,
      'module_file': containers.module_in(
          root, 'tests/testdata/slow_worker_spec.py',
          'module_files/penguin_spec.py'),
      'custom_config': json.dumps({'record_dir': record})}
  name = step_render.job_name(model_uri)
  (role, _) = rbac('pipeline-runner', NAMESPACE)

  def chief_steps():
    try:
      with open(os.path.join(record, 'steps.log')) as f:
        lines = [line.split() for line in f]
    except FileNotFoundError:
      return []
    return [(pid, int(step)) for pid, worker, step in lines if worker == '0']

  def saved_step():
    for path in glob.glob(os.path.join(model_run_uri, 'resume-*',
                                       'latest.json')):
      with open(path) as f:
        return json.load(f).get('step', 0)
    return 0

  with kube_api.KubeAPI(str(tmp_path / 'api'), role['rules'],
                        namespace=NAMESPACE) as api, \
      kube_controller.Controller(
          api.store, NAMESPACE, image, str(tmp_path / 'pods'),
          mounts=[f'{root}:{root}', f'{REPO}:{REPO}:ro']) as controller:

    def step(attempt, detach):
      """The trainer step's pod, as KFP's driver makes it: a Pod object
      (the job's owner), its service account's token mounted, KFP's
      variables; the container on the host's network to reach the API."""
      pod = api.store.create('pods', NAMESPACE, {
          'apiVersion': 'v1', 'kind': 'Pod',
          'metadata': {'name': f'penguin-trainer-{attempt}'},
          'spec': {'containers': [{'name': 'main', 'image': image}]}})
      return containers.run_step(
          job, 'GenericTrainer', image, root, inputs,
          env={**api.environ,
               KFP_POD_NAME_ENV: pod['metadata']['name'],
               KFP_POD_UID_ENV: pod['metadata']['uid']},
          extra=['--network', 'host', '-v',
                 f'{api.service_account_dir}:{SERVICE_ACCOUNT_MOUNT}:ro',
                 '-v', f'{REPO}:{REPO}:ro', *kube_controller.HARDENED],
          outputs=outputs, parameters=parameters,
          detach_name=(f'gt-step-{attempt}-{uuid.uuid4().hex[:8]}'
                       if detach else None),
          launcher_mount_points=True)

    first = step('first', detach=True)
    _wait('the first steps', lambda: len(chief_steps()) >= 10, [first],
          controller)
    (killed,) = [p['metadata']['name'] for p in api.store.list(
        'pods', NAMESPACE, label_selector=(
            'batch.kubernetes.io/job-completion-index=1'))['items']]
    controller.kill(killed)  # A node lost: SIGKILL, no step saved.
    before_kill = chief_steps()
    pids = {pid for pid, _ in before_kill}
    _wait('the restarted group training',
          lambda: len({p for p, _ in chief_steps()} - pids) == 1 and
          chief_steps()[-1][1] >= before_kill[-1][1] + 8, [first],
          controller)
    _wait('the progress the chief reports',
          lambda: 'trainerStatus' in (api.store.get(
              'trainjobs', NAMESPACE, name).get('status') or {}),
          [first], controller, timeout_s=60)
    trainjob = api.store.get('trainjobs', NAMESPACE, name)
    os.makedirs(os.path.dirname(RECORDED), exist_ok=True)
    with open(RECORDED, 'w') as f:
      f.write(f'$ kubectl get trainjob -n {NAMESPACE}\n{controller.printed()}'
              f'$ kubectl get trainjob {name} -n {NAMESPACE} -o '
              "jsonpath='{.status}'\n"
              f'{json.dumps(trainjob.get("status"), sort_keys=True)}\n')

    containers.engine('kill', '--signal', 'TERM',
                      first.args[first.args.index('--name') + 1])
    log = first.communicate(timeout=300)[0]
    assert first.returncode != 0, log[-5000:]
    with open(RECORDED, 'a') as f:  # What the step logged of its job.
      f.write('$ kubectl logs <the step\'s pod> (its lines of the job)\n' +
              ''.join(line.split('] ', 1)[-1] + '\n'
                      for line in log.splitlines()
                      if _STEP_JOB_LOGS.search(line)))
    assert f'the TrainJob {name} it launched was deleted' in log, log[-5000:]
    for plural in ('trainjobs', 'trainingruntimes'):
      assert not api.store.list(plural, NAMESPACE)['items'], plural
    _wait('the pods to end', lambda: not [
        p for p in api.store.list('pods', NAMESPACE)['items']
        if p['metadata']['name'].startswith(name)], [], controller)
    saved = saved_step()
    steps = chief_steps()
    assert steps[-1][1] == saved, (steps[-5:], saved)  # SIGTERM saved it.
    assert not os.path.exists(model_uri) or not os.listdir(model_uri)

    produced = step('again', detach=False)  # Resumes from the checkpoint.
  steps = chief_steps()
  by_attempt = {}
  for pid, number in steps:
    by_attempt.setdefault(pid, []).append(number)
  attempts = list(by_attempt.values())
  assert len(attempts) == 3, [a[:2] + a[-2:] for a in attempts]
  first_run, restarted, rerun = attempts
  # The killed group lost at most the steps since its last checkpoint
  # (every 2 steps); the cancelled one lost none; the end is exact.
  assert first_run[-1] - 2 <= restarted[0] - 1 <= first_run[-1]
  assert restarted == list(range(restarted[0], restarted[-1] + 1))
  assert rerun == list(range(saved + 1, TRAIN_STEPS + 1))
  (model,) = produced['model']
  assert os.listdir(model['uri']) == ['Format-Serving']
  assert model['metadata'], 'the chief\'s custom properties reached the step'

  evaluator = containers.run_step(
      job, 'Evaluator', image, root,
      {'examples': inputs['examples'], 'model': produced['model']},
      extra=['--network', 'none', *kube_controller.HARDENED],
      launcher_mount_points=True)
  (blessing,) = evaluator['blessing']
  assert os.path.exists(os.path.join(blessing['uri'], 'BLESSED'))
  pusher = containers.run_step(
      job, 'Pusher', image, root,
      {'model': produced['model'], 'model_blessing': evaluator['blessing']},
      extra=['--network', 'none', *kube_controller.HARDENED],
      launcher_mount_points=True)
  (pushed,) = pusher['pushed_model']
  assert pushed['metadata'].get('pushed') in (1, 1.0, '1')
