"""Heads: each one's output layer, loss, metrics, labels, predictions and
signatures; and a TrainSpec that declares one instead of its own output
layer and loss."""

import csv
import os
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from generic_trainer import Estimator, SpecError, TrainSpec, heads
from conftest import load_run_fn
from spec_fixtures import FEATURES

SPECIES = ['Adelie', 'Chinstrap', 'Gentoo']


def _built(head, name='label', width=4):
  """(model with the head on a Dense body, logits layer's model)."""
  inputs = keras.Input(shape=(3,), name='x')
  hidden = keras.layers.Dense(width)(inputs)
  model = keras.Model(inputs, head.output(hidden, name))
  return model, keras.Model(inputs, model.get_layer(f'{name}_logits').output)


def _predictions(head, rows=5):
  model, logits_model = _built(head)
  x = np.random.RandomState(0).rand(rows, 3).astype('float32')
  return head.predictions(logits_model(x), model(x))


def test_binary_head_outputs_one_probability():
  """One unit, a sigmoid; binary cross-entropy; the estimator's metrics."""
  head = heads.BinaryClassHead()
  model, logits_model = _built(head)
  assert model.output.shape == (None, 1)
  x = np.ones((2, 3), 'float32')
  np.testing.assert_allclose(model(x), keras.ops.sigmoid(logits_model(x)),
                             rtol=1e-6)
  assert isinstance(head.build_loss(), keras.losses.BinaryCrossentropy)
  assert [m.name for m in head.build_metrics()] == [
      'accuracy', 'auc', 'auc_precision_recall', 'precision', 'recall']


def test_binary_head_predictions_and_signatures():
  """Class ids follow the threshold; names come from the vocabulary;
  Classify gets both classes' scores, Regress the probability of class 1."""
  head = heads.BinaryClassHead(label_vocabulary=['no', 'yes'], threshold=0.3)
  p = _predictions(head)
  logistic = p['logistic'].numpy()
  np.testing.assert_array_equal(p['class_ids'].numpy(), logistic > 0.3)
  np.testing.assert_allclose(p['probabilities'].numpy().sum(axis=1), 1,
                             rtol=1e-6)
  assert [c.decode() for c in p['classes'].numpy().ravel()] == [
      'yes' if v > 0.3 else 'no' for v in logistic.ravel()]
  assert p['all_classes'].numpy()[0].tolist() == [b'no', b'yes']
  signatures = head.signature_outputs(p)
  assert signatures['classification']['scores'].shape == (5, 2)
  assert signatures['classification']['classes'].shape == (5, 2)
  assert signatures['regression']['outputs'].shape == (5, 1)


def test_binary_head_refuses_labels_other_than_0_and_1():
  """Labels must be 0/1 without a vocabulary, names with one."""
  head = heads.BinaryClassHead()
  with pytest.raises(SpecError, match=(
      r"The label 'label' has the value\(s\) \[2\], outside the class ids "
      r'0..1 of the BinaryClassHead \(n_classes=2\). Raise n_classes, or '
      r'map the labels to 0..n_classes-1.')):
    head.check_labels(np.array([[0], [1], [2]]), 'label')
  with pytest.raises(SpecError, match=(
      r"The label 'label' holds strings \(e.g. 'yes'\), which the "
      r'BinaryClassHead reads only with a label_vocabulary')):
    head.check_labels(np.array([[b'yes']], dtype=object), 'label')


def test_multi_class_head_counts_classes_from_the_vocabulary():
  """n_classes is the vocabulary's length; a different one is refused."""
  head = heads.MultiClassHead(label_vocabulary=SPECIES)
  assert head.n_classes == 3 and head.logits_dimension == 3
  assert isinstance(head.build_loss(),
                    keras.losses.SparseCategoricalCrossentropy)
  assert [m.name for m in head.build_metrics()] == ['accuracy']
  with pytest.raises(SpecError, match=(
      r"MultiClassHead has n_classes=4 but a label_vocabulary of 3 names: "
      r"\['Adelie', 'Chinstrap', 'Gentoo'\]. Give one name per class, or "
      'leave n_classes unset.')):
    heads.MultiClassHead(n_classes=4, label_vocabulary=SPECIES)
  with pytest.raises(SpecError, match=(
      r'MultiClassHead needs n_classes, an int of at least 2, or a '
      r'label_vocabulary of the class names. Received: n_classes=None')):
    heads.MultiClassHead()


