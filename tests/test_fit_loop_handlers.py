"""The fit loop's handlers: each one's behaviour, and the order of the hooks;
a monitored metric the model does not log, and a train_step that returns no
logs, refused."""

import csv
import json
import logging
import os

import keras
import numpy as np
import pytest

from generic_trainer import Estimator, NonFiniteLossError
from spec_fixtures import BestOnlySpec, FEATURES, PenguinSpec


class Recorder(keras.callbacks.Callback):
  """Records every hook call as (hook, index)."""

  def __init__(self):
    super().__init__()
    self.calls = []

  def __getattribute__(self, name):
    if name.startswith('on_') and not name.endswith(('_predict_begin',)):
      calls = object.__getattribute__(self, 'calls')
      return lambda *args, **kwargs: calls.append(
          (name,) + tuple(a for a in args[:1] if isinstance(a, int)))
    return object.__getattribute__(self, name)


def test_hooks_are_called_in_order(tmp_path, penguin_csvs):
  """The full ordered list of hook calls for 2 epochs of 2 steps."""
  recorder = Recorder()

  class Spec(PenguinSpec):
    def handlers(self):
      return [recorder]

  train_csv, eval_csv = penguin_csvs
  Estimator(Spec, str(tmp_path)).train(train_csv, eval_data=eval_csv, steps=4)
  # 114 eval examples in batches of 64: two eval batches. Keras does not
  # know the eval dataset's length, so it begins a third batch, finds the
  # data exhausted, and ends the eval pass without on_test_batch_end: do
  # per-batch work in the *_end hooks.
  evaluation = [('on_test_begin',),
                ('on_test_batch_begin', 0), ('on_test_batch_end', 0),
                ('on_test_batch_begin', 1), ('on_test_batch_end', 1),
                ('on_test_batch_begin', 2), ('on_test_end',)]
  epoch = lambda i: ([('on_epoch_begin', i),
                      ('on_train_batch_begin', 0), ('on_train_batch_end', 0),
                      ('on_train_batch_begin', 1), ('on_train_batch_end', 1)]
                     + evaluation + [('on_epoch_end', i)])
  assert recorder.calls == ([('on_train_begin',)] + epoch(0) + epoch(1) +
                            [('on_train_end',)])


def test_early_stopping_stops_when_val_loss_stalls(tmp_path, penguin_csvs):
  """With a frozen model val_loss cannot improve: stops after patience."""
  class Frozen(PenguinSpec):
    epochs = 10
    early_stopping = {'monitor': 'val_loss', 'patience': 1, 'min_delta': 1e-3}

    def build_model(self):
      model = super().build_model()
      model.trainable = False  # Also freezes BatchNormalization's statistics.
      return model

  est = Estimator(Frozen, str(tmp_path))
  result = est.train(penguin_csvs[0], eval_data=penguin_csvs[1], steps=50)
  assert result['epochs'] == 2, result
  with open(os.path.join(est.run_dir, 'history.json')) as f:
    assert [e['epoch'] for e in json.load(f)] == [1, 2]


def test_checkpoint_best_only_keeps_the_best_epoch(tmp_path, penguin_csvs):
  """best_only keeps the weights of the epoch with the lowest val_loss, not
  the last, when later epochs get worse."""
  est = Estimator(BestOnlySpec, str(tmp_path))
  est.train(penguin_csvs[0], eval_data=penguin_csvs[1], steps=8)
  with open(os.path.join(est.run_dir, 'history.json')) as f:
    val_losses = [e['val_loss'] for e in json.load(f)]
  assert min(val_losses[:2]) < min(val_losses[2:])
  checkpoints = os.path.join(est.run_dir, 'checkpoints')
  assert os.listdir(checkpoints) == ['best.weights.h5']
  est.spec.model.load_weights(os.path.join(checkpoints, 'best.weights.h5'))
  assert est.evaluate(penguin_csvs[1])['loss'] == pytest.approx(
      min(val_losses), rel=1e-4)


