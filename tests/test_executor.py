"""GenericExecutor on real artifacts: loading modes, FnArgs, export checks."""

import json
import os

import pytest

from conftest import PENGUIN_MODULE, TESTDATA
from generic_trainer import errors


def _do(io):
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  GenericExecutor().Do(*io)


def _published(io) -> bool:
  model_uri = io[1]['model'][0].uri
  return os.path.exists(os.path.join(model_uri, 'Format-Serving'))


def _module(name):
  return os.path.join(TESTDATA, name + '.py')


def _check_predicts(serving_dir, examples_uri):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      os.path.join(examples_uri, 'Split-eval', 'data.gz'), 'GZIP').take(5)]
  outputs = tf.saved_model.load(serving_dir).signatures['serving_default'](
      tf.constant(records))
  (probabilities,) = outputs.values()
  assert probabilities.shape == (5, 3)
  assert bool(tf.reduce_all(tf.math.is_finite(probabilities)))


def test_module_file_trains_validates_and_publishes(trainer_io):
  """The penguin module file trains, and its export lands in Format-Serving."""
  io = trainer_io(module_file=PENGUIN_MODULE)
  _do(io)
  model_uri = io[1]['model'][0].uri
  assert sorted(os.listdir(model_uri)) == ['Format-Serving']
  _check_predicts(os.path.join(model_uri, 'Format-Serving'),
                  io[0]['examples'][0].uri)


def test_module_path_loads_importable_module(trainer_io, monkeypatch):
  """module_path names an importable module whose run_fn is used."""
  monkeypatch.syspath_prepend(TESTDATA)
  io = trainer_io(module_path='raw_feature_signature')
  _do(io)
  assert _published(io)


def test_run_fn_dotted_path(trainer_io, monkeypatch):
  """run_fn='module.function' loads that function."""
  monkeypatch.syspath_prepend(TESTDATA)
  io = trainer_io(run_fn='records_fn_args.run_fn')
  _do(io)
  assert _published(io)


def test_fn_args_has_every_tfx_field(trainer_io, penguin_artifacts):
  """FnArgs is TFX's FnArgs with every field filled as TFX fills it."""
  io = trainer_io(train_steps=7, eval_steps=2, module_file=_module(
      'records_fn_args'), custom_config='{"lr": 0.1}')
  _do(io)
  with open(os.path.join(io[1]['model_run'][0].uri, 'fn_args.json')) as f:
    got = json.load(f)
  examples, schema = penguin_artifacts
  assert got['fn_args_class'] == 'tfx.components.trainer.fn_args_utils'
  assert got['train_files'] == [os.path.join(examples.uri, 'Split-train', '*')]
  assert got['eval_files'] == [os.path.join(examples.uri, 'Split-eval', '*')]
  assert (got['train_steps'], got['eval_steps']) == (7, 2)
  assert got['schema_path'] == got['schema_file'] == os.path.join(
      schema.uri, 'schema.pbtxt')
  assert got['transform_graph_path'] is None
  assert got['serving_model_dir'].endswith('.staging/Format-Serving')
  assert got['eval_model_dir'].endswith('.staging/Format-TFMA')
  assert got['model_run_dir'] == io[1]['model_run'][0].uri
  assert got['custom_config'] == {'lr': 0.1}
  assert got['has_data_accessor']
  assert got['num_examples'] is None


def test_statistics_fill_num_examples(trainer_io, tmp_path):
  """An ExampleStatistics input fills fn_args.num_examples per split."""
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  stats = standard_artifacts.ExampleStatistics()
  stats.uri = str(tmp_path / 'stats')
  stats.split_names = '["train", "eval"]'
  for split, count in (('train', 228), ('eval', 114)):
    os.makedirs(tmp_path / 'stats' / f'Split-{split}')
    proto = statistics_pb2.DatasetFeatureStatisticsList()
    proto.datasets.add(num_examples=count)
    (tmp_path / 'stats' / f'Split-{split}' / 'FeatureStats.pb').write_bytes(
        proto.SerializeToString())
  io = trainer_io(module_file=_module('records_fn_args'))
  io[0]['statistics'] = [stats]
  _do(io)
  with open(os.path.join(io[1]['model_run'][0].uri, 'fn_args.json')) as f:
    assert json.load(f)['num_examples'] == {'train': 228, 'eval': 114}