@pytest.mark.parametrize('make, message', [
    (lambda: heads.BinaryClassHead(label_vocabulary=['yes', 'yes']),
     r"BinaryClassHead label_vocabulary names \['yes'\] more than once; each "
     r"class needs one name. Received: label_vocabulary=\['yes', 'yes'\]."),
    (lambda: heads.BinaryClassHead(label_vocabulary='yes'),
     r'BinaryClassHead label_vocabulary must be a list of strings, the class '
     r"names in class id order. Received: label_vocabulary='yes'."),
    (lambda: heads.BinaryClassHead(threshold=1.5),
     r'BinaryClassHead threshold must be between 0 and 1. Received: '
     r'threshold=1.5.'),
    (lambda: heads.MultiLabelHead(n_classes=1),
     r'MultiLabelHead needs n_classes, an int of at least 2, or a '
     r'label_vocabulary of that many class names'),
    (lambda: heads.RegressionHead(label_dimension=0),
     r'RegressionHead label_dimension must be a positive int. Received: '
     r'label_dimension=0.'),
], ids=['repeated-name', 'vocabulary-not-a-list', 'threshold',
        'one-label-class', 'label-dimension'])
def test_head_arguments_are_checked(make, message):
  """A head's arguments are checked when it is made (the module's import)."""
  with pytest.raises(SpecError, match=message):
    make()


def test_multi_class_head_maps_names_to_ids():
  """Names become their index in the vocabulary, in the input pipeline."""
  head = heads.MultiClassHead(label_vocabulary=SPECIES)
  ids = head.encode_labels(tf.constant([['Gentoo'], ['Adelie']]))
  assert ids.numpy().tolist() == [[2], [0]]
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='A label value is not in the label vocabulary'):
    head.encode_labels(tf.constant([['Emperor']]))


def test_label_not_in_the_vocabulary_is_named():
  """The checks before training name the values the vocabulary lacks."""
  head = heads.MultiClassHead(label_vocabulary=['Adelie', 'Gentoo'])
  with pytest.raises(SpecError, match=(
      r"The label 'species' has the value\(s\) \['Chinstrap'\], which are "
      r"not in the label vocabulary \['Adelie', 'Gentoo'\] of the "
      r'MultiClassHead. Add them to label_vocabulary \(in class id order\), '
      'or leave label_vocabulary unset in a canned spec to read the classes '
      'from the data.')):
    head.check_labels(np.array([[b'Adelie'], [b'Chinstrap']], dtype=object),
                      'species')


def test_multi_class_head_predictions_and_classification_signature():
  """Class ids are the argmax; Classify gets every class and its score."""
  head = heads.MultiClassHead(label_vocabulary=SPECIES)
  p = _predictions(head)
  probabilities = p['probabilities'].numpy()
  np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-6)
  assert p['class_ids'].numpy().ravel().tolist() == probabilities.argmax(
      axis=1).tolist()
  assert p['all_class_ids'].numpy()[0].tolist() == [0, 1, 2]
  assert set(head.signature_outputs(p)) == {'classification'}


