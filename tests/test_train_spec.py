"""TrainSpec: required members, build-once members, loading, pre-training checks."""

import os
import textwrap
import warnings

import keras
import pytest

from generic_trainer import Estimator, SpecError, TrainSpec, UserModuleError
from conftest import load_run_fn
from spec_fixtures import PenguinSpec


def _module(tmp_path, source, name='spec_module'):
  path = tmp_path / f'{name}.py'
  path.write_text(textwrap.dedent(source))
  return {'module_file': str(path)}


_HEADER = '''
import keras
from generic_trainer import TrainSpec
'''


def test_missing_member_named_at_load(tmp_path):
  """A spec without build_loss is refused at load, naming build_loss."""
  props = _module(tmp_path, _HEADER + '''
class Spec(TrainSpec):
  label_key = 'species'
  def build_model(self): pass
  def build_optimizer(self): pass
''')
  with pytest.raises(SpecError, match=(
      r'The TrainSpec Spec .* does not define the required member\(s\): '
      r'build_loss')):
    load_run_fn(props)


def test_missing_label_key_named(tmp_path):
  """label_key is a required member too."""
  props = _module(tmp_path, _HEADER + '''
class Spec(TrainSpec):
  def build_model(self): pass
  def build_optimizer(self): pass
  def build_loss(self): pass
''')
  with pytest.raises(SpecError, match=r'member\(s\): label_key'):
    load_run_fn(props)


def test_members_built_once():
  """spec.model, .optimizer, .loss and .metrics are built once."""
  spec = PenguinSpec()
  assert spec.model is spec.model
  assert spec.optimizer is spec.optimizer
  assert spec.loss is spec.loss
  assert spec.metrics is spec.metrics


def test_tuner_hyperparameters_values_are_hparams():
  """A keras_tuner config's 'values' become spec.hparams."""
  spec = PenguinSpec(hparams={'space': [], 'values': {'learning_rate': 0.5}})
  assert spec.hparams == {'learning_rate': 0.5}
  assert float(spec.optimizer.learning_rate) == 0.5


def test_module_with_spec_gives_spec_run_fn(tmp_path):
  """A module whose only entry point is a TrainSpec loads as that spec."""
  props = _module(tmp_path, 'from spec_fixtures import PenguinSpec as Base\n'
                  'class Spec(Base):\n  pass\n')
  assert load_run_fn(props).train_spec.__name__ == 'Spec'


def test_derived_spec_chosen_over_its_base(tmp_path):
  """With a base spec and a spec derived from it, the derived one is used."""
  props = _module(tmp_path, '''
from spec_fixtures import PenguinSpec
class Base(PenguinSpec):
  pass
class Derived(Base):
  num_classes = 3
''')
  assert load_run_fn(props).train_spec.__name__ == 'Derived'


def test_two_unrelated_specs_refused(tmp_path):
  """Two unrelated specs are ambiguous and named."""
  props = _module(tmp_path, '''
from spec_fixtures import PenguinSpec
class A(PenguinSpec):
  pass
class B(PenguinSpec):
  pass
''')
  with pytest.raises(UserModuleError, match=(
      r'several unrelated TrainSpec subclasses: A, B')):
    load_run_fn(props)


def test_run_fn_and_spec_refused(tmp_path):
  """A module with both run_fn and a TrainSpec is refused."""
  props = _module(tmp_path, '''
from spec_fixtures import PenguinSpec
class Spec(PenguinSpec):
  pass
def run_fn(fn_args):
  pass
''')
  with pytest.raises(UserModuleError, match=(
      r'defines both `run_fn` and the TrainSpec Spec')):
    load_run_fn(props)


def test_neither_run_fn_nor_spec(tmp_path):
  """A module with neither lists what it defines."""
  props = _module(tmp_path, 'def build_model():\n  pass\n')
  with pytest.raises(UserModuleError, match=(
      r'has no top-level `run_fn` and no TrainSpec. It defines: build_model')):
    load_run_fn(props)


def test_dotted_path_may_name_a_spec(tmp_path, monkeypatch):
  """run_fn='module.SpecName' picks that spec."""
  monkeypatch.syspath_prepend(os.path.dirname(__file__))
  fn = load_run_fn({'run_fn': 'spec_fixtures.PenguinSpec'})
  assert (fn.train_spec.__module__, fn.train_spec.__qualname__) == (
      'spec_fixtures', 'PenguinSpec')


# Pre-training checks.
def test_label_not_in_data(tmp_path, penguin_csvs):
  """A label the data lacks is named, with the features that exist."""
  class Spec(PenguinSpec):
    label_key = 'weight_class'
  with pytest.raises(SpecError, match=(
      r"The label 'weight_class' .* is not a feature of the data. The schema "
      r'has: bill_depth_mm, bill_length_mm')):
    Estimator(Spec, str(tmp_path)).train(penguin_csvs[0], steps=2)