def test_checkpoint_every_steps(tmp_path, penguin_csvs):
  """every_steps writes a checkpoint every N batches."""
  class Spec(PenguinSpec):
    epochs = 1
    checkpoint = {'every_steps': 2}

  est = Estimator(Spec, str(tmp_path))
  est.train(penguin_csvs[0], steps=6)
  assert sorted(os.listdir(os.path.join(est.run_dir, 'checkpoints'))) == [
      f'epoch-001-batch-00000{i}.weights.h5' for i in (2, 4, 6)]


def test_nan_guard_stops_with_a_clear_error(tmp_path, penguin_csvs):
  """A loss that turns NaN at step 4 stops training there, with an error."""
  class Diverging(PenguinSpec):
    epochs = 1
    steps_per_execution = 1

    def build_loss(self):
      cross_entropy = keras.losses.SparseCategoricalCrossentropy()
      optimizer = self.optimizer  # State shared on the spec.

      def loss(labels, outputs):
        poison = keras.ops.where(optimizer.iterations >= 3, np.nan, 0.0)
        return cross_entropy(labels, outputs) + poison
      return loss

  est = Estimator(Diverging, str(tmp_path))
  est.checkpoint_dir = str(tmp_path / 'resume')
  with pytest.raises(NonFiniteLossError, match=(
      r'The training loss became nan at step 4 \(epoch 1, batch 4\). Training '
      r'stopped and nothing was exported')):
    est.train(penguin_csvs[0], steps=20)
  assert int(est.spec.optimizer.iterations.numpy()) == 4
  # The diverged weights Keras saved at the epoch's end are not kept for a
  # retry to resume from.
  assert not os.path.exists(tmp_path / 'resume')


def test_eval_auc_is_over_the_whole_eval_split(tmp_path, penguin_csvs):
  """The fit loop's eval AUC equals AUC computed on all eval examples at once
  (not a mean of per-batch AUCs)."""
  class Gentoo(PenguinSpec):
    """Is it a Gentoo, from the body mass alone (overlapping classes)."""
    label_key = 'is_gentoo'
    feature_keys = ['body_mass_g']
    eval_batch_size = 10
    epochs = 1

    def build_model(self):
      inputs = {'body_mass_g': keras.Input(shape=(1,),
                                           name='body_mass_g')}
      x = keras.layers.BatchNormalization(momentum=0.5)(
          inputs['body_mass_g'])
      # Zero start: the data, not the random init, sets the direction.
      x = keras.layers.Dense(1, activation='sigmoid',
                             kernel_initializer='zeros')(x)
      return keras.Model(inputs, x)

    def build_loss(self):
      return keras.losses.BinaryCrossentropy()

    def build_metrics(self):
      return [keras.metrics.AUC(name='auc')]

  train_csv, eval_csv = penguin_csvs
  est = Estimator(Gentoo, str(tmp_path))
  result = est.train(train_csv, eval_data=eval_csv, steps=30)
  assert 0.6 < result['eval']['auc'] < 1.0, result
  with open(eval_csv) as f:
    labels = np.array([float(r['is_gentoo']) for r in csv.DictReader(f)])
  scores = est.predict(eval_csv)[:, 0]
  at_once = keras.metrics.AUC()
  at_once.update_state(labels, scores)
  assert result['eval']['auc'] == pytest.approx(float(at_once.result()),
                                                abs=1e-6)
  per_batch = []
  for i in range(0, len(labels), 10):
    metric = keras.metrics.AUC()
    metric.update_state(labels[i:i + 10], scores[i:i + 10])
    per_batch.append(float(metric.result()))
  assert np.mean(per_batch) != pytest.approx(result['eval']['auc'], abs=1e-6)


def test_custom_train_step_is_used(tmp_path, penguin_csvs):
  """A spec's train_step replaces the default one for every step."""
  class Counting(PenguinSpec):
    epochs = 1

    def __init__(self, *args, **kwargs):
      super().__init__(*args, **kwargs)
      self.steps_seen = keras.Variable(0, dtype='int64', trainable=False)

    def train_step(self, model, data):
      self.steps_seen.assign_add(1)
      return keras.Model.train_step(model, data)

  est = Estimator(Counting, str(tmp_path))
  est.train(penguin_csvs[0], steps=5)
  assert int(est.spec.steps_seen.numpy()) == 5


