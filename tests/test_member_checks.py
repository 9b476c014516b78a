"""A TrainSpec's members checked before training (`trainspec.member_checks`):
a name Keras does not know is refused with the name meant, and a member that
cannot fit the data is named before the first step."""

import textwrap

import pytest

from message_parts import assert_four_parts


def test_a_misspelt_loss_name_is_named_before_training():
  """`build_loss()` returning a name Keras does not know is refused with
  the name meant, not met at the first step as a shape mismatch."""
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.trainspec import member_checks  # pylint: disable=g-import-not-at-top

  class PenguinSpec:
    pass

  with pytest.raises(SpecError) as e:
    member_checks.loss(PenguinSpec(), 'sparse_categorical_crossentrpy')
  assert str(e.value).startswith(
      "PenguinSpec.build_loss() returned 'sparse_categorical_crossentrpy', "
      "which Keras does not know as a loss; did you mean "
      "'sparse_categorical_crossentropy'?")
  assert_four_parts(str(e.value))
  assert member_checks.loss(PenguinSpec(), {'y': 'mse'}) == {'y': 'mse'}


def _main(*argv):
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  return cli.main(list(argv))


def _error_line(err: str) -> str:
  return [l for l in err.splitlines() if l.startswith('generic-trainer: ')][0]


_SPEC = '''
    import keras
    from spec_fixtures import FEATURES, PenguinSpec

    class Mistake(PenguinSpec):
    '''


@pytest.mark.parametrize('members, starts, also', [
    ('''
      def build_metrics(self):
        return ['acuracy']
    ''', "Mistake.build_metrics() returned 'acuracy', which Keras does not "
     "know as a metric; did you mean 'accuracy'?",
     "Write 'accuracy' in build_metrics()."),
    ('''
      def build_model(self):
        return keras.Sequential([keras.layers.Dense(8, activation='relu'),
                                 keras.layers.Dense(3, activation='softmax')])
    ''', 'Mistake.build_model() returns a keras.Sequential, which takes one '
     'tensor, but Mistake.preprocess() returns a dict of 4 features',
     'Build a functional model with named inputs'),
    ('''
      def preprocess(self, features):
        return keras.ops.concatenate(
            [keras.ops.cast(features[k], 'float32') for k in FEATURES], -1)
    ''', 'Mistake.preprocess() returns one tensor (float32[20, 4]), but '
     "Mistake.build_model()'s model takes 4 named inputs",
     'Change one side: return a dict from preprocess()'),
], ids=['misspelt-metric', 'sequential-fed-a-dict', 'one-tensor-to-inputs'])
def test_spec_mistakes_are_named_before_training(tmp_path, capsys,
                                                 penguin_csvs, members,
                                                 starts, also):
  """A misspelt metric is named with the name meant (not a shape mismatch
  with advice about label kinds); a Sequential fed the dict of features
  and a preprocess returning one tensor to a model of named inputs are
  told both sides and how to change either (not "Exception encountered
  when calling Sequential.call()")."""
  module = tmp_path / 'mistake.py'
  module.write_text(textwrap.dedent(_SPEC) + textwrap.indent(
      textwrap.dedent(members), '  '))
  assert _main('--module-file', str(module), '--train-data',
               penguin_csvs[0], '--output-dir', str(tmp_path / 'out'),
               '--steps', '2') == 1
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(f'generic-trainer: SpecError: {starts}'), message
  assert also in message
  assert 'Could not interpret' not in message
  assert_four_parts(message)
