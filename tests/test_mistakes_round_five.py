"""Every mistake clear, round five (issue 49, part 4): what a new user met
and the held-out mistakes, each made for real and its message asserted.

A regression label of prices written with '$'; flags a TFX user brings
(`--train-steps`, `--epochs`); a failed local pipeline script; a float for
an int64 feature when calling the model; Keras 2's way of saving; a
misspelt metric; a learning rate written as a JSON string; a Sequential fed
the dict of features; a preprocess that returns one tensor to a model of
named inputs; `make image` on a machine that cannot pull its base.
"""

import os
import shutil
import subprocess
import textwrap

import pytest

from conftest import REPO
from message_parts import assert_four_parts


def _main(*argv):
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  return cli.main(list(argv))


def _error_line(err: str) -> str:
  return [l for l in err.splitlines() if l.startswith('generic-trainer: ')][0]


def _module(tmp_path, source: str) -> str:
  path = tmp_path / 'mistake.py'
  path.write_text(textwrap.dedent(source))
  return str(path)


# 1. A regression label of prices written with a currency sign.

def test_a_price_label_with_a_currency_sign_is_told_to_parse_it(
    tmp_path, capsys):
  """A CSV column of prices like "$2,050.0" as a regression label: told it is
  text written with '$' and how to write it as numbers, not told to treat
  each price as a class (MultiClassHead(label_vocabulary=[...]))."""
  # Every price is over 1,000, so whichever rows the first (shuffled)
  # batch holds, they show both the '$' and the thousands separator.
  rows = ['size,rooms,price'] + [
      f'{s},{s % 5 + 1},"${s * 35 + 1000:,.1f}"' for s in range(30, 330, 5)]
  data = tmp_path / 'houses.csv'
  data.write_text('\n'.join(rows) + '\n')
  module = _module(tmp_path, '''
      import keras
      from generic_trainer import TrainSpec

      class PriceSpec(TrainSpec):
        label_key = 'price'
        feature_keys = ['size', 'rooms']
        batch_size = 10

        def build_model(self):
          inputs = {k: keras.Input(shape=(1,), name=k)
                    for k in self.feature_keys}
          x = keras.layers.Concatenate()(list(inputs.values()))
          return keras.Model(inputs, keras.layers.Dense(1)(x))

        def build_optimizer(self):
          return keras.optimizers.Adam(0.01)

        def build_loss(self):
          return 'mse'

        def preprocess(self, features):
          return {k: keras.ops.cast(v, 'float32') for k, v in features.items()}
      ''')
  assert _main('--module-file', module, '--train-data', str(data),
               '--output-dir', str(tmp_path / 'out')) == 1
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(
      "generic-trainer: SpecError: The label column 'price' holds text that "
      "looks like numbers written with a currency sign ('$') and thousands "
      "separators (',') (")
  assert 'MultiClassHead' not in message and 'label_vocabulary' not in message
  assert ("df['price'] = df['price'].str.replace(r'[$,]', '', regex=True)"
          '.astype(float)') in message
  assert_four_parts(message)
  assert not (tmp_path / 'out' / 'model').exists()


def test_a_regression_head_says_the_same_and_class_names_stay_classes():
  """RegressionHead gives the same message; names that are not numbers
  ('Adelie') and a decimal comma ('1,5') are not taken for amounts."""
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.heads import RegressionHead  # pylint: disable=g-import-not-at-top
  from generic_trainer.heads import regression  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError) as e:
    RegressionHead().check_labels([[b'12%'], [b'7.5%']], 'rate')
  assert str(e.value).startswith(
      "The label column 'rate' holds text that looks like numbers written "
      "with a percent sign ('%') ('12%', '7.5%')")
  assert 'and a RegressionHead takes numbers' in str(e.value)
  assert_four_parts(str(e.value))
  assert regression.numbers_as_text(['Adelie', 'Gentoo']) is None
  assert regression.numbers_as_text(['1,5', '2,25']) is None
  assert regression.numbers_as_text(['€ 3.40', '-€1,200']) == {'€', ','}
  assert regression.numbers_as_text(['647.5', '']) == set()


# 2. Flags a TFX or Keras user brings.

