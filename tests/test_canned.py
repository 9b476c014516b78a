"""Canned specs: what each one builds from the data, what it learns, and
the mistakes it names. Each trains in seconds with the Estimator."""

import csv
import datetime
import logging
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from generic_trainer import Estimator, SpecError, heads
from generic_trainer.canned import Bucketized, Categorical, Crossed, Numeric
from generic_trainer.canned import (DNNClassifierSpec,  # pylint: disable=g-multiple-import
                                    DNNLinearCombinedClassifierSpec,
                                    DNNRegressorSpec, LinearClassifierSpec,
                                    LinearRegressorSpec)
from generic_trainer.system import progress
from conftest import command_env
from message_parts import assert_four_parts
from test_heads import SPECIES, named_penguin_csvs  # pylint: disable=unused-import

MEASUREMENTS = ['bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
                'body_mass_g']


class PenguinDNN(DNNClassifierSpec):
  """The issue's whole module: a label and the hidden units."""
  label_key = 'species'
  hidden_units = [16, 8]
  feature_keys = MEASUREMENTS
  checkpoint = None


def _write_csv(path, header, rows):
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(header)
    writer.writerows(rows)
  return str(path)


def _serialized(rows, columns):
  """tf.Examples of CSV rows (floats, ints as the schema infers them)."""
  records = []
  for row in rows:
    feature = {}
    for name in columns:
      value = row[name]
      if name in ('flipper_length_mm', 'body_mass_g'):
        feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(
            value=[int(value)]))
      else:
        feature[name] = tf.train.Feature(float_list=tf.train.FloatList(
            value=[float(value)]))
    records.append(tf.train.Example(features=tf.train.Features(
        feature=feature)).SerializeToString())
  return records


def test_dnn_classifier_learns_species_names_and_classifies_examples(
    tmp_path, named_penguin_csvs):
  """With string labels the classes are read from the data; eval accuracy
  reaches 0.95; the `classification` signature, fed serialized
  tf.Examples, returns every class name and scores that sum to 1 and pick
  the right species."""
  train_csv, eval_csv = named_penguin_csvs
  est = Estimator(PenguinDNN, str(tmp_path))
  result = est.train(train_csv, eval_data=eval_csv, steps=200)
  head = est.spec.head
  assert isinstance(head, heads.MultiClassHead)
  assert head.label_vocabulary == SPECIES
  assert result['eval']['accuracy'] >= 0.95, result
  with open(eval_csv) as f:
    rows = list(csv.DictReader(f))
  classify = tf.saved_model.load(est.export()).signatures['classification']
  outputs = classify(inputs=tf.constant(_serialized(rows, MEASUREMENTS)))
  classes, scores = outputs['classes'].numpy(), outputs['scores'].numpy()
  assert classes.shape == scores.shape == (len(rows), 3)
  assert classes[0].tolist() == [s.encode() for s in SPECIES]
  np.testing.assert_allclose(scores.sum(axis=1), 1, rtol=1e-5)
  predicted = [SPECIES[i] for i in scores.argmax(axis=1)]
  assert np.mean([p == r['species'] for p, r in zip(predicted, rows)]) >= 0.95


def test_the_model_is_built_from_the_schema(tmp_path):
  """Strings get a vocabulary (most frequent first) and an embedding,
  numbers a normalisation by their mean and variance; the head's classes
  are the label's values, sorted."""
  path = _write_csv(tmp_path / 'd.csv', ['color', 'size', 'label'],
                    [['red', 1.0, 'b'], ['red', 3.0, 'a'], ['blue', 2.0, 'b'],
                     ['green', 2.0, 'a']] * 10)

  class Spec(DNNClassifierSpec):
    label_key = 'label'
    hidden_units = [4]
    checkpoint = None
  est = Estimator(Spec, str(tmp_path / 'model'))
  est.train(path, steps=2)
  model = est.spec.model
  lookup = model.get_layer('color_lookup')
  assert lookup.get_vocabulary() == ['[UNK]', 'red', 'blue', 'green']
  assert model.get_layer('color_embedding').output_dim == 9  # ceil(6*4^.25)
  norm = model.get_layer('size_normalized')
  assert float(norm.mean.numpy().ravel()[0]) == pytest.approx(2.0)
  assert float(norm.variance.numpy().ravel()[0]) == pytest.approx(0.5)
  assert isinstance(est.spec.head, heads.BinaryClassHead)
  assert est.spec.head.label_vocabulary == ['a', 'b']
  assert est.spec.summaries['color'].source == 'sample'


