"""A label checked against the loss before training (`loop.label_checks`,
the heads): a regression label of prices written as text is told to be
parsed, and class names stay classes; class names, fractions or negative
numbers in a label of class indices are named."""

import os
import textwrap

import pytest

from command_line import error_line as _error_line
from command_line import main as _main
from conftest import REPO
from message_parts import assert_four_parts

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


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


# A label of the wrong kind is named before training.
def test_class_names_in_a_label_of_class_indices_are_named(
    tmp_path, capsys):
  """'Adelie' in the label a SparseCategoricalCrossentropy spec reads:
  the column, what it takes, and how to map names to indices."""
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  path = write_penguin_csv(str(tmp_path / 'named'), string_labels=True)
  assert _main('--module-file', SPEC_MODULE, '--train-data', path,
               '--output-dir', str(tmp_path / 'out'), '--steps', '5') == 1
  message = _error_line(capsys.readouterr().err)
  assert message == (
      "generic-trainer: SpecError: The label column 'species' holds names "
      "('Adelie', 'Chinstrap', 'Gentoo'), but the loss "
      'SparseCategoricalCrossentropy takes numbers: class indices 0..N-1 for '
      'a classifier. Expected class indices (0, 1, 2...) or a vocabulary that '
      "maps the names to them. Received: strings in 'species' ('Adelie', "
      "'Chinstrap', 'Gentoo'). Map the names to indices: declare a head with "
      "the vocabulary (head = heads.MultiClassHead(label_vocabulary=['Adelie'"
      ", 'Chinstrap', 'Gentoo']), with build_model returning the body), use a "
      'canned spec (canned.DNNClassifierSpec reads the classes from the '
      'data), or write the indices into the data (a keras.layers.StringLookup '
      'in a Transform preprocessing_fn).')
  assert_four_parts(message)


def test_fractions_in_a_label_of_class_indices_are_named():
  """0.5 for a loss of class indices: use a regression loss."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import label_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError) as e:
    label_checks.check_kind('mass', np.array([0.5, 1.0]),
                            'sparse_categorical_crossentropy', 3)
  assert str(e.value) == (
      "The label column 'mass' holds fractions ([0.5]), but the loss "
      'sparse_categorical_crossentropy takes class indices. Expected whole '
      'numbers 0..N-1 for a classifier. Received: floats such as 0.5. Use a '
      'regression loss (e.g. keras.losses.MeanSquaredError with one output '
      'unit) for a number to predict, or write class indices into the label '
      'column.')


def test_negative_labels_for_a_loss_of_class_indices_are_named():
  """-1/1 labels for SparseCategoricalCrossentropy: write 0..N-1."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import label_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError) as e:
    label_checks.check_kind('churned', np.array([-1, 1]),
                            'sparse_categorical_crossentropy', 2)
  assert str(e.value) == (
      "The label column 'churned' holds negative values ([-1.0]), but the "
      'loss sparse_categorical_crossentropy takes class indices from 0. '
      'Expected whole numbers 0..N-1. Received: -1. Write the classes as '
      '0..N-1 (e.g. -1/1 as 0/1), or use a loss for numbers.')
  assert_four_parts(str(e.value))


def test_words_in_a_canned_regressors_label_are_told_before_tensorflow(
    tmp_path, capsys):
  """A churn table's yes/no label for a DNNRegressorSpec: told, from the
  CSV's first rows, that a regressor predicts a number, and which
  classifier reads the classes."""
  module = _module(tmp_path, '''
      from generic_trainer.canned import DNNRegressorSpec

      class Churn(DNNRegressorSpec):
        label_key = 'churn'
      ''')
  data = tmp_path / 'churn.csv'
  data.write_text('tenure,plan,churn\n3,basic,yes\n14,pro,no\n2,basic,yes\n')
  assert _main('--module-file', module, '--train-data', str(data),
               '--output-dir', str(tmp_path / 'out')) == 1
  out, err = capsys.readouterr()
  message = _error_line(err)
  assert message == (
      "generic-trainer: InputArtifactError: The label column 'churn' holds "
      "words ('no', 'yes'), but Churn is a DNNRegressorSpec, which predicts "
      "a number. Expected numbers in 'churn'. Received: 2 distinct word(s) "
      'in the first rows. Use DNNClassifierSpec as the base of Churn '
      'instead of DNNRegressorSpec to learn classes (it reads them from the '
      'data), or write the label as plain numbers to predict an amount.')
  assert 'Loading TensorFlow' not in out
  assert_four_parts(message[len('generic-trainer: InputArtifactError: '):])
