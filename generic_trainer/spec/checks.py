"""Checks a TrainSpec against one real batch, before training starts."""

from typing import List

from generic_trainer.errors import SpecError, summarize
from generic_trainer.keys import JAX_BACKEND, TENSORFLOW_BACKEND


def check_train_step(spec, backend: str) -> None:
  """A custom train_step has the form of the backend that runs it:
  `(model, data)` returning logs on TensorFlow; `(model, state, data)`
  returning `(logs, state)`, without tf.GradientTape, on JAX."""
  import inspect  # pylint: disable=g-import-not-at-top
  step = spec.train_step
  if step is None:
    return
  signature = inspect.signature(step)
  jax_form = len(signature.parameters) == 3
  try:
    tape = 'GradientTape' in inspect.getsource(step)
  except (OSError, TypeError):
    tape = False
  where = f'{type(spec).__name__}.train_step{signature}'
  if backend == JAX_BACKEND and (tape or not jax_form):
    why = 'it uses tf.GradientTape' if tape else 'it takes (model, data)'
    raise SpecError(
        f'TrainSpec.train_step is written for TensorFlow ({why}), and '
        "Keras's JAX backend cannot run it: JAX takes gradients of pure "
        'functions, so its trainer passes the variables\' values in and '
        'expects them back, and a tf.GradientTape sees no variable change. '
        f"Received: {where} on backend 'jax'. Write it as `def "
        'train_step(self, model, state, data)` returning (logs, state), '
        'with the gradient from jax.value_and_grad over '
        'model.stateless_call(...) (as Keras\'s own JAX train_step in '
        "keras/src/backend/jax/trainer.py), or set backend='tensorflow'.")
  if backend == TENSORFLOW_BACKEND and jax_form:
    raise SpecError(
        'TrainSpec.train_step takes (model, state, data), the JAX form, but '
        "this training runs on TensorFlow, whose Keras calls "
        'train_step(model, data) and expects the logs dict. Received: '
        f"{where} on backend 'tensorflow'. Set backend='jax', or write "
        '`def train_step(self, model, data)` returning the logs dict.')


def check_model_inputs(model, keys: List[str]) -> None:
  """Every input the model names must be a feature the data provides."""
  try:
    inputs = model.inputs or []
  except (AttributeError, ValueError):
    return  # A subclassed model names no inputs; check_batch runs it.
  names = [getattr(t, 'name', None) for t in inputs]
  names = [n.split(':')[0] for n in names if n]
  missing = [n for n in names if n not in keys]
  if missing:
    raise SpecError(
        f'The model expects the input(s) {missing}, which the data lacks. '
        f'The features given to the model are: {", ".join(keys)}. Name each '
        "keras.Input after a feature (keras.Input(shape=(1,), name='...')), "
        'or set TrainSpec.feature_keys.')


def check_batch(spec, model, batch) -> None:
  """The model runs on a batch and its outputs fit the loss and metrics."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  features, labels = batch
  try:
    outputs = model(features, training=False)
  except Exception as e:  # pylint: disable=broad-except
    raise SpecError(
        f'The model fails on a batch of the train data: {type(e).__name__}: '
        f'{summarize(e)}. The batch has features '
        f'{_shapes(features)}. Check the inputs of build_model().') from e
  units = outputs.shape[-1] if hasattr(outputs, 'shape') else None
  if _is_sparse_categorical(spec.loss) and units:
    top = int(np.max(np.asarray(labels)))
    if top >= units:
      raise SpecError(
          f'The labels go up to {top} but the model has {units} output '
          f'unit(s): SparseCategoricalCrossentropy needs one unit per class '
          f'(here at least {top + 1}), e.g. keras.layers.Dense({top + 1}).')
  import keras  # pylint: disable=g-import-not-at-top
  try:
    value = keras.losses.get(spec.loss)(labels, outputs)
    for metric in map(keras.metrics.get, spec.metrics):
      metric.update_state(labels, outputs)
      metric.reset_state()
  except Exception as e:  # pylint: disable=broad-except
    raise SpecError(
        'The model outputs do not fit the loss or metrics: '
        f'{type(e).__name__}: {summarize(e)}. Model outputs: '
        f'{_shapes(outputs)}; labels: {_shapes(labels)}. For integer class '
        'labels use SparseCategoricalCrossentropy with one output unit per '
        'class; for 0/1 labels, BinaryCrossentropy with one unit.') from e
  if not np.all(np.isfinite(np.asarray(value))):
    raise SpecError(
        f'The loss is {np.asarray(value)} on the first batch, before any '
        'training. Check the inputs for NaN/Inf and the label range.')


def _is_sparse_categorical(loss) -> bool:
  import keras  # pylint: disable=g-import-not-at-top
  name = loss if isinstance(loss, str) else getattr(loss, '__name__', '')
  return (isinstance(loss, keras.losses.SparseCategoricalCrossentropy) or
          name == 'sparse_categorical_crossentropy')


def _shapes(value) -> str:
  if isinstance(value, dict):
    return '{' + ', '.join(f'{k}: {_shape(v)}' for k, v in value.items()) + '}'
  return _shape(value)


def _shape(tensor) -> str:
  shape = getattr(tensor, 'shape', None)
  dtype = getattr(tensor, 'dtype', '')
  return f'{getattr(dtype, "name", dtype)}{list(shape) if shape is not None else "?"}'



def monitors(spec) -> dict:
  """{'early_stopping' | 'checkpoint': metric name} the spec's handlers
  watch (the best-only checkpoint's, early stopping's)."""
  watched = {}
  if isinstance(spec.early_stopping, dict):
    watched['early_stopping'] = spec.early_stopping.get('monitor', 'val_loss')
  if isinstance(spec.checkpoint, dict) and spec.checkpoint.get('best_only'):
    watched['checkpoint'] = spec.checkpoint.get('monitor', 'val_loss')
  return watched


def check_monitors(spec, model) -> None:
  """A monitored metric must be one the training logs: the loss or a
  metric, on train or (with 'val_') on eval data.

  Only for models with one output, whose log names are the metrics' own;
  `handlers.monitor_check` checks the others after the first epoch.
  """
  watched = monitors(spec)
  if not watched or len(getattr(model, 'outputs', None) or []) != 1:
    return
  names = ['loss'] + [m if isinstance(m, str) else getattr(m, 'name', '')
                      for m in spec.metrics]
  logged = names + ['val_' + n for n in names]
  for who, name in sorted(watched.items()):
    if name not in logged:
      raise SpecError(
          f'TrainSpec.{who} monitors {name!r}, which the training does not '
          f'log. Expected one of: {", ".join(logged)} (the loss and '
          "build_metrics()'s metrics by name; 'val_' on the eval data). "
          f"Received: monitor={name!r}. Set monitor to one of those, or add "
          'the metric in build_metrics().')
