"""What a TrainSpec's members return, checked once, where it is built.

`build_model()`, `build_optimizer()`, `build_loss()`, `build_metrics()` and
`handlers()` are called once (the spec's cached properties); what they
return goes deep into Keras, which fails on a wrong kind of value with an
AttributeError or TypeError that names neither the member nor the fix (a
plain function among the handlers: "'function' object has no attribute
'set_model'"). Each is checked here instead, naming the member, what it
takes, what it got and how to write it.
"""

import difflib
import inspect
import math
from typing import Any, Sequence

from generic_trainer.keys import TF_KERAS
from generic_trainer.system import keras_env
from generic_trainer.errors import SpecError
from generic_trainer.errors import summarize
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import tf_keras


def describe(value: Any) -> str:
  """'the function log_epoch', 'the class EarlyStopping (not an instance)',
  'None', 'a str ('adam')'."""
  if value is None:
    return 'None'
  if inspect.isclass(value):
    return f'the class {value.__name__} (not an instance of it)'
  if inspect.isfunction(value) or inspect.ismethod(value) or (
      inspect.isbuiltin(value)):
    return f'the function {getattr(value, "__qualname__", value)}'
  shown = repr(value)
  if len(shown) > 60:
    shown = shown[:57] + '...'
  return f'a {type(value).__name__} ({shown})'


def _is_callback(value) -> bool:
  return (not inspect.isclass(value) and hasattr(value, 'set_model') and
          hasattr(value, 'on_epoch_end'))


def handlers(spec, value) -> list:
  """`spec.handlers()`'s value as a list of callbacks.

  Raises:
    SpecError: not a list (or tuple) of Keras callback instances.
  """
  name = type(spec).__name__
  if value is None:
    return []
  if _is_callback(value) or not isinstance(value, (list, tuple)):
    raise SpecError(
        f'{name}.handlers() returned {describe(value)}. Expected a list of '
        'Keras callbacks (keras.callbacks.Callback instances). Received: '
        f'{describe(value)}. Return a list, e.g. `return [MyCallback()]`'
        + ('' if _is_callback(value) else
           '; wrap a plain function in keras.callbacks.LambdaCallback('
           'on_epoch_end=fn)') + '.')
  for index, handler in enumerate(value):
    if not _is_callback(handler):
      fix = ('call the class: `MyCallback()`' if inspect.isclass(handler)
             else 'wrap a plain function in keras.callbacks.LambdaCallback('
             'on_epoch_end=fn), or subclass keras.callbacks.Callback')
      raise SpecError(
          f'{name}.handlers() returned, at index {index}, '
          f'{describe(handler)}, which is not a Keras callback. Expected '
          'keras.callbacks.Callback instances (objects with on_epoch_end, '
          f'set_model...). Received: {describe(handler)}. Return instances '
          f'only: {fix}.')
  return list(value)


def model(spec, value):
  """`build_model()`'s value: a Keras model instance."""
  if value is None or inspect.isclass(value) or not (
      hasattr(value, 'compile') and hasattr(value, 'fit')):
    fix = ('Call it: `return keras.Sequential([...])`' if inspect.isclass(value)
           else 'Return the model, e.g. `return keras.Model(inputs, outputs)`')
    raise SpecError(
        f'{type(spec).__name__}.build_model() returned {describe(value)}. '
        'Expected a Keras model (keras.Model or keras.Sequential). Received: '
        f'{describe(value)}. {fix}.')
  return value


def optimizer(spec, value):
  """`build_optimizer()`'s value: an optimizer instance, or a Keras name."""
  if value is None or inspect.isclass(value) or callable(value) and not (
      hasattr(value, 'apply_gradients') or hasattr(value, 'apply')):
    raise SpecError(
        f'{type(spec).__name__}.build_optimizer() returned '
        f'{describe(value)}. Expected a Keras optimizer, e.g. '
        'keras.optimizers.Adam(1e-3), or its name (\'adam\'). Received: '
        f'{describe(value)}. Return an optimizer instance: '
        '`return keras.optimizers.Adam(1e-3)`.')
  return value


