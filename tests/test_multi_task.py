"""Multi-task specs: several labels, a loss and metrics per output, loss
weights, a weight column; checked per output before training, served and
recorded per output."""

import os
import textwrap

import keras
import pytest
import tensorflow as tf

from generic_trainer import Estimator, SpecError, TrainSpec, heads
from generic_trainer.canned import DNNSpec
from spec_fixtures import FEATURES
from test_heads import SPECIES, named_penguin_csvs  # pylint: disable=unused-import


class TwoTasks(TrainSpec):
  """Species (ids) and whether it is a Gentoo, from one shared body."""
  label_key = ['species', 'is_gentoo']
  feature_keys = FEATURES
  loss_weights = {'species': 1.0, 'is_gentoo': 0.5}
  batch_size = 20
  epochs = 2
  checkpoint = None

  def build_model(self):
    inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURES}
    x = keras.layers.Concatenate()([inputs[k] for k in FEATURES])
    x = keras.layers.BatchNormalization(momentum=0.8)(x)
    x = keras.layers.Dense(8, activation='relu')(x)
    return keras.Model(inputs, {
        'species': keras.layers.Dense(3, activation='softmax')(x),
        'is_gentoo': keras.layers.Dense(1, activation='sigmoid')(x)})

  def build_optimizer(self):
    return keras.optimizers.Adam(0.02)

  def build_loss(self):
    return {'species': keras.losses.SparseCategoricalCrossentropy(),
            'is_gentoo': keras.losses.BinaryCrossentropy()}

  def build_metrics(self):
    return {'species': [keras.metrics.SparseCategoricalAccuracy()],
            'is_gentoo': [keras.metrics.BinaryAccuracy()]}

  def preprocess(self, features):
    return {k: keras.ops.cast(v, 'float32') for k, v in features.items()}


def test_two_outputs_train_with_a_loss_and_metrics_each(tmp_path,
                                                        penguin_csvs):
  """Each output's loss and metrics are in the result, prefixed with its
  name; serving returns both outputs by name."""
  est = Estimator(TwoTasks, str(tmp_path))
  result = est.train(penguin_csvs[0], eval_data=penguin_csvs[1], steps=60)
  assert {'loss', 'species_loss', 'is_gentoo_loss',
          'species_sparse_categorical_accuracy',
          'is_gentoo_binary_accuracy'} == set(result['eval'])
  assert result['eval']['species_sparse_categorical_accuracy'] >= 0.9
  assert result['eval']['is_gentoo_binary_accuracy'] >= 0.9
  serving = tf.saved_model.load(est.export()).signatures['serving_default']
  assert set(serving.structured_outputs) == {'species', 'is_gentoo'}


@pytest.mark.parametrize('attrs, message', [
    ({'build_model': lambda self: keras.Model(
        *(lambda i: (i, keras.layers.Dense(3)(keras.layers.Concatenate()(
            list(i.values())))))({k: keras.Input(shape=(1,), name=k)
                                  for k in FEATURES}))},
     r"The spec has 2 labels \['species', 'is_gentoo'\], so the model must "
     r'output a dict with one output per label, keyed by label. Its outputs: '
     r'float32\[20, 3\].'),
    ({'build_loss': lambda self: {
        'species': keras.losses.SparseCategoricalCrossentropy()}},
     r"build_loss\(\) is keyed by \['species'\] but the outputs are "
     r"\['species', 'is_gentoo'\]; it lacks \['is_gentoo'\]. Give one entry "
     'per output, keyed by its label.'),
    ({'loss_weights': {'species': 1.0, 'gentoo': 2.0}},
     r"TrainSpec.loss_weights names 'gentoo', which is not an output. The "
     r"outputs: \['species', 'is_gentoo'\]."),
    ({'build_metrics': lambda self: [keras.metrics.BinaryAccuracy()]},
     r'With several outputs, build_metrics\(\) must return a dict of metric '
     r"lists keyed by output \(\['species', 'is_gentoo'\]\)"),
    ({'label_key': ['is_gentoo', 'species'], 'build_loss': lambda self: {
        'species': keras.losses.BinaryCrossentropy(),
        'is_gentoo': keras.losses.SparseCategoricalCrossentropy()}},
     r"Output 'is_gentoo': The labels go up to 1 but the model has 1 output "
     r'unit\(s\): SparseCategoricalCrossentropy needs one unit per class'),
    ({'build_metrics': lambda self: {'species': [
        keras.metrics.BinaryIoU(target_class_ids=[0, 1])]}},
     r"Output 'species': The model outputs do not fit the loss or metrics: "
     r'.*Model outputs: float32\[20, 3\]; labels: int64\[20, 1\]'),
    ({'weight_key': 'weight'},
     r"The weight column 'weight' \(weight_key\) is not a feature of the "
     r'data. The schema has: bill_depth_mm, '),
], ids=['outputs-not-a-dict', 'loss-missing-an-output', 'unknown-loss-weight',
        'metrics-not-a-dict', 'labels-beyond-units', 'metric-does-not-fit',
        'unknown-weight-key'])