@pytest.mark.parametrize('argv, said, todo', [
    (['--train-steps', '100'], 'the train steps are --steps here',
     'Write --steps 100.'),
    (['--num-steps=7'], 'the train steps are --steps here',
     'Write --steps 7.'),
    (['--num-eval-steps', '3'], 'the eval steps are --eval-steps here',
     'Write --eval-steps 3.'),
    (['--epochs', '5'], "A TrainSpec sets its class attribute `epochs = 5`",
     'Write epochs = 5 in the TrainSpec, or --hparams \'{"epochs": 5}\' for '
     'a run_fn that reads it.'),
], ids=['train-steps', 'num-steps', 'num-eval-steps', 'epochs'])
def test_flags_a_tfx_user_brings_say_where_each_is_set(tmp_path, capsys, argv,
                                                       said, todo):
  """`--train-steps` is not answered with "did you mean --train-data?": it
  is told that the steps are --steps; --epochs that epochs belong to the
  TrainSpec or the run_fn's own code."""
  spec = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  assert _main('--module-file', spec, '--train-data', 'x.csv',
               '--output-dir', str(tmp_path / 'out'), *argv) == 2
  message = _error_line(capsys.readouterr().err)
  name = argv[0].split('=')[0]
  assert message.startswith(
      f'generic-trainer: error: {name} is not a flag of generic-trainer: ')
  assert said in message and message.endswith(todo), message
  assert 'did you mean' not in message
  assert_four_parts(message)


# 3. A failed local pipeline script; what a successful one validated.

def test_a_failed_pipeline_script_prints_the_reason_then_the_log(
    tmp_path, capfd):
  """A run_fn failing inside a local pipeline script: the console prints
  the reason (what is wrong, expected, received, what to do), then the
  log's path, and no traceback; the log holds it. --verbose (no log)
  prints the traceback."""
  from generic_trainer.system import console  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import guard  # pylint: disable=g-import-not-at-top

  def load_vocabulary(path):
    with open(path) as f:
      return f.read().split()

  def body(say, log_path):
    say('  GenericTrainer ...')
    with guard.user_code('run_fn', "module_file='penguin_run_fn.py'"):
      load_vocabulary(str(tmp_path / 'no_such_vocab.txt'))

  assert not console.run_pipeline('Penguin pipeline', str(tmp_path), False,
                                  body)
  out, err = capfd.readouterr()
  log = str(tmp_path / console.LOG_FILE)
  assert out.splitlines() == [
      f'== Penguin pipeline; full log: {log}', '  GenericTrainer ...']
  lines = err.splitlines()
  assert lines[0].startswith(
      "The pipeline failed: RunFnError: run_fn (module_file='penguin_run_fn"
      ".py') raised FileNotFoundError: [Errno 2] No such file or directory")
  assert lines[1:] == [
      f'The tracebacks and every line of the run are in the log: {log} '
      '(--verbose prints them here instead).']
  assert_four_parts(lines[0])
  with open(log) as f:
    text = f.read()
  assert 'Its traceback:' in text and 'in load_vocabulary' in text
  assert console.run_pipeline('Penguin pipeline', str(tmp_path), True,
                              body) is False
  err = capfd.readouterr().err
  assert 'Its traceback:' in err and 'in load_vocabulary' in err


# 4. Calling the model: a float for an int64 feature.

