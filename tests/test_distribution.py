"""Cluster environments, distribution settings and TF_CONFIG roles: found
once, checked early, parsed exactly; more local workers than the machine
runs refused before any starts."""

import json
import os

import pytest

from conftest import TESTDATA
from generic_trainer.launch import cluster_environment
from generic_trainer.plan import plan as plan_lib
from generic_trainer.plan import settings
from generic_trainer.plan.plan import ClusterRole, Where
from generic_trainer.errors import InvalidArgumentError


def _place(role):
  """A role's place in its cluster, without where it was found."""
  return (role.num_workers, role.worker_index, role.is_chief, role.task_type,
          role.task_index)


def _tf_config(cluster, task_type, index):
  return json.dumps({'cluster': cluster, 'task': {'type': task_type,
                                                  'index': index}})


_WORKERS = {'worker': ['w0:2222', 'w1:2222', 'w2:2222']}
_CHIEF_AND_WORKERS = {'chief': ['c:2222'], 'worker': ['w0:2222', 'w1:2222']}


@pytest.mark.parametrize('tf_config, role', [
    (None, ClusterRole()),
    ('', ClusterRole()),
    (_tf_config(_WORKERS, 'worker', 0),
     ClusterRole(3, 0, True, 'worker', 0)),
    (_tf_config(_WORKERS, 'worker', 2),
     ClusterRole(3, 2, False, 'worker', 2)),
    (_tf_config(_CHIEF_AND_WORKERS, 'chief', 0),
     ClusterRole(3, 0, True, 'chief', 0)),
    (_tf_config(_CHIEF_AND_WORKERS, 'worker', 0),
     ClusterRole(3, 1, False, 'worker', 0)),
])
def test_role_from_tf_config(tf_config, role):
  """The chief is the 'chief' task, else worker 0; workers count after it."""
  found = cluster_environment.role_from_tf_config(tf_config)
  assert _place(found) == _place(role)
  assert found == role


@pytest.mark.parametrize('tf_config, message', [
    ('{"cluster": {}', r'TF_CONFIG must be JSON with "cluster" and "task"'),
    ('{"task": {"type": "worker"}}', r'TF_CONFIG must be JSON'),
    (_tf_config({'ps': ['p:1'], 'worker': ['w:1']}, 'ps', 0),
     r"TF_CONFIG names this task 'ps'.*tasks are \('chief', 'worker'\)"),
])
def test_tf_config_errors(tf_config, message):
  """A TF_CONFIG we cannot train under says why."""
  with pytest.raises(InvalidArgumentError, match=message):
    cluster_environment.role_from_tf_config(tf_config)


@pytest.mark.parametrize('num_workers, strategy, message', [
    (0, None, r"'num_workers' must be a positive int.*Received: "
     r'num_workers=0'),
    (True, None, r'Received: num_workers=True'),
    ('2', None, r"Received: num_workers='2'"),
    (1, 'parameter_server', r"'strategy' must be one of \('default', "
     r"'mirrored', 'multi_worker_mirrored'\) or None.*Received: "
     r"strategy='parameter_server'"),
    (2, 'mirrored', r"A 2-worker training needs strategy="
     r"'multi_worker_mirrored'.*Received: num_workers=2, "
     r"strategy='mirrored'"),
])
def test_settings_errors(num_workers, strategy, message):
  """Wrong distribution settings are named with what is expected."""
  with pytest.raises(InvalidArgumentError, match=message):
    settings.check_settings(num_workers=num_workers, strategy=strategy)


