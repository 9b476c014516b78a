"""A TrainSpec's members checked before training (`trainspec.member_checks`):
a loss, metric or optimizer name Keras does not know is refused with the
name meant; a member returning the wrong kind of value (handlers() a plain
function, preprocess() nothing) and a model that cannot take the features
are named before the first step."""

import textwrap

import pytest

from command_line import error_line as _error_line
from command_line import main as _main
from command_line import module_file as _module
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


# No raw error from a cause we can name.
def test_handlers_returning_a_plain_function_is_named(tmp_path, penguin_csvs,
                                                      capsys):
  """handlers() returning [a function]: a SpecError naming the member and
  LambdaCallback, not Keras's AttributeError."""
  module = _module(tmp_path, 'plain_handler', '''
      from spec_fixtures import PenguinSpec

      def log_epoch(epoch, logs=None):
        print(epoch, logs)

      class Logged(PenguinSpec):
        def handlers(self):
          return [log_epoch]
      ''')
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '4') == 1
  message = _error_line(capsys.readouterr().err)
  assert message == (
      'generic-trainer: SpecError: Logged.handlers() returned, at index 0, '
      'the function log_epoch, which is not a Keras callback. Expected '
      'keras.callbacks.Callback instances (objects with on_epoch_end, '
      'set_model...). Received: the function log_epoch. Return instances '
      'only: wrap a plain function in keras.callbacks.LambdaCallback('
      'on_epoch_end=fn), or subclass keras.callbacks.Callback.')
  assert_four_parts(message)


class _Spec:
  """A stand-in TrainSpec for the member checks."""


@pytest.mark.parametrize('member, value, message', [
    ('handlers', lambda: None, r'^_Spec.handlers\(\) returned the function '
     r'.*<lambda>\. Expected a list of Keras callbacks'),
    ('handlers', [dict], r'at index 0, the class dict \(not an instance of '
     r'it\).*Return instances only: call the class'),
    ('model', None, r'^_Spec.build_model\(\) returned None\. Expected a Keras '
     r'model.*Return the model, e\.g\.'),
    ('optimizer', None, r'^_Spec.build_optimizer\(\) returned None\.'),
    ('loss', None, r'^_Spec.build_loss\(\) returned None\.'),
    ('metrics', 'accuracy', r"^_Spec.build_metrics\(\) returned a str "
     r"\('accuracy'\)\..*Return a list, e\.g\. `return \['accuracy'\]`"),
])
def test_spec_members_of_the_wrong_kind_are_named(member, value, message):
  """Each build_* member and handlers() returning the wrong kind of value:
  the member, what it takes and what it got."""
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.trainspec import member_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError, match=message) as e:
    getattr(member_checks, member)(_Spec(), value)
  assert_four_parts(str(e.value))


def test_preprocess_that_returns_none_is_named(tmp_path, penguin_csvs,
                                               capsys):
  """preprocess() without its return: the member and the fix, not a
  TypeError from inside tf.data."""
  module = _module(tmp_path, 'no_return', '''
      from spec_fixtures import PenguinSpec

      class Forgot(PenguinSpec):
        def preprocess(self, features):
          features = dict(features)
      ''')
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '4') == 1
  message = _error_line(capsys.readouterr().err)
  assert message == (
      'generic-trainer: SpecError: Forgot.preprocess() returned None. '
      'Expected the features the model reads: a dict of tensors by name. '
      'Received: None. Return the dict (`return features`) at the end of '
      'preprocess().')


def test_an_optimizer_keras_does_not_know_is_named(tmp_path, penguin_csvs,
                                                   capsys):
  """build_optimizer() returning 'adamm': a SpecError naming the members,
  not a RunFnError around Keras's ValueError."""
  module = _module(tmp_path, 'typo', '''
      from spec_fixtures import PenguinSpec

      class Typo(PenguinSpec):
        def build_optimizer(self):
          return 'adamm'
      ''')
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '4') == 1
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(
      "generic-trainer: SpecError: Keras cannot compile Typo's model: "
      'ValueError: ')
  assert "Could not interpret optimizer identifier: 'adamm'" in message or (
      'Could not interpret optimizer identifier: adamm' in message)
  assert "Received: optimizer=a str ('adamm'), loss=a " in message
  assert message.endswith(
      'Fix the name or object in build_optimizer(), build_loss() or '
      'build_metrics().')
  assert_four_parts(message)
