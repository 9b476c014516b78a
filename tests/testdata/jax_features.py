"""Trains TrainSpecs on Keras's JAX backend with the notebook Estimator, all
in this one process, and writes what happened to OUT/results.json for
tests/test_jax_backend.py.

    KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 \\
        python jax_features.py OUT TRAIN_CSV EVAL_CSV TF_BASE_MODEL

Each part is independent: handlers and checkpoints, resume after a failure,
warm start (from a model exported on TensorFlow and from one exported on
JAX), the checks before training, a JAX train_step, a TensorFlow
train_step (refused), a JAX train_step that returns no state (refused when
JAX traces it), and keras.distribution.DataParallel over the two
host devices (last: it sets the process's distribution).
"""

import json
import os
import sys

import keras

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top,wrong-import-position
from generic_trainer.errors import GenericTrainerError  # pylint: disable=g-import-not-at-top,wrong-import-position
from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top,wrong-import-position

OUT, TRAIN, EVAL, TF_BASE = sys.argv[1:5]


class Recorder(keras.callbacks.Callback):
  """Counts the hooks Keras calls."""

  def __init__(self):
    super().__init__()
    self.calls = {}

  def _count(self, name):
    self.calls[name] = self.calls.get(name, 0) + 1

  def on_train_begin(self, logs=None):
    self._count('on_train_begin')

  def on_epoch_end(self, epoch, logs=None):
    self._count('on_epoch_end')

  def on_train_batch_end(self, batch, logs=None):
    self._count('on_train_batch_end')

  def on_train_end(self, logs=None):
    self._count('on_train_end')


RECORDER = Recorder()


class HandledSpec(PenguinSpec):
  epochs = 3
  checkpoint = {'every_epochs': 1}
  early_stopping = {'monitor': 'val_loss', 'patience': 5}

  def handlers(self):
    return [RECORDER]


class FailOnce(keras.callbacks.Callback):
  """Fails the first training as its third epoch begins, after the second
  epoch's checkpoint (a failure in an epoch's end hooks comes before it)."""

  def on_epoch_begin(self, epoch, logs=None):
    marker = os.path.join(OUT, 'failed_once')
    if epoch == 2 and not os.path.exists(marker):
      open(marker, 'w').close()
      raise RuntimeError('stopped after epoch 2')


class ResumedSpec(PenguinSpec):
  epochs = 4

  def handlers(self):
    return [FailOnce()]


class StrictWarmSpec(PenguinSpec):
  warm_start = 'strict'


class NoSuchLabelSpec(PenguinSpec):
  label_key = 'penguin_kind'


class TwoUnitsSpec(PenguinSpec):
  num_classes = 2


class JaxStepSpec(PenguinSpec):
  """A custom train step in JAX's form: gradients from value_and_grad."""
  epochs = 3

  def train_step(self, model, state, data):
    import jax  # pylint: disable=g-import-not-at-top
    trainable, non_trainable, optimizer_variables, metrics_variables = state
    x, y = data

    def loss_fn(trainable, non_trainable):
      y_pred, non_trainable = model.stateless_call(
          trainable, non_trainable, x, training=True)
      return self.loss(y, y_pred), non_trainable

    (loss, non_trainable), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(trainable, non_trainable)
    trainable, optimizer_variables = model.optimizer.stateless_apply(
        optimizer_variables, grads, trainable)
    return {'loss': loss}, (trainable, non_trainable, optimizer_variables,
                            metrics_variables)


class LogsOnlyStepSpec(PenguinSpec):
  """A JAX train step that forgets to return the state."""

  def train_step(self, model, state, data):
    return {'loss': 0.0}


class TapeStepSpec(PenguinSpec):

  def train_step(self, model, data):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.GradientTape():
      pass
    return {'loss': 0.0}


class ParallelSpec(PenguinSpec):

  def build_model(self):
    keras.distribution.set_distribution(keras.distribution.DataParallel())
    return super().build_model()


def _files(folder):
  return sorted(os.listdir(folder)) if os.path.isdir(folder) else None


def _refusal(spec_class, name):
  try:
    Estimator(spec_class, os.path.join(OUT, name)).train(TRAIN, EVAL, steps=4)
  except GenericTrainerError as e:
    return {'error': type(e).__name__, 'message': str(e),
            'history': os.path.exists(os.path.join(OUT, name, 'run',
                                                   'history.json'))}
  return {'error': None}


def main():
  results = {'backend': keras.backend.backend(),
             'devices': keras.distribution.list_devices()}

  est = Estimator(HandledSpec, os.path.join(OUT, 'handled'))
  record = est.train(TRAIN, EVAL, steps=30)
  export = est.export()
  results['handled'] = {
      'record': record, 'calls': RECORDER.calls,
      'run': _files(est.run_dir),
      'checkpoints': _files(os.path.join(est.run_dir, 'checkpoints')),
      'tensorboard': _files(os.path.join(est.run_dir, 'tensorboard')),
      'evaluate': est.evaluate(EVAL),
      'predict_shape': list(est.predict(EVAL).shape),
      'export': export}

  checkpoint_dir = os.path.join(OUT, 'resume')
  first = Estimator(ResumedSpec, os.path.join(OUT, 'resumed_1'))
  first.checkpoint_dir = checkpoint_dir
  try:
    first.train(TRAIN, EVAL, steps=20)
    results['first_failure'] = None
  except Exception as e:  # pylint: disable=broad-except
    results['first_failure'] = f'{type(e).__name__}: {e}'
  second = Estimator(ResumedSpec, os.path.join(OUT, 'resumed_2'))
  second.checkpoint_dir = checkpoint_dir
  results['resumed'] = second.train(TRAIN, EVAL, steps=20)

  for name, base in (('from_tensorflow', TF_BASE), ('from_jax', export)):
    warm = Estimator(StrictWarmSpec, os.path.join(OUT, f'warm_{name}'),
                     base_model=base)
    results[f'warm_{name}'] = warm.train(TRAIN, EVAL, steps=4)['warm_start']

  results['no_such_label'] = _refusal(NoSuchLabelSpec, 'no_such_label')
  results['two_units'] = _refusal(TwoUnitsSpec, 'two_units')
  results['tape_step'] = _refusal(TapeStepSpec, 'tape_step')
  results['logs_only_step'] = _refusal(LogsOnlyStepSpec, 'logs_only_step')

  jax_step = Estimator(JaxStepSpec, os.path.join(OUT, 'jax_step'))
  results['jax_step'] = jax_step.train(TRAIN, EVAL, steps=30)
  with open(os.path.join(jax_step.run_dir, 'history.json')) as f:
    results['jax_step_history'] = json.load(f)

  parallel = Estimator(ParallelSpec, os.path.join(OUT, 'parallel'))
  results['parallel'] = parallel.train(TRAIN, EVAL, steps=20)
  results['parallel_kernel_sharding'] = str(
      parallel.spec.model.layers[-1].kernel.value.sharding)
  results['parallel_export'] = parallel.export()
  keras.distribution.set_distribution(None)

  with open(os.path.join(OUT, 'results.json'), 'w') as f:
    json.dump(results, f, indent=1, default=str)


if __name__ == '__main__':
  main()