def test_columns_override_the_default_per_feature(tmp_path, named_penguin_csvs):
  """A feature can be bucketized, an int made a category (its most frequent
  values), a number left unnormalised, a string given its vocabulary, or a
  feature left out (None)."""
  class Spec(PenguinDNN):
    feature_keys = None
    columns = {'bill_length_mm': Bucketized(num_buckets=4),
               'bill_depth_mm': Bucketized(boundaries=[15.0, 18.0]),
               'flipper_length_mm': Categorical(top_k=5),
               'body_mass_g': Numeric(normalize=False),
               'sex': Categorical(vocabulary=['female'])}

  class WithoutSex(Spec):
    columns = {**Spec.columns, 'sex': None}
  est = Estimator(Spec, str(tmp_path))
  est.train(named_penguin_csvs[0], steps=2)
  model = est.spec.model
  assert len(model.get_layer('bill_length_mm_bucket').bin_boundaries) == 3
  assert model.get_layer('bill_depth_mm_bucket').bin_boundaries == [15., 18.]
  flipper = model.get_layer('flipper_length_mm_lookup')
  assert isinstance(flipper, keras.layers.IntegerLookup)
  assert len(flipper.get_vocabulary()) == 5 + 1  # The top 5 and the OOV.
  assert 'body_mass_g_normalized' not in [layer.name for layer in model.layers]
  assert model.get_layer('sex_lookup').get_vocabulary() == ['[UNK]', 'female']
  without = Estimator(WithoutSex, str(tmp_path / 'without'))
  without.train(named_penguin_csvs[0], steps=2)
  assert 'sex' not in without.spec.model.input


def test_hparams_override_attributes_of_the_same_name(tmp_path,
                                                      named_penguin_csvs):
  """Tuner's values replace hidden_units, learning_rate, batch_size."""
  est = Estimator(PenguinDNN, str(tmp_path), hparams={
      'values': {'hidden_units': [5], 'learning_rate': 0.25,
                 'batch_size': 7, 'not_a_setting': 1}})
  assert est.spec.hidden_units == [5] and est.spec.batch_size == 7
  est.train(named_penguin_csvs[0], steps=2)
  assert est.spec.model.get_layer('dnn_0').units == 5
  assert float(est.spec.optimizer.learning_rate) == pytest.approx(0.25)
  assert not hasattr(est.spec, 'not_a_setting')


def test_statistics_give_means_and_vocabularies(tmp_path):
  """With a statistics artifact the means and vocabularies are read from
  it, not from the data; an incomplete vocabulary falls back to a sample."""
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=g-import-not-at-top
  from generic_trainer.canned import data_summary  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs.local import LocalFnArgs  # pylint: disable=g-import-not-at-top
  path = _write_csv(tmp_path / 'd.csv', ['size', 'color', 'shape'],
                    [[1.0, 'red', 'round'], [3.0, 'blue', 'square']] * 5)
  files = local_files.to_split(path, str(tmp_path / 'Split-train'))
  stats = statistics_pb2.DatasetFeatureStatisticsList()
  dataset = stats.datasets.add(num_examples=10)
  size = dataset.features.add(name='size')
  size.num_stats.mean, size.num_stats.std_dev = 100.0, 10.0
  color = dataset.features.add(name='color')
  color.string_stats.unique = 2
  for value, count in (('blue', 6), ('red', 4)):
    color.string_stats.top_values.add(value=value, frequency=count)
  shape = dataset.features.add(name='shape')
  shape.string_stats.unique = 2
  shape.string_stats.top_values.add(value='round', frequency=5)
  os.makedirs(tmp_path / 'stats' / 'Split-train')
  with open(tmp_path / 'stats' / 'Split-train' / 'FeatureStats.pb', 'wb') as f:
    f.write(stats.SerializeToString())
  fn_args = LocalFnArgs(train_files=files,
                        statistics_path=str(tmp_path / 'stats'))
  schema = local_files.infer_schema(files)
  summaries = data_summary.summarize(
      fn_args, schema, {'size': data_summary.MOMENTS,
                        'color': data_summary.VOCABULARY,
                        'shape': data_summary.VOCABULARY}, sample_rows=100)
  assert (summaries['size'].mean, summaries['size'].variance) == (100, 100)
  assert summaries['color'].vocabulary == ['blue', 'red']
  assert summaries['color'].source == 'statistics'
  assert summaries['shape'].source == 'sample'  # 1 top value of 2 unique.
  assert sorted(summaries['shape'].vocabulary) == ['round', 'square']