def test_log_lines_when_not_a_terminal(tmp_path, penguin_csvs, caplog):
  """Outside a terminal, progress goes to plain log lines, one per epoch."""
  caplog.set_level(logging.INFO, logger='absl')
  Estimator(PenguinSpec, str(tmp_path)).train(penguin_csvs[0], steps=4)
  lines = [r.getMessage() for r in caplog.records
           if r.getMessage().startswith('epoch ')]
  assert [l.split(' done')[0] for l in lines] == ['epoch 1', 'epoch 2']
  assert 'loss=' in lines[-1] and 'val_loss=' in lines[-1]


def test_log_lines_say_the_steps_done_and_each_epochs_own_time(caplog):
  """The progress line says the steps of the epoch done, never past its
  steps (Keras reports batch 127 of a 104-step epoch run 32 steps at a
  time), and the epoch line the epoch's own time, then the time in all;
  both are lines the command's console shows from a child."""
  import re  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers.log_lines import LogLines  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import progress  # pylint: disable=g-import-not-at-top
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  data = tf.data.Dataset.from_tensor_slices(
      (np.zeros((104, 1), 'float32'), np.zeros((104, 1), 'float32'))).batch(1)
  model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
  model.compile('sgd', 'mse', steps_per_execution=32)

  class Slow(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
      time.sleep(0.3)

  model.fit(data, epochs=2, verbose=0, callbacks=[LogLines(), Slow()])
  lines = [r.getMessage() for r in caplog.records
           if r.getMessage().startswith('epoch ')]
  assert [l.split(':')[0] for l in lines[0::2]] == [
      'epoch 1 step 104/104', 'epoch 2 step 104/104']
  assert all(progress.EPOCH_LINE.match(l) for l in lines), lines  # Shown.
  times = [re.match(r'epoch \d done in ([\d.]+)s \(([\d.]+)s in all\): ',
                    l).groups() for l in (lines[1], lines[3])]
  (own_1, all_1), (own_2, all_2) = [(float(a), float(b)) for a, b in times]
  assert own_1 >= 0.3 and own_2 >= 0.3
  assert own_2 < all_2 and all_2 >= own_1 + own_2 - 0.1


def test_tensorboard_and_history_written(tmp_path, penguin_csvs):
  """TensorBoard event files and the history file land in the run dir."""
  est = Estimator(PenguinSpec, str(tmp_path))
  est.train(penguin_csvs[0], steps=4)
  events = [f for _, _, files in os.walk(os.path.join(est.run_dir,
                                                      'tensorboard'))
            for f in files if 'tfevents' in f]
  assert events
  with open(os.path.join(est.run_dir, 'history.json')) as f:
    assert len(json.load(f)) == 2


def test_nan_guard_names_the_steps_of_the_execution(tmp_path, penguin_csvs):
  """With several steps per execution the error names the steps' range."""
  class Diverging(PenguinSpec):
    epochs = 1

    def build_loss(self):
      cross_entropy = keras.losses.SparseCategoricalCrossentropy()
      optimizer = self.optimizer

      def loss(labels, outputs):
        poison = keras.ops.where(optimizer.iterations >= 3, np.nan, 0.0)
        return cross_entropy(labels, outputs) + poison
      return loss

  with pytest.raises(NonFiniteLossError, match=(
      r'The training loss became nan in steps 1-20 \(epoch 1, batches 1-20; '
      r'set TrainSpec.steps_per_execution = 1 to find the exact step\)')):
    Estimator(Diverging, str(tmp_path)).train(penguin_csvs[0], steps=20)


def test_several_steps_per_execution_train_exactly_the_steps(
    tmp_path, penguin_csvs):
  """Keras runs whole executions; the automatic value divides the steps."""
  est = Estimator(PenguinSpec, str(tmp_path))
  result = est.train(penguin_csvs[0], steps=42)
  assert est.spec.model.steps_per_execution == 21
  assert result['steps'] == 42


def test_nan_guard_is_found_by_type_not_position(tmp_path, penguin_csvs,
                                                 monkeypatch):
  """Reordering the built-in handlers keeps NaN detection on."""
  from generic_trainer.loop import fit_loop  # pylint: disable=g-import-not-at-top
  defaults = fit_loop.default_handlers
  monkeypatch.setattr(fit_loop, 'default_handlers',
                      lambda *args: list(reversed(defaults(*args))))

  class Diverging(PenguinSpec):
    epochs = 1
    steps_per_execution = 1

    def build_loss(self):
      cross_entropy = keras.losses.SparseCategoricalCrossentropy()
      optimizer = self.optimizer

      def loss(labels, outputs):
        poison = keras.ops.where(optimizer.iterations >= 2, np.nan, 0.0)
        return cross_entropy(labels, outputs) + poison
      return loss

  with pytest.raises(NonFiniteLossError, match=r'became nan at step 3 '):
    Estimator(Diverging, str(tmp_path)).train(penguin_csvs[0], steps=10)


def test_spec_handlers_are_built_once_and_those_run(tmp_path, penguin_csvs):
  """handlers() is called once: the callbacks whose batch hooks decide one
  step per execution are the ones that see every batch."""
  made = []

  class BatchCounter(keras.callbacks.Callback):

    def __init__(self):
      super().__init__()
      self.batches = 0
      made.append(self)

    def on_train_batch_end(self, batch, logs=None):
      self.batches += 1

  class Spec(PenguinSpec):
    def handlers(self):
      return [BatchCounter()]

  Estimator(Spec, str(tmp_path)).train(penguin_csvs[0], steps=8)
  assert len(made) == 1
  assert made[0].batches == 8  # One step per execution: every batch seen.


# Settings that cannot work are refused before training.
@pytest.mark.parametrize('setting, message', [
    ({'early_stopping': {'monitor': 'val_auc', 'patience': 1}},
     "TrainSpec.early_stopping monitors 'val_auc', which the training does "
     'not log. Expected one of: loss, sparse_categorical_accuracy, val_loss, '
     'val_sparse_categorical_accuracy'),
    ({'checkpoint': {'best_only': True, 'monitor': 'val_acc'}},
     "TrainSpec.checkpoint monitors 'val_acc', which the training does not "
     'log.'),
])
def test_monitored_metric_must_exist(tmp_path, penguin_csvs, setting,
                                     message):
  """Early stopping or a best-only checkpoint on a metric the model does not
  log is refused before the first step (Keras would only warn)."""
  import re  # pylint: disable=g-import-not-at-top
  from generic_trainer import Estimator, SpecError  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  spec = type('Watching', (PenguinSpec,), dict(setting))
  est = Estimator(spec, str(tmp_path))
  with pytest.raises(SpecError, match=re.escape(message)):
    est.train(penguin_csvs[0], eval_data=penguin_csvs[1], steps=4)
  assert est.spec.optimizer.iterations.numpy() == 0


def test_monitor_check_after_the_first_epoch():
  """For models whose log names are not known before training, the first
  epoch's logs decide."""
  from generic_trainer import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers.monitor_check import MonitorCheck  # pylint: disable=g-import-not-at-top
  check = MonitorCheck({'early_stopping': 'val_auc'})
  check.on_train_begin()
  with pytest.raises(SpecError, match=(
      r"TrainSpec.early_stopping monitors 'val_auc', which the training does "
      r'not log. Expected one of: loss, val_loss')):
    check.on_epoch_end(0, {'loss': 1.0, 'val_loss': 1.0})
  check.on_epoch_end(1, {})  # Checked once.


def test_train_step_that_returns_no_logs(tmp_path, penguin_csvs):
  """A custom train_step that forgets to return the logs: our message, not
  Keras's internals."""
  from generic_trainer import Estimator, SpecError  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top

  class NoLogs(PenguinSpec):
    def train_step(self, model, data):
      model.optimizer.iterations.assign_add(1)

  with pytest.raises(SpecError, match=(
      r"TrainSpec.train_step must return the logs dict, e.g. \{'loss': loss\}"
      r'.* Received: NoneType None')):
    Estimator(NoLogs, str(tmp_path)).train(penguin_csvs[0], steps=2)