def loss(spec, value):
  """`build_loss()`'s value: not None, not a class."""
  if value is None or (inspect.isclass(value) and not isinstance(value, dict)):
    fix = (f'Call the class: `return {value.__name__}()`'
           if inspect.isclass(value) else
           'Return the loss, e.g. `return '
           'keras.losses.SparseCategoricalCrossentropy()`, or declare a head')
    raise SpecError(
        f'{type(spec).__name__}.build_loss() returned {describe(value)}. '
        'Expected a Keras loss: an instance, a function or its name (a dict '
        f'of them by label for several labels). Received: {describe(value)}'
        f'. {fix}.')
  for label, name in (value.items() if isinstance(value, dict)
                      else [(None, value)]):
    if isinstance(name, str):
      _check_loss_name(spec, name, label)
  return value


def _keras_knows(kind: str, name: str) -> bool:
  """Whether Keras's `kind` ('losses', 'metrics') resolves `name`: this
  process's Keras, or tf.keras 2 where the training runs under it."""
  try:
    getattr(keras, kind).get(name)
    return True
  except ValueError:
    pass
  if keras_env.resolved_tf_keras() == TF_KERAS:  # tf.keras 2 knows it?
    try:
      getattr(tf_keras, kind).get(name)
      return True
    except (ImportError, ValueError):
      pass
  return False


def _unknown_name(spec, member: str, kind: str, name: str, label,
                  known, examples: str) -> SpecError:
  """The error of `spec.member()` returning `name`, which Keras does not
  know as a `kind` ('loss', 'metric'), with the nearest of `known`."""
  near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
  where = f' for label {label!r}' if label is not None else ''
  return SpecError(
      f'{type(spec).__name__}.{member}() returned {name!r}{where}, which '
      f'Keras does not know as a {kind}'
      + (f'; did you mean {near[0]!r}?' if near else '.') +
      f' Expected a Keras {kind} name ({examples}) or a {kind} object. '
      f'Received: {kind}={name!r}. '
      + (f'Write {near[0]!r}' if near else 'Fix the name') +
      f' in {member}().')


def _check_loss_name(spec, name: str, label) -> None:
  """A loss given by name is one Keras knows, checked before the model is
  built: Keras resolves a name only at the first step, where a misspelt one
  reads like a mismatch between the label and the model."""
  if _keras_knows('losses', name):
    return
  known = sorted(n for n in dir(keras.losses) if n.islower()
                 and not n.startswith('_') and n not in ('get', 'serialize',
                                                          'deserialize'))
  raise _unknown_name(spec, 'build_loss', 'loss', name, label, known,
                      "'sparse_categorical_crossentropy', "
                      "'binary_crossentropy', 'mse', ...")


def metrics(spec, value):
  """`build_metrics()`'s value as a list (or a dict by label)."""
  if value is None:
    return []
  if isinstance(value, dict):
    for label, listed in value.items():
      for metric in (listed if isinstance(listed, (list, tuple)) else [listed]):
        if isinstance(metric, str):
          _check_metric_name(spec, metric, label)
    return value
  if isinstance(value, str) or not isinstance(value, (list, tuple)):
    raise SpecError(
        f'{type(spec).__name__}.build_metrics() returned {describe(value)}. '
        'Expected a list of Keras metrics (or a dict of lists by label). '
        f'Received: {describe(value)}. Return a list, e.g. `return '
        f'[{value!r}]`.' if isinstance(value, str) else
        f'{type(spec).__name__}.build_metrics() returned {describe(value)}. '
        'Expected a list of Keras metrics (or a dict of lists by label). '
        f'Received: {describe(value)}. Return a list, e.g. `return '
        '[keras.metrics.SparseCategoricalAccuracy()]`.')
  for index, metric in enumerate(value):
    if inspect.isclass(metric):
      raise SpecError(
          f'{type(spec).__name__}.build_metrics() returned, at index '
          f'{index}, {describe(metric)}. Expected metric instances or '
          f'names. Received: {describe(metric)}. Call the class: '
          f'`{metric.__name__}()`.')
    if isinstance(metric, str):
      _check_metric_name(spec, metric, None)
  return list(value)