@pytest.mark.parametrize('kwargs, message', [
    ({'num_workers': -1}, r"'num_workers' must be a positive int"),
    ({'num_workers': 3, 'strategy': 'default'},
     r"A 3-worker training needs strategy='multi_worker_mirrored'"),
])
def test_component_checks_settings_at_construction(kwargs, message):
  """GenericTrainer refuses wrong settings when the pipeline is built."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from conftest import PENGUIN_MODULE  # pylint: disable=g-import-not-at-top
  with pytest.raises(InvalidArgumentError, match=message):
    GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                   module_file=PENGUIN_MODULE, **kwargs)


def _plan(exec_properties, tf_config=None):
  return plan_lib.from_settings(
      {'module_file': 'unused.py', **exec_properties},
      cluster=(cluster_environment.TFConfig(tf_config) if tf_config else
               None))


def test_num_workers_must_match_the_cluster(monkeypatch):
  """num_workers that disagrees with TF_CONFIG fails before any training."""
  monkeypatch.setenv('TF_CONFIG', _tf_config(_WORKERS, 'worker', 1))
  with pytest.raises(InvalidArgumentError, match=(
      r'The component asks for num_workers=2, but TF_CONFIG describes a '
      r'cluster of 3')):
    _plan({'num_workers': 2}, _tf_config(_WORKERS, 'worker', 1))
  assert _plan({'num_workers': 3}, _tf_config(_WORKERS, 'worker', 1)
               ).role.worker_index == 1
  assert _plan({}, _tf_config(_WORKERS, 'worker', 1)).num_workers == 3


@pytest.mark.parametrize('exec_properties, tf_config, launches, strategy', [
    ({}, None, False, 'default'),
    ({'num_workers': 1}, None, False, 'default'),
    ({'strategy': 'mirrored'}, None, False, 'mirrored'),
    ({'num_workers': 2}, None, True, 'multi_worker_mirrored'),
    ({'num_workers': 3}, _tf_config(_WORKERS, 'worker', 0), False,
     'multi_worker_mirrored'),
    ({}, _tf_config(_WORKERS, 'worker', 0), False, 'multi_worker_mirrored'),
    ({}, _tf_config({'chief': ['c:1']}, 'chief', 0), False, 'default'),
])
def test_who_starts_workers_and_which_strategy(monkeypatch, exec_properties,
                                                tf_config, launches, strategy):
  """Only without TF_CONFIG does the executor start workers itself."""
  if tf_config:
    monkeypatch.setenv('TF_CONFIG', tf_config)
  else:
    monkeypatch.delenv('TF_CONFIG', raising=False)
  plan = _plan(exec_properties, tf_config)
  assert (plan.where == Where.LOCAL_WORKERS) == launches
  assert plan.strategy == strategy


def test_local_workers_tf_config():
  """Local workers form a 'worker' cluster on loopback ports; 0 is chief."""
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  group = cluster_environment.LocalGroup([4001, 4002], '/tmp/group')
  config = json.loads(group.member(1).tf_config)
  assert config == {'cluster': {'worker': ['localhost:4001',
                                           'localhost:4002']},
                    'task': {'type': 'worker', 'index': 1}}
  role = cluster_environment.role_from_tf_config(json.dumps(config))
  assert (role.is_chief, role.worker_index, role.num_workers) == (False, 1, 2)
  assert group.member(1).role() == role
  assert cluster_environment.member_environ(group.member(0))[
      'GENERIC_TRAINER_STOP_FILE'] == '/tmp/group/stop-step'
  ports = local_cluster.free_ports(3)
  assert len(set(ports)) == 3


def test_scratch_outputs_leave_the_real_artifacts_alone(tmp_path):
  """A worker's scratch Model/ModelRun copies point elsewhere, originals kept."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri, model_run.uri = '/real/model', '/real/model_run'
  from generic_trainer.plan.plan import TrainingPlan  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan.request import TrainingRequest  # pylint: disable=g-import-not-at-top
  request = TrainingRequest(
      {}, {'model': [model], 'model_run': [model_run]}, {}, 's', 'e',
      TrainingPlan('module_file', 'unused.py')).with_scratch_outputs(
          str(tmp_path))
  scratch = request.output_dict
  assert scratch['model'][0].uri == str(tmp_path / 'model')
  assert scratch['model_run'][0].uri == str(tmp_path / 'model_run')
  assert request.serving_dir == str(tmp_path / 'model' / 'Format-Serving')
  assert request.eval_dir == str(tmp_path / 'model' / 'Format-TFMA')
  assert (model.uri, model_run.uri) == ('/real/model', '/real/model_run')