def test_linear_classifier_learns_a_cross_it_cannot_learn_without(tmp_path):
  """XOR of two categories: a linear model reaches chance without the
  cross and learns it with Crossed."""
  rows = [[a, b, int((a == 'x') != (b == 'x'))] for a in 'xy' for b in 'xy']
  path = _write_csv(tmp_path / 'xor.csv', ['a', 'b', 'label'], rows * 50)

  class Plain(LinearClassifierSpec):
    label_key = 'label'
    learning_rate = 0.1
    checkpoint = None

  class WithCross(Plain):
    crosses = [Crossed(['a', 'b'], num_bins=16)]

  plain = Estimator(Plain, str(tmp_path / 'plain')).train(path, steps=100)
  crossed = Estimator(WithCross, str(tmp_path / 'cross')).train(path,
                                                                 steps=100)
  assert plain['eval']['accuracy'] <= 0.75
  assert crossed['eval']['accuracy'] == 1.0


def test_linear_regressor_fits_a_line_and_serves_regress(tmp_path):
  """y = 3x + 2 is learned; the `regression` signature returns it."""
  rng = np.random.RandomState(0)
  rows = [[x, 3 * x + 2] for x in rng.uniform(-1, 1, 300)]
  path = _write_csv(tmp_path / 'line.csv', ['x', 'y'], rows)

  class Spec(LinearRegressorSpec):
    label_key = 'y'
    learning_rate = 0.1
    checkpoint = None
  est = Estimator(Spec, str(tmp_path / 'model'))
  result = est.train(path, steps=300)
  assert result['eval']['mean_absolute_error'] < 0.05
  example = tf.train.Example(features=tf.train.Features(feature={
      'x': tf.train.Feature(float_list=tf.train.FloatList(value=[0.5]))}))
  regress = tf.saved_model.load(est.export()).signatures['regression']
  value = regress(inputs=tf.constant([example.SerializeToString()]))
  assert value['outputs'].numpy()[0, 0] == pytest.approx(3.5, abs=0.1)


def test_dnn_regressor_fits_a_curve_a_line_cannot(tmp_path):
  """y = x^2: the DNN's error is a fraction of the linear model's."""
  rng = np.random.RandomState(0)
  path = _write_csv(tmp_path / 'curve.csv', ['x', 'y'],
                    [[x, x * x] for x in rng.uniform(-1, 1, 400)])

  class Deep(DNNRegressorSpec):
    label_key = 'y'
    hidden_units = [16, 16]
    checkpoint = None

  class Line(LinearRegressorSpec):
    label_key = 'y'
    learning_rate = 0.1
    checkpoint = None
  deep = Estimator(Deep, str(tmp_path / 'deep')).train(path, steps=300)
  line = Estimator(Line, str(tmp_path / 'line')).train(path, steps=300)
  assert deep['eval']['mean_absolute_error'] < (
      0.5 * line['eval']['mean_absolute_error'])


def test_wide_and_deep_sums_a_linear_part_and_a_dnn(tmp_path,
                                                    named_penguin_csvs):
  """The linear part reads the categories (one-hot), the DNN every feature;
  the head's layer reads both."""
  class Spec(DNNLinearCombinedClassifierSpec):
    label_key = 'species'
    dnn_hidden_units = [8]
    checkpoint = None
  est = Estimator(Spec, str(tmp_path))
  result = est.train(named_penguin_csvs[0], eval_data=named_penguin_csvs[1],
                     steps=100)
  assert result['eval']['accuracy'] >= 0.9
  model = est.spec.model
  assert model.get_layer('linear_inputs').output.shape[-1] == 3  # sex: 2+oov
  assert model.get_layer('dnn_inputs').output.shape[-1] == 4 + 8  # sex: 8-d
  assert model.get_layer('species_logits').input.shape[-1] == 3 + 8


@pytest.mark.parametrize('attrs, message', [
    ({'columns': {'wing_span': Numeric()}},
     r"PenguinDNN.columns names \['wing_span'\], which the data lacks\. "
     r'The schema has: bill_depth_mm, '),
    ({'feature_keys': ['bill_length_mm', 'wing_span']},
     r"TrainSpec.feature_keys names \['wing_span'\], which the data lacks."),
    ({'label_vocabulary': ['Adelie', 'Gentoo']},
     r"The label 'species' has the value\(s\) \['Chinstrap'\], which are not "
     r"in the label vocabulary \['Adelie', 'Gentoo'\] of the "
     r'BinaryClassHead'),
    ({'label_key': 'bill_length_mm', 'feature_keys': None},
     r"The label 'bill_length_mm' holds floats, which a classifier cannot "
     r'take as classes. Use a regressor spec'),
    ({'optimizer_name': 'newton'},
     r"PenguinDNN.optimizer_name must name a Keras optimizer \('adam', "),
    ({'hidden_units': [16, 0]},
     r'PenguinDNN hidden units must be a list of positive ints, one per '
     r'layer, e.g. \[64, 32\]. Received: \[16, 0\].'),
], ids=['unknown-column', 'unknown-feature-key', 'label-not-in-vocabulary',
        'float-label', 'unknown-optimizer', 'bad-hidden-units'])