# Names Keras's compile() takes besides those keras.metrics.get knows: it
# picks the accuracy or crossentropy that fits the loss.
COMPILE_METRIC_NAMES = ('accuracy', 'acc', 'crossentropy', 'ce')


def _check_metric_name(spec, name: str, label) -> None:
  """A metric given by name is one Keras knows, checked before the model
  is built: Keras resolves it at compile time, and a misspelt one
  ('acuracy') fails later as "Could not interpret metric identifier",
  which the batch check would report as outputs that do not fit."""
  if name in COMPILE_METRIC_NAMES:
    return
  if _keras_knows('metrics', name):
    return
  known = sorted(set(COMPILE_METRIC_NAMES) | {
      n for n in dir(keras.metrics) if not n.startswith('_') and n not in (
          'get', 'serialize', 'deserialize', 'Metric')})
  raise _unknown_name(spec, 'build_metrics', 'metric', name, label, known,
                      "'accuracy', 'sparse_categorical_accuracy', 'auc', "
                      "'mae', ...")


def compile_error(spec, error: Exception, optimizer, loss,
                  metrics) -> SpecError:
  """Keras's refusal to compile the model with the spec's optimizer, loss
  and metrics (an unknown name, say), as a SpecError naming them."""
  return SpecError(
      f'Keras cannot compile {type(spec).__name__}\'s model: '
      f'{type(error).__name__}: {summarize(error)}. Expected an optimizer, '
      'a loss and metrics Keras knows: objects (keras.optimizers.Adam(), '
      'keras.losses.SparseCategoricalCrossentropy()) or their names '
      f'(\'adam\'). Received: optimizer={describe(optimizer)}, '
      f'loss={describe(loss)}, metrics={describe(metrics)}. Fix the name or '
      'object in build_optimizer(), build_loss() or build_metrics().')


def check_batch_split(batch_size: Any, counts: Sequence[int]) -> None:
  """The global batch (`TrainSpec.batch_size`) splits evenly between the
  workers, for every count of `counts` (a group's size, or every size of a
  `num_workers` range): each worker takes its slice of every global batch
  (docs/guides/elastic-workers.md). Uneven slices (20 rows over 3: 7, 7,
  6) are what tf.distribute gives, but Keras 3 under
  MultiWorkerMirroredStrategy then fails in a collective op ('Shape
  mismatch in the collective instance', [6,1] against [7,1]): refused
  before any step (row 262).

  Raises:
    SpecError: a count does not divide `batch_size`.
  """
  counts = sorted(set(counts))
  if not isinstance(batch_size, int) or isinstance(batch_size, bool):
    return  # Not a size yet (datasets.schedule checks it).
  if all(batch_size % n == 0 for n in counts):
    return
  multiple = math.lcm(*counts)
  lower = batch_size - batch_size % multiple
  if len(counts) == 1:
    groups = f'the {counts[0]} workers that train together'
    expected = f'a batch_size that {counts[0]} divides'
    received = f'{counts[0]} workers'
  else:
    groups = (f'groups of {counts[0]} to {counts[-1]} workers (a '
              'num_workers range)')
    expected = (f'a batch_size that every size from {counts[0]} to '
                f'{counts[-1]} divides')
    received = f'num_workers {counts[0]}:{counts[-1]}'
  raise SpecError(
      f'TrainSpec.batch_size={batch_size} (the global batch: every step '
      'trains that many rows, shared by the workers) does not split evenly '
      f'between {groups}; uneven slices fail inside '
      f'MultiWorkerMirroredStrategy. Expected {expected}. Received: '
      f'batch_size={batch_size}, {received}. Set batch_size to a multiple '
      f'of {multiple} (e.g. {lower or multiple} or {lower + multiple}), or '
      'change num_workers.')