def test_a_float_for_an_int64_feature_is_refused_naming_the_row(tmp_path):
  """tf_examples builds serialized tf.Examples typed as the schema says,
  and refuses a float for an INT feature (TensorFlow would say "Data types
  don't match" from inside the signature) naming the row and the fix."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  from generic_trainer import InvalidArgumentError, tf_examples  # pylint: disable=g-import-not-at-top,g-multiple-import
  schema = schema_pb2.Schema()
  schema.feature.add(name='bill_length_mm', type=schema_pb2.FLOAT)
  schema.feature.add(name='body_mass_g', type=schema_pb2.INT)
  schema.feature.add(name='island', type=schema_pb2.BYTES)
  (serialized,) = tf_examples(
      [{'bill_length_mm': 39, 'body_mass_g': 3750, 'island': 'Biscoe'}],
      schema)
  parsed = tf.train.Example.FromString(serialized).features.feature
  assert list(parsed['body_mass_g'].int64_list.value) == [3750]
  assert list(parsed['bill_length_mm'].float_list.value) == [39.0]
  assert list(parsed['island'].bytes_list.value) == [b'Biscoe']
  with pytest.raises(InvalidArgumentError) as e:
    tf_examples([{'body_mass_g': 3750}, {'body_mass_g': 3750.5}], schema)
  assert str(e.value) == (
      "Row 1 gives the feature 'body_mass_g' the value 3750.5, a float, but "
      "'body_mass_g' is INT in the schema: a tf.Example carries it as an "
      'int64_list, and the serving signature would refuse another type with '
      "TensorFlow's \"Data types don't match\". Expected an int for "
      "'body_mass_g'. Received: body_mass_g=3750.5 (float). Pass an int "
      '(3750 or 3751, as you mean it), or make the feature FLOAT in the '
      'schema and train again.')
  assert_four_parts(str(e.value))
  with pytest.raises(InvalidArgumentError, match=r"did you mean "
                     r"'body_mass_g'\?"):
    tf_examples([{'body_mass': 3750}], schema)


# 7-10. The held-out mistakes, each through the command.

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


def test_a_learning_rate_written_as_a_json_string_is_named(
    tmp_path, capsys, penguin_csvs):
  """--hparams '{"learning_rate": "0.01"}': a note when the flags are read,
  and Keras's refusal said as a string from --hparams, with the number
  written without quotes."""
  spec = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  assert _main('--module-file', spec, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '5',
               '--hparams', '{"learning_rate": "0.01"}') == 1
  err = capsys.readouterr().err
  assert ('--hparams: learning_rate given as text ("learning_rate": "0.01")'
          ', which the code receives as a str') in err
  message = _error_line(err)
  assert message.startswith(
      "generic-trainer: RunFnError: TrainSpec PenguinSpec (module_file='"
      f"{spec}') raised ValueError: Argument `learning_rate` should be float")
  reason = message.split('Received instead: learning_rate=0.01. ')[1]
  assert reason == (
      "learning_rate is the string '0.01' from --hparams, not a number: JSON "
      'keeps a quoted value as text, and the code passed it on as it was. '
      'Expected a JSON number for learning_rate: 0.01, without quotes. '
      'Received: "learning_rate": "0.01" (a string) in --hparams. Write the '
      'number without quotes: --hparams \'{"learning_rate": 0.01}\'. Nothing '
      'was published.')
  assert_four_parts(reason)


# 11. `make image` where the base cannot be pulled.

def test_make_image_without_a_pullable_base_says_how_to_build_one(tmp_path):
  """`make image` with a BASE this machine cannot pull (a registry that
  does not resolve, as docker.io does not here) stops before the build
  with the way that works (make image-base, then make image BASE=...),
  not with podman's "no such host" and make's Error 125 alone."""
  engine = os.path.join(REPO, 'scripts', 'container.sh')
  if not shutil.which('make'):
    pytest.skip('no make on this machine')
  installed = subprocess.run([engine, '--install'], capture_output=True,
                             text=True, timeout=900, check=False)
  if installed.returncode != 0:
    pytest.skip('no container engine here and none could be installed '
                f'(scripts/container.sh --install): {installed.stderr}')
  base = 'registry.invalid/python:3.10-slim'  # .invalid never resolves.
  done = subprocess.run(
      ['make', '-C', REPO, 'image', f'BASE={base}',
       'IMAGE=localhost/tfx-generic-trainer:never-built'],
      capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode != 0
  lines = done.stderr.splitlines()
  (said,) = [l for l in lines if l.startswith("container.sh: the image's ")]
  assert said.startswith(
      f"container.sh: the image's base {base} is not on this machine and "
      'cannot be pulled from here (')
  assert_four_parts(said)
  assert lines[lines.index(said) + 1:lines.index(said) + 3] == [
      '  make image-base',
      '  make image BASE=localhost/tfx-generic-trainer-base:bookworm-py3.10']
  assert 'STEP 1/' not in done.stdout + done.stderr  # No build started.
