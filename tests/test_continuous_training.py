"""Continuous training: several Examples artifacts (spans), warm start from
the base model, and the publication gate that protects serving clients."""

import csv
import json
import os
import textwrap

import pytest

from conftest import REPO, TESTDATA, _write_split

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _tfx_testdata():
  import tfx  # pylint: disable=g-import-not-at-top
  return os.path.join(os.path.dirname(tfx.__file__), 'components', 'testdata')


@pytest.fixture(scope='module')
def spans(tmp_path_factory, penguin_artifacts):
  """Two Examples artifacts (spans 1 and 2) of disjoint penguin rows, with
  their row counts per split, and ExampleStatistics artifacts for each."""
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp('spans')
  with open(write_penguin_csv(str(root / 'csv'))) as f:
    rows = list(csv.DictReader(f))
  parts = {1: rows[:150], 2: rows[150:]}
  examples, statistics, counts = [], [], {}
  for span, part in parts.items():
    artifact = standard_artifacts.Examples()
    artifact.uri = str(root / f'span-{span}')
    artifact.split_names = '["train", "eval"]'
    artifact.span, artifact.version = span, 0
    split_rows = {'train': part[0::3] + part[1::3], 'eval': part[2::3]}
    stats = standard_artifacts.ExampleStatistics()
    stats.uri = str(root / f'stats-{span}')
    stats.split_names = '["train", "eval"]'
    stats.span = span
    for split, chunk in split_rows.items():
      _write_split(chunk, os.path.join(artifact.uri, f'Split-{split}',
                                       'data.gz'))
      os.makedirs(os.path.join(stats.uri, f'Split-{split}'))
      proto = statistics_pb2.DatasetFeatureStatisticsList()
      proto.datasets.add(num_examples=len(chunk))
      with open(os.path.join(stats.uri, f'Split-{split}', 'FeatureStats.pb'),
                'wb') as f:
        f.write(proto.SerializeToString())
      counts[(span, split)] = len(chunk)
    examples.append(artifact)
    statistics.append(stats)
  return examples, statistics, counts


def _rows(io):
  with open(os.path.join(io[1]['model_run'][0].uri, 'rows.json')) as f:
    return json.load(f)


def test_several_examples_artifacts_train_on_their_union(trainer_io, spans):
  """Two spans in `examples`: run_fn reads every row of both, and
  num_examples sums their statistics, matched by span."""
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples, statistics, counts = spans
  io = trainer_io(module_file=os.path.join(TESTDATA, 'counts_rows.py'))
  io[0]['examples'] = examples
  io[0]['statistics'] = list(reversed(statistics))
  GenericExecutor().Do(*io)
  recorded = _rows(io)
  assert recorded['rows'] == counts[(1, 'train')] + counts[(2, 'train')]
  assert len(recorded['train_files']) == 2
  assert recorded['num_examples'] == {
      split: counts[(1, split)] + counts[(2, split)]
      for split in ('train', 'eval')}


def test_statistics_that_do_not_match_every_span_give_no_count(trainer_io,
                                                                spans):
  """Statistics of span 1 only: num_examples is None, not a wrong count."""
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples, statistics, _ = spans
  io = trainer_io(module_file=os.path.join(TESTDATA, 'counts_rows.py'))
  io[0]['examples'] = examples
  io[0]['statistics'] = statistics[:1]
  GenericExecutor().Do(*io)
  assert _rows(io)['num_examples'] is None


def test_each_examples_artifact_is_checked_and_named(trainer_io, spans,
                                                     tmp_path):
  """A split missing from the second span: the message names that artifact
  by URI, span and version."""
  import shutil  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples, _, _ = spans
  broken = standard_artifacts.Examples()
  broken.uri = str(tmp_path / 'span-3')
  broken.split_names = '["train"]'
  broken.span, broken.version = 3, 1
  shutil.copytree(os.path.join(examples[0].uri, 'Split-train'),
                  os.path.join(broken.uri, 'Split-train'))
  io = trainer_io(module_file=os.path.join(TESTDATA, 'counts_rows.py'))
  io[0]['examples'] = [examples[0], broken]
  with pytest.raises(InputArtifactError, match=(
      r"The examples have no split 'eval' \(asked for by eval_args by "
      r'default\). The examples \(Examples artifact .*span-3, span 3, '
      r"version 1\) have the splits \['train'\]")):
    GenericExecutor().Do(*io)


