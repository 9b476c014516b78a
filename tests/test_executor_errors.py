"""Run-time mistakes: each ends in one clear error and publishes nothing."""

import json
import os

import pytest

from conftest import TESTDATA
from generic_trainer import errors


def _do(io):
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  GenericExecutor().Do(*io)


def _nothing_published(io):
  model_uri = io[1]['model'][0].uri
  return not os.path.exists(model_uri) or os.listdir(model_uri) == []


def _module(name):
  return os.path.join(TESTDATA, name + '.py')


def test_run_fn_exception_keeps_user_traceback(trainer_io):
  """run_fn's exception is chained and its frames are in the message."""
  io = trainer_io(module_file=_module('raises'))
  with pytest.raises(errors.RunFnError, match=(
      r"raised FileNotFoundError: vocabulary /no/such/vocab.txt is missing"
  )) as info:
    _do(io)
  assert isinstance(info.value.__cause__, FileNotFoundError)
  assert 'in _load_vocabulary' in str(info.value)
  assert _nothing_published(io)


def test_unknown_split_lists_existing_splits(trainer_io):
  """A split the examples lack is named, with the splits that exist."""
  io = trainer_io(module_file=_module('records_fn_args'))
  io[2]['train_args'] = '{"splits": ["training"], "num_steps": 3}'
  with pytest.raises(errors.InputArtifactError, match=(
      r"The examples have no split 'training' \(asked for by train_args\)"
      r".*have the splits \['train', 'eval'\]")):
    _do(io)
  assert _nothing_published(io)


def test_empty_split(trainer_io, tmp_path):
  """A split with no files is reported before training."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  io = trainer_io(module_file=_module('records_fn_args'))
  empty = standard_artifacts.Examples()
  empty.uri = str(tmp_path / 'empty_examples')
  empty.split_names = '["train", "eval"]'
  os.makedirs(tmp_path / 'empty_examples' / 'Split-train')
  os.makedirs(tmp_path / 'empty_examples' / 'Split-eval')
  io[0]['examples'] = [empty]
  with pytest.raises(errors.InputArtifactError, match=(
      r"The 'train' split of the examples is empty: no files in")):
    _do(io)


def test_negative_steps_at_run_time(trainer_io):
  """num_steps < 0 in the execution properties is refused."""
  io = trainer_io(train_steps=-1, module_file=_module('records_fn_args'))
  with pytest.raises(errors.InvalidArgumentError, match=(
      r"'train_args.num_steps' must be positive.*Received: num_steps=-1")):
    _do(io)


def test_custom_config_not_a_dict(trainer_io):
  """A custom_config that is not a dict is refused, naming its type."""
  io = trainer_io(module_file=_module('records_fn_args'),
                  custom_config='[1, 2]')
  with pytest.raises(errors.InvalidArgumentError, match=(
      r"'custom_config' must be a dict. Received: custom_config that is a "
      r'list')):
    _do(io)


def test_malformed_hyperparameters(trainer_io, tmp_path):
  """A hyperparameters file that is not JSON is reported with its path."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  hparams = standard_artifacts.HyperParameters()
  hparams.uri = str(tmp_path / 'hparams')
  os.makedirs(hparams.uri)
  (tmp_path / 'hparams' / 'best.txt').write_text('{not json')
  io = trainer_io(module_file=_module('records_fn_args'))
  io[0]['hyperparameters'] = [hparams]
  with pytest.raises(errors.InputArtifactError, match=(
      r'The hyperparameters file .*best.txt is not valid JSON')):
    _do(io)


def test_empty_hyperparameters_artifact(trainer_io, tmp_path):
  """An empty hyperparameters artifact is reported, not a bare IOError."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  hparams = standard_artifacts.HyperParameters()
  hparams.uri = str(tmp_path / 'hparams')
  os.makedirs(hparams.uri)
  io = trainer_io(module_file=_module('records_fn_args'))
  io[0]['hyperparameters'] = [hparams]
  with pytest.raises(errors.InputArtifactError, match=(
      r'must hold exactly one JSON file')):
    _do(io)


def test_bad_keras_version_property(trainer_io):
  """An unknown keras_version in the execution properties is refused."""
  io = trainer_io(module_file=_module('records_fn_args'), keras_version='2')
  with pytest.raises(errors.InvalidArgumentError, match=(
      r"'keras_version' must be one of")):
    _do(io)


def test_bad_max_restarts_property(trainer_io):
  """A max_restarts that is not a non-negative int is refused at run time,
  before any worker starts."""
  io = trainer_io(module_file=_module('records_fn_args'), num_workers=2,
                  max_restarts='3')
  with pytest.raises(errors.InvalidArgumentError, match=(
      r"^'max_restarts' must be a non-negative int: .* Received: "
      r"max_restarts='3'\. Set 0 or more, or leave it unset\.$")):
    _do(io)


@pytest.mark.slow
def test_tf_keras_module_runs_in_child_when_process_has_keras3(trainer_io):
  """With tf.keras already Keras 3 here, keras_version='tf_keras' uses a child."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import keras_env  # pylint: disable=g-import-not-at-top
  if keras_env.resolved_tf_keras() is None:
    keras_env.claim_tf_keras('keras3')
  if keras_env.resolved_tf_keras() != 'keras3':
    pytest.skip('tf.keras already means tf_keras in this test process')
  assert tf.keras.layers.Dense.__module__.startswith('keras.')
  io = trainer_io(module_file=_module('tf_keras_save'),
                  keras_version='tf_keras')
  _do(io)
  assert os.path.exists(os.path.join(io[1]['model'][0].uri, 'Format-Serving',
                                     'saved_model.pb'))
  with open(os.path.join(io[1]['model_run'][0].uri, 'keras.json')) as f:
    ran = json.load(f)
  assert ran['pid'] != os.getpid()
  assert ran['keras'].startswith('tf_keras.')