def test_model_expects_missing_feature(tmp_path, penguin_csvs):
  """A model input no feature feeds is named before training."""
  class Spec(PenguinSpec):
    def build_model(self):
      inputs = {k: keras.Input(shape=(1,), name=k)
                for k in ['bill_length_mm', 'wing_span_mm']}
      x = keras.layers.Concatenate()(list(inputs.values()))
      return keras.Model(inputs, keras.layers.Dense(3)(x))
  with pytest.raises(SpecError, match=(
      r"The model expects the input\(s\) \['wing_span_mm'\], which the data "
      'lacks')):
    Estimator(Spec, str(tmp_path)).train(penguin_csvs[0], steps=2)


def test_too_few_output_units_for_the_classes(tmp_path, penguin_csvs):
  """Two output units for three classes is caught before training."""
  class Spec(PenguinSpec):
    num_classes = 2
  with pytest.raises(SpecError, match=(
      r'The labels go up to 2 but the model has 2 output unit\(s\): '
      r'SparseCategoricalCrossentropy needs one unit per class')):
    Estimator(Spec, str(tmp_path)).train(penguin_csvs[0], steps=2)


def test_outputs_incompatible_with_metric(tmp_path, penguin_csvs):
  """A metric that cannot take the outputs is caught, with the shapes."""
  class Spec(PenguinSpec):
    def build_metrics(self):
      return [keras.metrics.BinaryIoU(target_class_ids=[0, 1])]
  with pytest.raises(SpecError, match=(
      r'The model outputs do not fit the loss or metrics: .*Model outputs: '
      r'float32\[\d+, 3\]; labels: int64\[\d+, 1\]')):
    Estimator(Spec, str(tmp_path)).train(penguin_csvs[0], steps=2)


@pytest.mark.parametrize('attrs, steps, message', [
    ({'epochs': 0}, 4, r'TrainSpec.epochs must be a positive int. Received: '
     r'epochs=0'),
    ({'batch_size': 'big'}, 4, r"batch_size must be a positive int"),
    ({'epochs': 5}, 3, r'train_args.num_steps=3 is fewer than '
     r'TrainSpec.epochs=5'),
    ({'epochs': 3}, 10, r'train_args.num_steps=10 does not divide into '
     r'TrainSpec.epochs=3 equal epochs. Expected a multiple of 3. Received: '
     r'num_steps=10, epochs=3. Use a multiple of 3 \(e.g. 9\)'),
])
def test_schedule_checks(tmp_path, penguin_csvs, attrs, steps, message):
  """Epochs, batch size and steps that make no sense are refused."""
  spec = type('Spec', (PenguinSpec,), attrs)
  with pytest.raises(SpecError, match=message):
    Estimator(spec, str(tmp_path)).train(penguin_csvs[0], steps=steps)


def test_estimator_train_evaluate_predict_export(tmp_path, penguin_csvs):
  """The Estimator trains, evaluates (without Keras's warning that the
  finite eval data ran out), predicts and exports a valid model."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  train_csv, eval_csv = penguin_csvs
  est = Estimator(PenguinSpec, str(tmp_path))
  result = est.train(train_csv, eval_data=eval_csv, steps=40)
  assert result['steps'] == 40 and result['epochs'] == 2
  with warnings.catch_warnings(record=True) as shown:
    warnings.simplefilter('always')
    metrics = est.evaluate(eval_csv)
  # Read to its end on purpose: not Keras's "Your input ran out of data".
  assert [str(w.message) for w in shown
          if 'ran out of data' in str(w.message)] == []
  assert metrics['loss'] == pytest.approx(result['eval']['loss'], rel=1e-4)
  predictions = est.predict(eval_csv)
  assert predictions.shape == (114, 3)
  loaded = tf.saved_model.load(est.export())
  assert 'serving_default' in loaded.signatures


def test_estimator_requires_training_first(tmp_path):
  """predict before train says what to do."""
  with pytest.raises(SpecError, match=r'Call train\(\) before predict\(\)'):
    Estimator(PenguinSpec, str(tmp_path)).predict('x.csv')


def test_estimator_predicts_on_data_without_labels(tmp_path, penguin_csvs):
  """predict() reads features only: a CSV without the label column works."""
  import csv  # pylint: disable=g-import-not-at-top
  train_csv, eval_csv = penguin_csvs
  unlabelled = tmp_path / 'unlabelled.csv'
  with open(eval_csv) as f, open(unlabelled, 'w', newline='') as out:
    rows = list(csv.DictReader(f))
    columns = [c for c in rows[0] if c not in ('species', 'is_gentoo')]
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction='ignore')
    writer.writeheader()
    writer.writerows(rows)
  est = Estimator(PenguinSpec, str(tmp_path / 'model'))
  est.train(train_csv, steps=4)
  assert est.predict(str(unlabelled)).shape == (114, 3)