# Warm start.


@pytest.fixture(scope='module')
def base_model(tmp_path_factory, penguin_csvs):
  """The SavedModel of a penguin spec trained for 40 steps (a 'yesterday')."""
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  est = Estimator(PenguinSpec, str(tmp_path_factory.mktemp('base')))
  est.train(penguin_csvs[0], eval_data=penguin_csvs[1], steps=40)
  return est.export()


def _one_epoch(tmp_path, csvs, spec, base=None):
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  est = Estimator(spec, str(tmp_path), base_model=base)
  return est.train(csvs[0], eval_data=csvs[1], steps=4)


def test_warm_start_starts_at_a_lower_loss(tmp_path, penguin_csvs,
                                           base_model):
  """The first epoch from the base ends far below a cold start's, and the
  record says which layers were loaded."""
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top

  class OneEpoch(PenguinSpec):
    epochs = 1

  cold = _one_epoch(tmp_path / 'cold', penguin_csvs, OneEpoch)
  warm = _one_epoch(tmp_path / 'warm', penguin_csvs, OneEpoch, base_model)
  print(f"first-epoch loss: cold {cold['train']['loss']:.3f}, warm "
        f"{warm['train']['loss']:.3f}")
  assert warm['train']['loss'] < 0.7 * cold['train']['loss']
  assert len(warm['warm_start']['loaded']) == 4
  assert warm['warm_start']['not_loaded'] == {}
  assert 'warm_start' not in cold


def test_warm_start_loads_the_layers_that_match(tmp_path, penguin_csvs,
                                                base_model):
  """A wider hidden layer: the layers that match load, the others are
  reported with their shapes; 'strict' refuses, naming them."""
  import keras  # pylint: disable=g-import-not-at-top
  from generic_trainer import SpecError  # pylint: disable=g-import-not-at-top
  from spec_fixtures import FEATURES, PenguinSpec  # pylint: disable=g-import-not-at-top

  class Wider(PenguinSpec):
    epochs = 1

    def build_model(self):
      inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURES}
      x = keras.layers.Concatenate()([inputs[k] for k in FEATURES])
      x = keras.layers.BatchNormalization(momentum=0.9)(x)
      x = keras.layers.Dense(8, activation='relu')(x)
      x = keras.layers.Dense(16, activation='relu')(x)
      return keras.Model(inputs, keras.layers.Dense(3,
                                                    activation='softmax')(x))

  report = _one_epoch(tmp_path / 'default', penguin_csvs, Wider,
                      base_model)['warm_start']
  assert len(report['loaded']) == 2 and len(report['not_loaded']) == 2
  assert all('(8, 16) vs base (8, 8)' in why or '(16, 3) vs base (8, 3)' in
             why for why in report['not_loaded'].values())

  class Strict(Wider):
    warm_start = 'strict'

  with pytest.raises(SpecError, match=(
      r"Warm start \(warm_start = 'strict'\): 2 layer\(s\) of the model do "
      r'not match the base model .*: dense_\d+ \(dense_\d+/kernel \(8, 16\) '
      r'vs base \(8, 8\); dense_\d+/bias \(16,\) vs base \(8,\)\)')):
    _one_epoch(tmp_path / 'strict', penguin_csvs, Strict, base_model)