def test_fn_args_of_one_process(trainer_io, monkeypatch):
  """Without workers, run_fn gets the default strategy and is the chief."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs import fn_args as fn_args_lib  # pylint: disable=g-import-not-at-top
  monkeypatch.delenv('TF_CONFIG', raising=False)
  io = trainer_io(module_file='unused.py')
  from generic_trainer.plan.plan import TrainingPlan  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan.request import TrainingRequest  # pylint: disable=g-import-not-at-top
  fn_args = fn_args_lib.build_fn_args(TrainingRequest(
      *io, 'serving', 'eval', TrainingPlan('module_file', 'unused.py')))
  assert fn_args.strategy is tf.distribute.get_strategy()
  assert (fn_args.is_chief, fn_args.worker_index, fn_args.num_workers) == (
      True, 0, 1)


_JOBSET = {'JOBSET_NAME': 'penguin-train', 'REPLICATED_JOB_NAME': 'node',
           'JOB_INDEX': '0', 'JOB_COMPLETION_INDEX': '1',
           'GENERIC_TRAINER_NUM_NODES': '3'}


def test_tf_config_from_a_jobset_environment():
  """No TF_CONFIG: the JobSet's names, indexes and host names give it."""
  environment = cluster_environment.detect(_JOBSET)
  assert isinstance(environment, cluster_environment.JobSet)
  assert json.loads(environment.tf_config) == {
      'cluster': {'worker': [f'penguin-train-node-0-{i}.penguin-train:2222'
                             for i in range(3)]},
      'task': {'type': 'worker', 'index': 1}}
  role = environment.role()
  assert _place(role) == (3, 1, False, 'worker', 1)
  assert environment.creates_processes_externally


def test_jobset_subdomain_and_port_when_set():
  """JOBSET_SUBDOMAIN and GENERIC_TRAINER_PORT replace the defaults."""
  tf_config = json.loads(cluster_environment.jobset_tf_config(
      {**_JOBSET, 'JOB_COMPLETION_INDEX': '0', 'JOBSET_SUBDOMAIN': 'train',
       'GENERIC_TRAINER_PORT': '5000'}))
  assert tf_config['cluster']['worker'][0] == 'penguin-train-node-0-0.train:5000'
  assert tf_config['task'] == {'type': 'worker', 'index': 0}


def test_tf_config_set_wins_over_the_jobset_environment():
  """The Training Operator's TF_CONFIG is taken as it is."""
  given = _tf_config(_WORKERS, 'worker', 2)
  environment = cluster_environment.detect({**_JOBSET, 'TF_CONFIG': given})
  assert isinstance(environment, cluster_environment.TFConfig)
  assert not isinstance(environment, cluster_environment.JobSet)
  assert environment.tf_config == given


def test_no_cluster_without_either():
  """Neither TF_CONFIG nor a JobSet: one process."""
  environment = cluster_environment.detect({'HOME': '/root'})
  assert isinstance(environment, cluster_environment.Alone)
  assert environment.role() == ClusterRole()


