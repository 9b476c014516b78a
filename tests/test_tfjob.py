"""TFJob manifests for the Kubeflow Training Operator: shape, schema, errors."""

import pytest

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import tfjob

_COMMAND = list(tfjob.KFP_ENTRYPOINT)
_ARGS = ['--executor_class_path', 'generic_trainer.component.executor.GenericExecutor',
         '--json_serialized_invocation_args', '{"inputs": {}}']


def _container():
  return {'name': 'tensorflow', 'image': 'example.com/trainer:1',
          'command': _COMMAND, 'args': _ARGS}


def test_three_workers_are_a_chief_and_two_workers():
  """num_workers=3 renders one Chief and two Workers running the entrypoint."""
  manifest = tfjob.render('penguin-train', 'example.com/trainer:1', _COMMAND,
                          _ARGS, num_workers=3, namespace='kubeflow',
                          active_deadline_seconds=3600)
  replica = {'replicas': 1, 'restartPolicy': 'Never',
             'template': {'spec': {'containers': [_container()],
                                   'terminationGracePeriodSeconds': 60}}}
  assert manifest == {
      'apiVersion': 'kubeflow.org/v1',
      'kind': 'TFJob',
      'metadata': {'name': 'penguin-train', 'namespace': 'kubeflow'},
      'spec': {
          'runPolicy': {'activeDeadlineSeconds': 3600, 'backoffLimit': 0,
                        'cleanPodPolicy': 'Running'},
          'tfReplicaSpecs': {'Chief': replica,
                             'Worker': {**replica, 'replicas': 2}},
      },
  }


def test_pods_get_a_grace_period_for_the_preemption_checkpoint():
  """Every pod has terminationGracePeriodSeconds, 60 s unless given."""
  for given, expected in ((None, 60), (120, 120)):
    extra = {} if given is None else {'termination_grace_period_s': given}
    manifest = tfjob.render('penguin-train', 'example.com/trainer:1',
                            _COMMAND, _ARGS, num_workers=2, **extra)
    for replica in manifest['spec']['tfReplicaSpecs'].values():
      assert replica['template']['spec'][
          'terminationGracePeriodSeconds'] == expected


def test_one_worker_is_a_chief_alone():
  """num_workers=1 renders only the Chief."""
  manifest = tfjob.render('penguin-train', 'example.com/trainer:1', _COMMAND,
                          _ARGS, num_workers=1)
  assert list(manifest['spec']['tfReplicaSpecs']) == ['Chief']
  assert 'namespace' not in manifest['metadata']


def test_env_resources_and_service_account_reach_every_replica():
  """Extra pod settings are in the Chief's and the Workers' pods."""
  manifest = tfjob.render(
      'penguin-train', 'example.com/trainer:1', _COMMAND, _ARGS, 2,
      env={'GOOGLE_CLOUD_PROJECT': 'p'},
      resources={'limits': {'cpu': '2', 'memory': '4Gi'}},
      service_account='trainer')
  for replica in manifest['spec']['tfReplicaSpecs'].values():
    pod = replica['template']['spec']
    assert pod['serviceAccountName'] == 'trainer'
    assert pod['containers'][0]['env'] == [
        {'name': 'GOOGLE_CLOUD_PROJECT', 'value': 'p'}]
    assert pod['containers'][0]['resources'] == {
        'limits': {'cpu': '2', 'memory': '4Gi'}}


def test_the_sdk_builds_the_same_manifest():
  """With the operator's SDK installed, its models give the same manifest."""
  pytest.importorskip('kubeflow.training')
  plain = {'apiVersion': 'kubeflow.org/v1', 'kind': 'TFJob',
           'metadata': {'name': 'a'},
           'spec': {'runPolicy': {'backoffLimit': 0,
                                  'cleanPodPolicy': 'Running'},
                    'tfReplicaSpecs': {'Chief': {
                        'replicas': 1, 'restartPolicy': 'Never',
                        'template': {'spec': {'containers': [
                            _container()]}}}}}}
  assert tfjob._through_sdk(plain) == plain  # pylint: disable=protected-access


