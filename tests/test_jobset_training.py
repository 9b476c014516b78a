"""Kubeflow Trainer v2 without a cluster: two processes that learn their
place from a JobSet's environment alone (no TF_CONFIG) and train together.

Each process runs in its own network namespace, as each JobSet pod has its
own address: both listen on the same port (2222, as in the pods), and the
pods' stable host names (`<jobset>-node-0-<i>.<jobset>`) resolve through
a hosts file that `ip netns exec` puts in place of /etc/hosts, as the
cluster's DNS would. Needs root and iproute2; skipped, saying so, without.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, penguin_statistics

pytestmark = pytest.mark.slow

_JOBSET = 'penguin-train'
_SUBNET = '10.241.{}.{}'


def _ip(*args):
  subprocess.run(['ip', *args], check=True, capture_output=True)


@pytest.fixture
def pod_namespaces():
  """Two network namespaces joined by a veth pair, each with the pods'
  host names in its hosts file: [(namespace, address), ...]."""
  if not shutil.which('ip'):  # Root: tests/needs-root.txt.
    pytest.skip('network namespaces need iproute2 (ip): not here')
  tag = f'gt{os.getpid() % 100000}'
  net = os.getpid() % 250 + 1
  pods = [(f'{tag}-{i}', _SUBNET.format(net, i + 1)) for i in range(2)]
  hosts = ''.join(f'{address} {_JOBSET}-node-0-{i}.{_JOBSET}\n'
                  for i, (_, address) in enumerate(pods))
  try:
    for name, _ in pods:
      _ip('netns', 'add', name)
      os.makedirs(f'/etc/netns/{name}', exist_ok=True)
      with open(f'/etc/netns/{name}/hosts', 'w') as f:
        f.write('127.0.0.1 localhost\n' + hosts)
    _ip('link', 'add', f'{tag}a', 'type', 'veth', 'peer', 'name', f'{tag}b')
    for (name, address), end in zip(pods, 'ab'):
      _ip('link', 'set', f'{tag}{end}', 'netns', name)
      _ip('-n', name, 'addr', 'add', f'{address}/24', 'dev', f'{tag}{end}')
      _ip('-n', name, 'link', 'set', f'{tag}{end}', 'up')
      _ip('-n', name, 'link', 'set', 'lo', 'up')
  except subprocess.CalledProcessError as e:
    _remove(pods)
    pytest.skip(f'cannot make network namespaces here: {e.stderr!r}')
  yield pods
  _remove(pods)


def _remove(pods):
  for name, _ in pods:
    subprocess.run(['ip', 'netns', 'del', name], check=False,
                   capture_output=True)
    shutil.rmtree(f'/etc/netns/{name}', ignore_errors=True)


def test_two_pods_train_from_a_jobset_environment(
    compiled_kubeflow, penguin_artifacts, pod_namespaces, tmp_path):
  """Pod 0 builds TF_CONFIG, trains as chief and publishes; pod 1 trains
  as worker 1 of 2 and publishes nothing."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  examples, schema = penguin_artifacts
  job, _ = compiled_kubeflow
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri, model_run.uri = str(tmp_path / 'model'), str(tmp_path /
                                                          'model_run')
  invocation = kfp_step.executor_input(
      job, 'GenericTrainer',
      {'examples': [examples], 'schema': [schema],
       'statistics': [penguin_statistics(tmp_path)]},
      {'model': [model], 'model_run': [model_run]},
      str(tmp_path / 'executor_output.json'))
  command = kfp_step.command_line(job, 'GenericTrainer', invocation,
                                  python=sys.executable)
  processes = []
  for index, (namespace, _) in enumerate(pod_namespaces):
    scratch = tmp_path / f'tmp-{index}'
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}
    env.update(TMPDIR=str(scratch), JOBSET_NAME=_JOBSET,
               REPLICATED_JOB_NAME='node', JOB_INDEX='0',
               JOB_COMPLETION_INDEX=str(index), GENERIC_TRAINER_NUM_NODES='2',
               PYTHONPATH=os.pathsep.join([
                   os.path.join(REPO, 'module_files'), REPO,
                   os.environ.get('PYTHONPATH', '')]))
    processes.append(subprocess.Popen(
        ['ip', 'netns', 'exec', namespace, *command], env=env,
        cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True))
  logs = []
  try:
    for process in processes:
      logs.append(process.communicate(timeout=420)[0])
  finally:
    for process in processes:
      process.kill()
  for process, log in zip(processes, logs):
    assert process.returncode == 0, log[-5000:]
  cluster = [f'{_JOBSET}-node-0-{i}.{_JOBSET}:2222' for i in range(2)]
  for index, log in enumerate(logs):
    assert 'TF_CONFIG built from the JobSet environment: ' + json.dumps(
        {'cluster': {'worker': cluster},
         'task': {'type': 'worker', 'index': index}}) in log
    assert 'This pod gives the training ' in log
  assert 'training as worker 1 of 2 (worker 1); the chief publishes' in logs[1]
  assert 'export validated: ' in logs[0]
  assert 'export validated: ' not in logs[1]
  assert os.listdir(model.uri) == ['Format-Serving']