@pytest.mark.parametrize('environ, message', [
    ({'JOBSET_NAME': 'penguin-train', 'JOB_COMPLETION_INDEX': '0'},
     r'Neither TF_CONFIG nor a complete JobSet environment says where this '
     r'process trains: TF_CONFIG is unset and REPLICATED_JOB_NAME, JOB_INDEX, '
     r'GENERIC_TRAINER_NUM_NODES are missing\..*Received: '
     r"JOBSET_NAME='penguin-train', REPLICATED_JOB_NAME=None"),
    ({**_JOBSET, 'GENERIC_TRAINER_NUM_NODES': 'two'},
     r'The JobSet environment must give whole numbers.*'
     r"GENERIC_TRAINER_NUM_NODES='two'"),
    ({**_JOBSET, 'JOB_COMPLETION_INDEX': '3'},
     r'puts this pod at index 3 of 3 nodes\. Expected 0 <= '
     r'JOB_COMPLETION_INDEX < GENERIC_TRAINER_NUM_NODES'),
])
def test_an_incomplete_jobset_environment_is_refused(environ, message):
  """Part of a JobSet's environment, or a wrong number, says what is missing."""
  with pytest.raises(InvalidArgumentError, match=message):
    cluster_environment.detect(environ)


def test_a_cluster_is_entered_for_the_training_and_left_after(tmp_path,
                                                              monkeypatch):
  """A JobSet's TF_CONFIG and the members' stop file are set in this
  process while a training of the plan runs, and removed after; the chief
  clears what a preempted attempt left in the stop file."""
  monkeypatch.delenv('TF_CONFIG', raising=False)
  monkeypatch.delenv('GENERIC_TRAINER_STOP_FILE', raising=False)
  environment = cluster_environment.detect({**_JOBSET,
                                            'JOB_COMPLETION_INDEX': '0'})
  checkpoint = tmp_path / 'resume'
  checkpoint.mkdir()
  (checkpoint / 'stop-step').write_text('7')
  plan = plan_lib.from_settings({'module_file': 'unused.py'},
                                cluster=environment,
                                checkpoint_dir=str(checkpoint))
  with cluster_environment.entered(plan):
    assert os.environ['TF_CONFIG'] == environment.tf_config
    assert os.environ['GENERIC_TRAINER_STOP_FILE'] == str(
        checkpoint / 'stop-step')
    assert not (checkpoint / 'stop-step').exists()
  assert 'TF_CONFIG' not in os.environ
  assert 'GENERIC_TRAINER_STOP_FILE' not in os.environ


def test_alone_enters_nothing(monkeypatch):
  """A training alone changes no variable of the process."""
  monkeypatch.delenv('TF_CONFIG', raising=False)
  before = dict(os.environ)
  with cluster_environment.entered(plan_lib.from_settings(
      {'module_file': 'unused.py'})):
    assert dict(os.environ) == before


def test_too_many_local_workers_are_refused_before_any_start(monkeypatch):
  """num_workers far above what the machine runs: refused, nothing started."""
  from generic_trainer.system import machine  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  assert local_cluster.capacity(2, 24 << 30) == 4
  assert local_cluster.capacity(16, 4 << 30) == 4
  assert local_cluster.capacity(1, None) == 2
  monkeypatch.setattr(machine, 'cores', lambda: 2)
  monkeypatch.setattr(machine, 'available_memory', lambda: 24 << 30)
  with pytest.raises(InvalidArgumentError, match=(
      r'num_workers=64 would start 64 TensorFlow processes on this machine, '
      r'which can run about 4: 2 core\(s\) and 24.0 GiB of free memory')):
    local_cluster.check_capacity(64)
  local_cluster.check_capacity(4)


def test_executor_refuses_too_many_workers(trainer_io, monkeypatch, tmp_path):
  """The executor checks the machine before it starts a worker."""
  from generic_trainer.system import machine  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import child_process  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(machine, 'cores', lambda: 1)
  monkeypatch.setattr(machine, 'available_memory', lambda: 1 << 30)
  started = []
  monkeypatch.setattr(child_process, 'start',
                      lambda *a, **k: started.append(a))
  io = trainer_io(module_file=os.path.join(TESTDATA, 'records_fn_args.py'),
                  num_workers=2)
  with pytest.raises(InvalidArgumentError, match=r'which can run about 1'):
    GenericExecutor().Do(*io)
  assert not started