@pytest.mark.parametrize('kwargs, message', [
    ({'name': 'Penguin_Train'},
     r"at metadata/name: 'Penguin_Train' does not match"),
    ({'num_workers': 0}, r"'num_workers' must be a positive int.*"
     r'Received: num_workers=0'),
    ({'restart_policy': 'Sometimes'}, r"'restart_policy' must be one of "
     r"\('Never', 'OnFailure', 'ExitCode', 'Always'\)"),
    ({'image': ''}, r'at spec/tfReplicaSpecs/Chief/template/spec/containers/0/'
     r"image: '' should be non-empty"),
])
def test_render_errors(kwargs, message):
  """A wrong argument is named, with the schema path when the schema fails."""
  arguments = {'name': 'penguin-train', 'image': 'example.com/trainer:1',
               'command': _COMMAND, 'args': _ARGS, 'num_workers': 2}
  arguments.update(kwargs)
  with pytest.raises(InvalidArgumentError, match=message):
    tfjob.render(**arguments)


@pytest.mark.parametrize('replica_specs, message', [
    ({'Chief': {'replicas': 2, 'template': {'spec': {'containers': [
        _container()]}}}}, r'2 is greater than the maximum of 1'),
    ({'Launcher': {'template': {'spec': {'containers': [_container()]}}}},
     r"'Launcher' is not one of \['Chief', 'Master', 'Worker', 'PS', "
     r"'Evaluator'\]"),
    ({'Worker': {'template': {'spec': {'containers': [
        {**_container(), 'name': 'trainer'}]}}}},
     r'does not contain items matching'),
])
def test_schema_rejects_what_the_operator_rejects(replica_specs, message):
  """Replica counts, types and the 'tensorflow' container are checked."""
  manifest = {'apiVersion': 'kubeflow.org/v1', 'kind': 'TFJob',
              'metadata': {'name': 'a'},
              'spec': {'tfReplicaSpecs': replica_specs}}
  with pytest.raises(InvalidArgumentError, match=message):
    tfjob.validate(manifest)


def test_component_renders_its_tfjob():
  """GenericTrainer(num_workers=2).to_tfjob gives a Chief and one Worker."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from conftest import PENGUIN_MODULE  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                           module_file=PENGUIN_MODULE, num_workers=2)
  manifest = trainer.to_tfjob('penguin-train', 'example.com/trainer:1',
                              {'inputs': {}, 'outputs': {}})
  specs = manifest['spec']['tfReplicaSpecs']
  assert (specs['Chief']['replicas'], specs['Worker']['replicas']) == (1, 1)
  container = specs['Worker']['template']['spec']['containers'][0]
  assert container['command'] == _COMMAND
  assert container['args'][:2] == _ARGS[:2]
  # max_restarts unset: 2 restarts of both replicas, from the checkpoint.
  assert [r['restartPolicy'] for r in specs.values()] == ['OnFailure'] * 2
  assert manifest['spec']['runPolicy']['backoffLimit'] == 4


def test_component_without_restarts_renders_a_job_that_fails_fast():
  """max_restarts=0: a failed pod fails the job, as before restarts."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from conftest import PENGUIN_MODULE  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                           module_file=PENGUIN_MODULE, num_workers=2,
                           max_restarts=0)
  manifest = trainer.to_tfjob('penguin-train', 'example.com/trainer:1',
                              {'inputs': {}, 'outputs': {}})
  specs = manifest['spec']['tfReplicaSpecs']
  assert [r['restartPolicy'] for r in specs.values()] == ['Never'] * 2
  assert manifest['spec']['runPolicy']['backoffLimit'] == 0


@pytest.mark.parametrize('max_restarts, replicas, expected', [
    (None, 3, {'restart_policy': 'OnFailure', 'backoff_limit': 6}),
    (1, 2, {'restart_policy': 'OnFailure', 'backoff_limit': 2}),
    (0, 3, {'restart_policy': 'Never', 'backoff_limit': 0}),
])
def test_restart_settings_follow_max_restarts(max_restarts, replicas,
                                              expected):
  """Failed pods restart (and resume) max_restarts times per replica."""
  assert tfjob.restart_settings(max_restarts, replicas) == expected