@pytest.mark.slow
def test_child_process_error_keeps_class_and_message(trainer_io):
  """An error in the child comes back as the same class and message."""
  io = trainer_io(module_file=_module('raises'), keras_version='tf_keras')
  with pytest.raises(errors.RunFnError, match=(
      r'vocabulary /no/such/vocab.txt is missing[\s\S]*raised in the tf_keras '
      r'training process')):
    _do(io)
  assert _nothing_published(io)


@pytest.mark.slow
def test_tf_keras_module_fails_clearly_under_keras3(trainer_io):
  """The same module under Keras 3 fails as a RunFnError naming the cause."""
  io = trainer_io(module_file=_module('tf_keras_save'), keras_version='keras3')
  with pytest.raises(errors.RunFnError, match=r'save_format'):
    _do(io)
  assert _nothing_published(io)


def test_corrupt_tfrecord_is_reported_before_training(trainer_io, tmp_path):
  """A corrupt examples file is named, before any training."""
  import shutil  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  io = trainer_io(module_file=_module('records_fn_args'))
  good = io[0]['examples'][0]
  corrupt = standard_artifacts.Examples()
  corrupt.uri = str(tmp_path / 'corrupt_examples')
  corrupt.split_names = good.split_names
  shutil.copytree(good.uri, corrupt.uri)
  (tmp_path / 'corrupt_examples' / 'Split-eval' / 'data.gz').write_bytes(
      b'\x1f\x8b not really gzip')
  io[0]['examples'] = [corrupt]
  with pytest.raises(errors.InputArtifactError, match=(
      r"The 'eval' split file .*data.gz is not a readable gzip TFRecord "
      r'file: .*corrupt or truncated')):
    _do(io)
  assert not os.path.exists(os.path.join(io[1]['model_run'][0].uri,
                                         'fn_args.json'))


def test_empty_base_model(trainer_io, tmp_path):
  """A base_model artifact without a SavedModel is refused, naming the path."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  base = standard_artifacts.Model()
  base.uri = str(tmp_path / 'base_model')
  os.makedirs(base.uri)
  io = trainer_io(module_file=_module('records_fn_args'))
  io[0]['base_model'] = [base]
  with pytest.raises(errors.InputArtifactError, match=(
      r'The base_model artifact .* holds no SavedModel: .*Format-Serving/'
      r'saved_model.pb does not exist')):
    _do(io)


def test_train_spec_without_schema(trainer_io):
  """A TrainSpec with neither schema nor transform_graph says what to add."""
  io = trainer_io(module_file=os.path.join(
      os.path.dirname(TESTDATA), '..', 'module_files', 'penguin_spec.py'))
  del io[0]['schema']
  with pytest.raises(errors.SpecError, match=(
      r'A TrainSpec needs to know the features: connect a `schema` input')):
    _do(io)
  assert _nothing_published(io)


def test_malformed_training_record_publishes_nothing(trainer_io, tmp_path):
  """A run_fn's train_result.json that is not a record fails before publishing."""
  module = tmp_path / 'bad_record.py'
  module.write_text(
      'import os\n'
      f'exec(open({_module("records_fn_args")!r}).read())\n'
      '_run = run_fn\n'
      'def run_fn(fn_args):\n'
      '  _run(fn_args)\n'
      "  with open(os.path.join(fn_args.model_run_dir, 'train_result.json'),"
      " 'w') as f:\n"
      "    f.write('{\"train\": {\"loss\": \"low\"}}')\n")
  io = trainer_io(module_file=str(module))
  with pytest.raises(errors.InputArtifactError, match=(
      r'train_result.json is not a training record: .*Expected a JSON object')):
    _do(io)
  assert _nothing_published(io)