def test_hyperparameters_input_reaches_run_fn(trainer_io, tmp_path):
  """The HyperParameters artifact's JSON becomes fn_args.hyperparameters."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  hparams = standard_artifacts.HyperParameters()
  hparams.uri = str(tmp_path / 'hparams')
  os.makedirs(hparams.uri)
  (tmp_path / 'hparams' / 'best_hyperparameters.txt').write_text(
      '{"values": {"units": 8}}')
  io = trainer_io(module_file=_module('records_fn_args'))
  io[0]['hyperparameters'] = [hparams]
  _do(io)
  with open(os.path.join(io[1]['model_run'][0].uri, 'fn_args.json')) as f:
    assert json.load(f)['hyperparameters'] == {'values': {'units': 8}}


# Each bad export: a specific error, and nothing published.
@pytest.mark.parametrize('module, message', [
    ('exports_nothing', r'run_fn exported nothing: '
     r'fn_args.serving_model_dir \(.*\) does not exist'),
    ('exports_keras_file', r"found the Keras file\(s\) \['model.keras'\]. "
     'A Keras file is not a SavedModel'),
    ('corrupt_saved_model', 'has saved_model.pb but does not load'),
    ('no_serving_signature', r"has no 'serving_default' signature.*"
     r'Its signatures: none'),
    ('nan_prediction', r"returned non-finite values \(NaN or Inf\) in output "
     "'outputs'"),
    ('prediction_fails', "The 'serving_default' signature of .* failed on 4 "
     'eval examples'),
])
def test_bad_export_is_rejected_and_not_published(trainer_io, module,
                                                  message):
  """A bad export fails with a specific message and publishes nothing."""
  io = trainer_io(module_file=_module(module))
  with pytest.raises(errors.ExportValidationError, match=message) as info:
    _do(io)
  assert 'Nothing was published' in str(info.value)
  assert not _published(io)
  assert not os.path.exists(os.path.join(io[1]['model'][0].uri, '.staging'))


def test_rejected_export_is_kept_in_stateful_working_dir(trainer_io, tmp_path):
  """A rejected export goes to the node's stateful working dir, which TFX
  keeps after a failure (it deletes the output artifact folders)."""
  from tfx.dsl.components.base.base_executor import BaseExecutor  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  io = trainer_io(module_file=_module('nan_prediction'))
  context = BaseExecutor.Context(stateful_working_dir=str(tmp_path / 'swd'))
  with pytest.raises(errors.ExportValidationError, match=(
      r'the rejected export is kept in .*swd/rejected_export')):
    GenericExecutor(context).Do(*io)
  assert os.path.exists(tmp_path / 'swd' / 'rejected_export' /
                        'Format-Serving' / 'saved_model.pb')
  assert not _published(io)


def test_raw_feature_signature_is_fed_from_the_data(trainer_io):
  """A Keras 3 `model.export` signature (raw feature inputs) validates."""
  io = trainer_io(module_file=_module('raw_feature_signature'))
  _do(io)
  assert _published(io)


def test_leftovers_of_a_killed_attempt_are_cleared(trainer_io):
  """A stale staging dir from a killed attempt does not leak into the model."""
  io = trainer_io(module_file=_module('records_fn_args'))
  stale = os.path.join(io[1]['model'][0].uri, '.staging', 'Format-Serving')
  os.makedirs(stale)
  open(os.path.join(stale, 'stale.txt'), 'w').close()
  _do(io)
  serving = os.path.join(io[1]['model'][0].uri, 'Format-Serving')
  assert 'stale.txt' not in os.listdir(serving)
  assert 'saved_model.pb' in os.listdir(serving)


def _in_a_pipeline(swd):
  """GenericExecutor as TFX's launcher makes it: with a Context whose
  stateful working dir is `swd`."""
  from tfx.dsl.components.base.base_executor import BaseExecutor  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  return GenericExecutor(BaseExecutor.Context(stateful_working_dir=str(swd)))


def test_in_a_pipeline_a_failure_logs_its_reason_first_and_files_its_traceback(
    trainer_io, tmp_path, caplog):
  """Under an orchestrator, a failed Do logs our reason at ERROR, writes the
  whole traceback to traceback.txt in the stateful working dir and raises
  the same kind of error, short: its reason and that path, no chain."""
  io = trainer_io(module_file=_module('raises'))
  with pytest.raises(errors.RunFnError, match=(
      r"raised FileNotFoundError: vocabulary /no/such/vocab.txt is missing.*"
      r"Nothing was published.\nIts traceback \(the user's code's frames, "
      r"then the whole chain\) is in .*swd/traceback.txt$")) as info:
    _in_a_pipeline(tmp_path / 'swd').Do(*io)
  assert info.value.__cause__ is None and info.value.__suppress_context__
  assert isinstance(info.value.__context__, errors.RunFnError)
  assert 'Its traceback:\n' not in str(info.value)
  first = [r for r in caplog.records if r.levelname == 'ERROR'][0]
  assert first.getMessage().startswith(
      'GenericTrainer failed: RunFnError: run_fn (')
  kept = (tmp_path / 'swd' / 'traceback.txt').read_text()
  assert 'in _load_vocabulary' in kept
  assert 'The above exception was the direct cause' in kept
  assert not _published(io)


def test_in_a_pipeline_a_success_logs_what_was_validated(trainer_io, tmp_path,
                                                         caplog):
  """A published export logs one progress line: the checks it passed and
  where it was published."""
  from generic_trainer.system import progress  # pylint: disable=g-import-not-at-top
  io = trainer_io(module_file=_module('records_fn_args'))
  with caplog.at_level('INFO', logger=progress.LOGGER):
    _in_a_pipeline(tmp_path / 'swd').Do(*io)
  lines = [r.getMessage() for r in caplog.records
           if r.name == progress.LOGGER and 'validated' in r.getMessage()]
  assert len(lines) == 1, lines
  assert lines[0].startswith('GenericTrainer: export validated: loads, has '
                             'serving_default, predicts finite values')
  assert lines[0].endswith(f"; published to {io[1]['model'][0].uri}/"
                           'Format-Serving')
  assert not (tmp_path / 'swd' / 'traceback.txt').exists()