def test_multi_label_head_reads_lists_of_classes_as_multi_hot():
  """Class lists (names or ids, of any length) become multi-hot rows;
  dense rows of n_classes 0/1 values are multi-hot already."""
  head = heads.MultiLabelHead(label_vocabulary=['a', 'b', 'c'])
  names = tf.sparse.from_dense(tf.constant([['a', 'c'], ['b', '']]))
  assert head.encode_labels(names).numpy().tolist() == [[1, 0, 1], [0, 1, 0]]
  ids = tf.ragged.constant([[2], [0, 1]], dtype=tf.int64)
  assert head.encode_labels(ids).numpy().tolist() == [[0, 0, 1], [1, 1, 0]]
  multi_hot = tf.constant([[1, 1, 0]], tf.int64)
  assert head.encode_labels(multi_hot).numpy().tolist() == [[1, 1, 0]]
  assert head.build_metrics()[1].num_labels == 3
  p = _predictions(head)
  assert p['probabilities'].shape == (5, 3)
  assert set(head.signature_outputs(p)) == {'classification'}
  with pytest.raises(SpecError, match=(
      r"The label 'tags' has the value\(s\) \[5\], which are not class ids "
      r'0..2 of the MultiLabelHead')):
    heads.MultiLabelHead(n_classes=3).check_labels(
        tf.ragged.constant([[5]]), 'tags')


def test_regression_head_outputs_numbers():
  """Linear outputs, mean squared error; Regress only for one number."""
  head = heads.RegressionHead()
  p = _predictions(head)
  assert p['predictions'].shape == (5, 1)
  assert set(head.signature_outputs(p)) == {'regression'}
  assert isinstance(head.build_loss(), keras.losses.MeanSquaredError)
  two = heads.RegressionHead(label_dimension=2)
  assert head.encode_labels(tf.constant([3, 4])).dtype == tf.float32
  assert two.signature_outputs(_predictions(two)) == {}
  with pytest.raises(SpecError, match=(
      r"The label 'mass' holds 1 number\(s\) per example but the "
      r'RegressionHead has label_dimension=2. Set label_dimension=1.')):
    two.check_labels(np.array([[1.0]]), 'mass')
  with pytest.raises(SpecError, match=(
      r"The label 'mass' holds object values, which a RegressionHead cannot "
      r'learn: it needs numbers.')):
    head.check_labels(np.array([[b'heavy']], dtype=object), 'mass')


# A TrainSpec with a head: the body is the spec's, the rest the head's.
class _Body(TrainSpec):
  """Species (names) from the four measurements: a body and a head."""
  label_key = 'species'
  head = heads.MultiClassHead(label_vocabulary=SPECIES)
  batch_size = 20
  epochs = 2
  checkpoint = None

  def build_model(self):
    inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURES}
    x = keras.layers.Concatenate()([inputs[k] for k in FEATURES])
    x = keras.layers.BatchNormalization(momentum=0.8)(x)
    return keras.Model(inputs, keras.layers.Dense(8, activation='relu')(x))

  def build_optimizer(self):
    return keras.optimizers.Adam(0.02)

  def preprocess(self, features):
    return {k: keras.ops.cast(v, 'float32') for k, v in features.items()}


@pytest.fixture(scope='module')
def named_penguin_csvs(tmp_path_factory):
  """(train.csv, eval.csv) of the penguins, species by name, with `sex`."""
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp('named_penguins')
  with open(write_penguin_csv(str(root / 'all'), string_labels=True,
                              sex=True)) as f:
    rows = list(csv.DictReader(f))
  paths = []
  for name, part in (('train', rows[0::3] + rows[1::3]), ('eval', rows[2::3])):
    path = root / f'{name}.csv'
    with open(path, 'w', newline='') as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(part)
    paths.append(str(path))
  return tuple(paths)


def test_spec_with_a_head_trains_on_names_and_exports_its_signatures(
    tmp_path, named_penguin_csvs):
  """build_model gives the body; the head adds the output layer, loss,
  metrics, and the predict and classification signatures."""
  train_csv, eval_csv = named_penguin_csvs

  class Spec(_Body):
    feature_keys = FEATURES

  est = Estimator(Spec, str(tmp_path))
  result = est.train(train_csv, eval_data=eval_csv, steps=60)
  assert est.spec.model.output.shape == (None, 3)
  assert set(result['eval']) == {'loss', 'accuracy'}
  assert result['eval']['accuracy'] >= 0.9
  loaded = tf.saved_model.load(est.export())
  assert {'serving_default', 'serving_raw', 'predict', 'classification'} <= (
      set(loaded.signatures))
  predict = loaded.signatures['predict'].structured_outputs
  assert {'logits', 'probabilities', 'class_ids', 'classes', 'all_class_ids',
          'all_classes'} == set(predict)