def test_each_output_is_checked_before_training(tmp_path, penguin_csvs,
                                                attrs, message):
  """A model output, loss, weight or metric that does not fit an output is
  named with that output before any training step."""
  spec = type('Spec', (TwoTasks,), attrs)
  with pytest.raises(SpecError, match=message):
    Estimator(spec, str(tmp_path)).train(penguin_csvs[0], steps=2)


@pytest.mark.parametrize('attrs, message', [
    ({'label_key': ['species', 'sex'], 'head': heads.MultiClassHead(3)},
     r"TrainSpec.head is one MultiClassHead but label_key names 2 labels "
     r"\['species', 'sex'\]. Give a head per label: head = \{'species': "
     r"..., 'sex': ...\}."),
    ({'label_key': ['species'], 'head': {'sex': heads.BinaryClassHead()}},
     r"TrainSpec.head has a head for the labels \['sex'\] but label_key is "
     r"\['species'\]. With a head per output, the labels are the head "
     r"dict's keys: leave label_key unset, or make them agree."),
], ids=['one-head-two-labels', 'heads-not-the-labels'])
def test_heads_and_labels_must_agree(tmp_path, named_penguin_csvs, attrs,
                                     message):
  """A head per label, named as the labels."""
  spec = type('Spec', (TaskHeads,), attrs)
  with pytest.raises(SpecError, match=message):
    Estimator(spec, str(tmp_path)).train(named_penguin_csvs[0], steps=2)


class TaskHeads(DNNSpec):
  """Species and sex, a head each, on one canned DNN."""
  head = {'species': heads.MultiClassHead(label_vocabulary=SPECIES),
          'sex': heads.BinaryClassHead(label_vocabulary=['female', 'male'])}
  hidden_units = [16]
  checkpoint = None


def test_a_head_per_output_trains_and_serves_each_head(tmp_path,
                                                       named_penguin_csvs):
  """Each head's metrics, each head's Classify signature, and one predict
  signature with every head's predictions."""
  est = Estimator(TaskHeads, str(tmp_path))
  result = est.train(named_penguin_csvs[0], eval_data=named_penguin_csvs[1],
                     steps=150)
  assert result['eval']['species_accuracy'] >= 0.9
  assert result['eval']['sex_accuracy'] >= 0.7
  assert 'sex_auc' in result['eval']
  loaded = tf.saved_model.load(est.export())
  assert {'predict', 'species/classification', 'sex/classification',
          'sex/regression'} <= set(loaded.signatures)
  predict = loaded.signatures['predict'].structured_outputs
  assert {'species', 'sex', 'species/classes', 'sex/logistic'} <= set(predict)


def test_multi_task_results_reach_the_model_artifact(trainer_io, tmp_path):
  """Through GenericExecutor, each output's metrics become custom
  properties of the Model and ModelRun artifacts."""
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  module = tmp_path / 'two_heads.py'
  module.write_text(textwrap.dedent('''
      from generic_trainer import heads
      from generic_trainer.canned import DNNSpec

      class Spec(DNNSpec):
        head = {'species': heads.MultiClassHead(3),
                'flipper_length_mm': heads.RegressionHead()}
        loss_weights = {'species': 1.0, 'flipper_length_mm': 1e-3}
        hidden_units = [8]
  '''))
  io = trainer_io(train_steps=20, eval_steps=0, module_file=str(module))
  GenericExecutor().Do(*io)
  for artifact in (io[1]['model'][0], io[1]['model_run'][0]):
    assert 0 <= artifact.get_float_custom_property(
        'eval_species_accuracy') <= 1
    assert artifact.get_float_custom_property(
        'eval_flipper_length_mm_mean_absolute_error') > 0
  assert os.path.exists(os.path.join(io[1]['model'][0].uri, 'Format-Serving',
                                     'saved_model.pb'))