def test_warm_start_off_and_the_specs_own(tmp_path, penguin_csvs, base_model):
  """warm_start = False trains from scratch; a warm_start method runs
  instead of ours."""
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  calls = []

  class Off(PenguinSpec):
    epochs = 1
    warm_start = False

  class Own(PenguinSpec):
    epochs = 1

    def warm_start(self, model, base_model_dir):
      calls.append(base_model_dir)

  assert 'warm_start' not in _one_epoch(tmp_path / 'off', penguin_csvs, Off,
                                        base_model)
  assert 'warm_start' not in _one_epoch(tmp_path / 'own', penguin_csvs, Own,
                                        base_model)
  assert calls == [base_model]


@pytest.mark.parametrize('base, error, message', [
    ('estimator', 'SpecError',
     r'Warm start: no layer of the model is in the base model .*chicago-taxi'
     r'.*\. Its weights: .*It may come from another framework or another '
     r'model\.'),
    ('no_weights', 'InputArtifactError',
     r'The base model .* holds no weights to warm-start from'),
    ('strict_mode', 'SpecError',
     r"TrainSpec.warm_start must be True .* Received: warm_start='exact'"),
])
def test_warm_start_mistakes(tmp_path, penguin_csvs, base, error, message):
  """A base from another framework (an Estimator export), a base without
  weights, an unknown mode: each its own error."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import generic_trainer  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  spec = type('Spec', (PenguinSpec,), {'epochs': 1})
  if base == 'estimator':
    path = os.path.join(_tfx_testdata(), 'trainer', 'previous',
                        'Format-Serving', 'export', 'chicago-taxi',
                        '1646034756')
  else:
    path = str(tmp_path / 'constant')
    module = tf.Module()
    module.f = tf.function(lambda x: {'outputs': x * 2.0},
                           input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, path)
    if base == 'strict_mode':
      spec.warm_start = 'exact'
  with pytest.raises(getattr(generic_trainer, error), match=message):
    _one_epoch(tmp_path / 'run', penguin_csvs, spec, path)


# The publication gate.
def _signature_model(path, inputs):
  """A SavedModel whose serving_default takes float inputs `inputs`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  module = tf.Module()
  specs = {name: tf.TensorSpec(shape, tf.float32, name)
           for name, shape in inputs.items()}

  @tf.function(input_signature=[specs])
  def serve(features):
    return {'outputs': tf.add_n([tf.reduce_sum(v) for v in
                                 features.values()])[None]}

  tf.saved_model.save(module, path, signatures={
      'serving_default': serve.get_concrete_function()})
  return path


def test_gate_lists_each_change(tmp_path):
  """Removed, added and reshaped inputs are listed, old vs new; a wider
  shape (None for 4) and a new signature are not changes."""
  from generic_trainer.export_checks import signature_gate  # pylint: disable=g-import-not-at-top
  old = _signature_model(str(tmp_path / 'old'), {'a': [None, 1], 'b': [None],
                                                  'c': [None, 4]})
  new = _signature_model(str(tmp_path / 'new'), {'a': [None, 2],
                                                  'd': [None],
                                                  'c': [None, None]})
  assert signature_gate.changes(old, new) == [
      "signature 'serving_default': input 'a' shape [None, 1] -> [None, 2]",
      "signature 'serving_default': input 'b' removed (was float32[None]; "
      "the new inputs are ['a', 'c', 'd'])",
      "signature 'serving_default': input 'd' added (float32[None]; clients "
      'of the old model do not send it)']
  assert signature_gate.changes(old, old) == []