def test_head_and_build_loss_both_given_is_refused(tmp_path):
  """A spec with a head and its own build_loss is refused at load."""
  path = tmp_path / 'both.py'
  path.write_text(textwrap.dedent('''
      import keras
      from generic_trainer import heads
      from spec_fixtures import PenguinSpec
      class Spec(PenguinSpec):
        head = heads.MultiClassHead(3)
  '''))
  message = (
      r'The TrainSpec (Spec|Both) declares both a head and build_loss\(\): a '
      r'head brings the loss of its kind of problem, so one of the two losses '
      r"would be silently ignored. Remove build_loss\(\) to use the head's "
      r'loss, or remove head and give the output layer, loss and metrics '
      r'yourself.')
  with pytest.raises(SpecError, match=message):
    load_run_fn({'module_file': str(path)})

  class Both(_Body):
    def build_loss(self):
      return keras.losses.SparseCategoricalCrossentropy()
  with pytest.raises(SpecError, match=message):
    Estimator(Both, str(tmp_path))


def test_spec_without_loss_or_head_names_both():
  """Without build_loss, the missing member says a head would do."""
  from generic_trainer.trainspec.spec import missing_members  # pylint: disable=g-import-not-at-top

  class Bare(TrainSpec):
    label_key = 'species'
    def build_model(self):
      pass
    def build_optimizer(self):
      pass
  assert missing_members(Bare) == ['build_loss (or a head)']
  assert missing_members(type('Headed', (Bare,), {
      'head': heads.BinaryClassHead()})) == []


def test_head_must_be_a_head(tmp_path, named_penguin_csvs):
  """A head that is not one of ours is named."""
  class Spec(_Body):
    head = keras.layers.Dense(3)
  with pytest.raises(SpecError, match=(
      r"TrainSpec.head for 'species' must be a head from "
      r'generic_trainer.heads \(BinaryClassHead, MultiClassHead, '
      r'MultiLabelHead, RegressionHead\). Received: <Dense')):
    Estimator(Spec, str(tmp_path)).train(named_penguin_csvs[0], steps=2)


def test_body_must_be_functional(tmp_path, named_penguin_csvs):
  """A head needs the body's symbolic output to attach its layer."""
  class Spec(_Body):
    def build_model(self):
      return keras.Sequential([keras.layers.Dense(4)])
  with pytest.raises(SpecError, match=(
      r'With a head, build_model\(\) must return a functional keras.Model '
      r'whose output is the last hidden layer')):
    Estimator(Spec, str(tmp_path)).train(named_penguin_csvs[0], steps=2)


def test_weight_key_weighs_examples_in_the_loss(tmp_path):
  """Examples of weight 0 do not count: with the labels of half the rows
  flipped at weight 0, the head still learns the true rule."""
  rng = np.random.RandomState(0)
  path = tmp_path / 'weighted.csv'
  with open(path, 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['x', 'label', 'weight'])
    for i in range(400):
      x = rng.uniform(-1, 1)
      noisy = i % 2 == 0
      writer.writerow([x, int((x > 0) != noisy), 0.0 if noisy else 1.0])

  class Weighted(TrainSpec):
    label_key = 'label'
    weight_key = 'weight'
    head = heads.BinaryClassHead()
    epochs = 4
    checkpoint = None
    def build_model(self):
      x = keras.Input(shape=(1,), name='x')
      return keras.Model({'x': x}, keras.layers.Dense(4, activation='tanh')(x))
    def build_optimizer(self):
      return keras.optimizers.Adam(0.05)

  est = Estimator(Weighted, str(tmp_path / 'model'))
  est.train(str(path), steps=200)
  probabilities = est.predict(str(path))
  xs = np.array([float(r['x']) for r in csv.DictReader(open(path))])
  assert ((probabilities.ravel() > 0.5) == (xs > 0)).mean() > 0.95
