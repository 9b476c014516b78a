"""A label checked against the loss before training (`loop.label_checks`,
the heads): a regression label of prices written as text is told to be
parsed, and class names stay classes."""

import textwrap

import pytest

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