def test_canned_mistakes_are_named(tmp_path, named_penguin_csvs, attrs,
                                   message):
  """Unknown features, labels outside the vocabulary, a float label for a
  classifier, an unknown optimizer, hidden units that are not sizes."""
  spec = type('PenguinDNN', (PenguinDNN,), attrs)
  with pytest.raises(SpecError, match=message):
    Estimator(spec, str(tmp_path)).train(named_penguin_csvs[0], steps=2)


def test_crossing_a_number_says_to_bucketize_it(tmp_path, named_penguin_csvs):
  """Only categories and buckets cross."""
  class Spec(DNNLinearCombinedClassifierSpec):
    label_key = 'species'
    crosses = [Crossed(['sex', 'body_mass_g'])]
  with pytest.raises(SpecError, match=(
      r"Crossed\('sex', 'body_mass_g'\) crosses 'body_mass_g', a Numeric "
      r'column; only categories and buckets cross. Give '
      r"columns=\{'body_mass_g': Bucketized\(num_buckets=10\)\}.")):
    Estimator(Spec, str(tmp_path)).train(named_penguin_csvs[0], steps=2)


def test_optional_features_are_filled_in(tmp_path):
  """A feature missing from some rows (sparse in the schema) is filled
  with 0 or '' and trains; serving takes examples without it."""
  rows = [[x, '' if i % 3 else 'a', int(x > 0)]
          for i, x in enumerate(np.random.RandomState(1).uniform(-1, 1, 90))]
  path = _write_csv(tmp_path / 'gaps.csv', ['x', 'tag', 'label'], rows)

  class Spec(DNNClassifierSpec):
    label_key = 'label'
    hidden_units = [4]
    checkpoint = None
  est = Estimator(Spec, str(tmp_path / 'model'))
  est.train(path, steps=10)
  assert est.predict(path).shape == (90, 1)
  assert 'predict' in tf.saved_model.load(est.export()).signatures


def test_wide_and_deep_parts_name_features_of_the_data(tmp_path,
                                                       named_penguin_csvs):
  """linear_feature_keys and dnn_feature_keys name features, like columns."""
  class Spec(DNNLinearCombinedClassifierSpec):
    label_key = 'species'
    dnn_feature_keys = ['bill_length_mm', 'wing_span']
  with pytest.raises(SpecError, match=(
      r"Spec.dnn_feature_keys names \['wing_span'\], which the data "
      r'lacks\.')):
    Estimator(Spec, str(tmp_path)).train(named_penguin_csvs[0], steps=2)


def test_a_misspelt_label_of_a_canned_classifier_gets_did_you_mean(
    tmp_path, named_penguin_csvs):
  """label_key = 'specie' in a notebook or a pipeline (no CSV header to
  look at first): the classifier's refusal offers 'species'."""
  class Misspelt(DNNClassifierSpec):
    label_key = 'specie'
  with pytest.raises(SpecError, match=(
      r"The label 'specie' \(TrainSpec.label_key\) is not a feature of the "
      r"data \(did you mean 'species'\?\)\. Expected one of the schema's "
      'features: ')):
    Estimator(Misspelt, str(tmp_path)).train(named_penguin_csvs[0], steps=2)


def _churn_csv(path, rows=120):
  """A churn table as a user writes one: an ID per row, a signup date,
  a plan, a price, yes/no labels."""
  random = np.random.RandomState(3)
  first = datetime.date(2023, 1, 1)
  table = [[f'C{10000 + i}', str(first + datetime.timedelta(days=i)),
            ['basic', 'plus', 'pro'][i % 3], [9.99, 19.99, 39.99][i % 3],
            int(random.randint(1, 60)), 'yes' if random.rand() < 0.3 else 'no']
           for i in range(rows)]
  return _write_csv(path, ['customer_id', 'signup_date', 'plan',
                           'monthly_price', 'tenure_months', 'churned'], table)