@pytest.fixture
def published_spec_model(tmp_path, penguin_csvs):
  """An output folder of the command holding a penguin spec model."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'yesterday'
  assert cli.main(['--module-file', SPEC_MODULE, '--train-data',
                   penguin_csvs[0], '--output-dir', str(out), '--steps',
                   '20']) == 0
  return out / 'model'


def _drops_a_feature(tmp_path):
  path = tmp_path / 'three_features.py'
  path.write_text(textwrap.dedent('''
      import keras
      from spec_fixtures import FEATURES, PenguinSpec

      KEPT = FEATURES[:3]

      class ThreeFeatures(PenguinSpec):
        feature_keys = KEPT

        def build_model(self):
          inputs = {k: keras.Input(shape=(1,), name=k) for k in KEPT}
          x = keras.layers.Concatenate()([inputs[k] for k in KEPT])
          x = keras.layers.Dense(8, activation='relu')(x)
          return keras.Model(inputs, keras.layers.Dense(
              3, activation='softmax')(x))
      '''))
  return str(path)


def test_gate_refuses_a_model_that_drops_an_input_through_the_command(
    tmp_path, penguin_csvs, published_spec_model, capsys):
  """--base-model: a spec that no longer reads body_mass_g changes
  serving_raw's inputs; refused, nothing published; with
  --allow-signature-change it is published."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  argv = ['--module-file', _drops_a_feature(tmp_path), '--train-data',
          penguin_csvs[0], '--output-dir', str(tmp_path / 'today'),
          '--steps', '4', '--base-model', str(published_spec_model)]
  assert cli.main(argv) == 1
  err = capsys.readouterr().err
  assert ('generic-trainer: SignatureChangeError: The new model would break '
          f'the clients of the base model {published_spec_model}: 1 '
          'change(s) to the signatures it serves:\n'
          "  - signature 'serving_raw': input 'body_mass_g' removed (was "
          "int64[None, 1]; the new inputs are ['bill_depth_mm', "
          "'bill_length_mm', 'flipper_length_mm'])\n") in err
  assert 'Nothing was published' in err
  assert not (tmp_path / 'today' / 'model').exists()
  assert cli.main(argv + ['--allow-signature-change']) == 0
  assert (tmp_path / 'today' / 'model' / 'saved_model.pb').is_file()


def test_gate_in_the_component(trainer_io, published_spec_model, tmp_path):
  """Through GenericExecutor: the base_model artifact's signatures must be
  kept; allow_signature_change publishes anyway."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import SignatureChangeError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  base = standard_artifacts.Model()
  base.uri = str(tmp_path / 'base')
  os.makedirs(base.uri)
  os.symlink(published_spec_model, os.path.join(base.uri, 'Format-Serving'))
  io = trainer_io(train_steps=4, module_file=_drops_a_feature(tmp_path))
  io[0]['base_model'] = [base]
  with pytest.raises(SignatureChangeError, match=(
      r"input 'body_mass_g' removed")):
    GenericExecutor().Do(*io)
  model_uri = io[1]['model'][0].uri
  assert not os.path.exists(os.path.join(model_uri, 'Format-Serving'))
  io[2]['allow_signature_change'] = True
  GenericExecutor().Do(*io)
  assert os.path.exists(os.path.join(model_uri, 'Format-Serving',
                                     'saved_model.pb'))


def test_base_model_flag_must_be_a_saved_model(tmp_path, penguin_csvs,
                                               capsys):
  """--base-model of a folder without saved_model.pb: exit 2, at once."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  assert cli.main(['--module-file', SPEC_MODULE, '--train-data',
                   penguin_csvs[0], '--output-dir', str(tmp_path / 'out'),
                   '--base-model', str(tmp_path)]) == 2
  assert ('--base-model holds no saved_model.pb. Expected a SavedModel '
          'folder, such as the model/ of an earlier run.') in (
              capsys.readouterr().err)


def test_allow_signature_change_must_be_a_flag(tmp_path):
  """allow_signature_change='yes' is refused at pipeline construction."""
  from tfx.types import channel_utils, standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  examples = channel_utils.as_channel([standard_artifacts.Examples()])
  with pytest.raises(InvalidArgumentError, match=(
      r"'allow_signature_change' must be True, False or None. Received: "
      r"allow_signature_change='yes' that is a str.")):
    GenericTrainer(module_file=SPEC_MODULE, examples=examples,
                   allow_signature_change='yes')
  assert GenericTrainer(module_file=SPEC_MODULE, examples=examples,
                        allow_signature_change=True).exec_properties[
                            'allow_signature_change']