def test_a_canned_spec_lists_its_columns_and_flags_ids_and_dates(tmp_path):
  """Through the command: the canned spec lists each feature with its
  column before it trains, and warns that customer_id (one value per row)
  and signup_date (dates) are categories that hold for no new row, with
  the `columns` line that leaves each out."""
  data = _churn_csv(tmp_path / 'churn.csv')
  module = tmp_path / 'churn_spec.py'
  module.write_text(
      'from generic_trainer.canned import DNNClassifierSpec\n\n'
      'class Spec(DNNClassifierSpec):\n'
      "  label_key = 'churned'\n"
      '  hidden_units = [4]\n')
  proc = subprocess.run(
      [sys.executable, '-m', 'generic_trainer', '--train-data', data,
       '--module-file', str(module), '--steps', '2', '--output-dir',
       str(tmp_path / 'out')], capture_output=True, text=True,
      env=command_env(), cwd=str(tmp_path), timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr
  lines = proc.stderr.splitlines()
  start = lines.index("Spec reads 5 features (columns={name: ...} changes "
                      'one, columns={name: None} leaves it out):')
  held_out = re.search(r'(\d+) of 120 rows', proc.stdout + proc.stderr)
  rows = 120 - int(held_out.group(1))  # The train rows of the hash split.
  assert lines[start + 1:start + 6] == [
      f'  customer_id    Categorical, {rows} values from the sample',
      '  monthly_price  Numeric, normalised from the sample',
      '  plan           Categorical, 3 values from the sample',
      f'  signup_date    Categorical, {rows} values from the sample',
      '  tenure_months  Numeric, normalised from the sample']
  warned = [l for l in lines if l.startswith('WARNING: ')]
  assert (f"WARNING: 'customer_id' looks like an ID: {rows} distinct values "
          f'in {rows} rows of the sample, one per row or nearly; the model learns each '
          "row apart, and a new row's customer_id is a value it has never "
          "seen. Expected features that hold for new rows. Received: "
          "'customer_id' read as Categorical. Leave it out: "
          "columns={'customer_id': None}.") in warned
  date = [l for l in warned if l.startswith("WARNING: 'signup_date' looks "
                                             'like dates (')]
  assert len(date) == 1 and date[0].endswith(
      "Leave it out (columns={'signup_date': None}), or write numbers from "
      'it into the data (days since it, its month or weekday) and train on '
      'those.')
  assert_four_parts(date[0][len('WARNING: '):])


def test_columns_none_leaves_the_id_and_the_date_out_unflagged(tmp_path):
  """The fix the warnings give trains without them: no warning, and the
  block lists the three features left."""
  data = _churn_csv(tmp_path / 'churn.csv')

  class Spec(DNNClassifierSpec):
    label_key = 'churned'
    hidden_units = [4]
    columns = {'customer_id': None, 'signup_date': None}
    checkpoint = None
  records = []
  handler = logging.Handler()
  handler.emit = records.append
  progress.log().addHandler(handler)
  try:
    Estimator(Spec, str(tmp_path / 'model')).train(data, steps=2)
  finally:
    progress.log().removeHandler(handler)
  said = [r.getMessage() for r in records]
  assert [m for m in said if m.startswith('Spec reads ')] == [
      'Spec reads 3 features (columns={name: ...} changes one, '
      'columns={name: None} leaves it out):\n'
      '  monthly_price  Numeric, normalised from the sample\n'
      '  plan           Categorical, 3 values from the sample\n'
      '  tenure_months  Numeric, normalised from the sample']
  assert not [m for m in said if 'looks like' in m]


def test_a_price_written_with_a_dollar_sign_is_flagged_with_the_fix(
    tmp_path):
  """'$19.99' in a feature column is text, so a category: the spec warns
  that the amounts are unordered categories, with the pandas line that
  writes them as numbers."""
  rows = [[['basic', 'plus', 'pro'][i % 3],
           ['$9.99', '$19.99', '$1,039.99'][i % 3], 'yes' if i % 4 else 'no']
          for i in range(60)]
  data = _write_csv(tmp_path / 'prices.csv', ['plan', 'price', 'churned'],
                    rows)

  class Spec(DNNClassifierSpec):
    label_key = 'churned'
    hidden_units = [4]
    checkpoint = None
  records = []
  handler = logging.Handler()
  handler.emit = records.append
  progress.log().addHandler(handler)
  try:
    Estimator(Spec, str(tmp_path / 'model')).train(data, steps=2)
  finally:
    progress.log().removeHandler(handler)
  warned = [r.getMessage() for r in records if r.levelno == logging.WARNING
            and 'written as text' in r.getMessage()]
  assert len(warned) == 1, [r.getMessage() for r in records]
  assert warned[0].startswith("'price' holds numbers written as text (")
  assert warned[0].endswith(
      "Write the column as plain numbers in the data: with pandas, "
      "df['price'] = df['price'].str.replace(r'[$,]', '', regex=True)"
      ".astype(float); df.to_csv('clean.csv', index=False).")
  assert_four_parts(warned[0])
