"""Checks a TrainSpec against one real batch, before training starts."""

from typing import List
import inspect
import types

import numpy as np

from generic_trainer.data import feature_names
from generic_trainer.errors import SpecError, summarize
from generic_trainer.keys import JAX_BACKEND, TENSORFLOW_BACKEND
from generic_trainer.loop import label_checks
from generic_trainer.trainspec import outputs as outputs_lib
from generic_trainer.trainspec import member_checks
from generic_trainer.trainspec import spec as spec_lib
import keras


def check_backend(spec) -> None:
  """A TrainSpec that names its backend trains on it: Keras in this process
  computes with it (GenericTrainer and the command start a process on it;
  a notebook's Estimator, or TFX's own Trainer, cannot).

  Raises:
    SpecError: saying how to train it on its backend.
  """
  running = keras.backend.backend()
  if spec.backend is not None and spec.backend != running:
    raise spec_lib.backend_refusal(type(spec).__name__, spec.backend, running)


def check_cache(spec) -> None:
  """`TrainSpec.cache` is one of its settings: None, True, False, 'disk'.

  Raises:
    SpecError: it is not, whatever the data (checked before any dataset).
  """
  setting = spec.cache
  if setting is None or type(setting) is bool or (  # pylint: disable=unidiomatic-typecheck
      isinstance(setting, str) and setting == 'disk'):
    return
  kind = type(setting)
  shown = repr(setting) if kind in (int, float, str) else (
      f'{setting!r} (a {kind.__module__}.{kind.__qualname__})')
  raise SpecError(
      'TrainSpec.cache must be None (keep the parsed rows where they fit: '
      "in memory, else on local disk), True (memory), 'disk', or False "
      f'(read and parse the files every epoch). Received: cache={shown}. '
      'Set one of those four, or leave it unset.')


def check_train_step(spec, backend: str) -> None:
  """A custom train_step has the form of the backend that runs it:
  `(model, data)` returning logs on TensorFlow; `(model, state, data)`
  returning `(logs, state)`, without tf.GradientTape, on JAX."""
  step = spec.train_step
  if step is None:
    return
  signature = inspect.signature(step)
  arity = len(signature.parameters)
  jax_form = arity == 3
  tape = _uses_gradient_tape(step)
  where = f'{type(spec).__name__}.train_step{signature}'
  if backend == JAX_BACKEND and (tape or not jax_form):
    why = ('it uses tf.GradientTape' if tape else 'it takes (model, data)'
           if arity == 2 else f'it takes {arity} arguments')
    raise SpecError(
        f'TrainSpec.train_step is written for TensorFlow ({why}), and '
        "Keras's JAX backend cannot run it: JAX takes gradients of pure "
        'functions, so its trainer passes the variables\' values in and '
        'expects them back, and a tf.GradientTape sees no variable change. '
        'Expected train_step(self, model, state, data) on JAX. '
        f"Received: {where} on backend 'jax'. Write it as `def "
        'train_step(self, model, state, data)` returning (logs, state), '
        'with the gradient from jax.value_and_grad over '
        'model.stateless_call(...) (as Keras\'s own JAX train_step in '
        "keras/src/backend/jax/trainer.py), or set backend='tensorflow'.")
  if backend == TENSORFLOW_BACKEND and jax_form:
    raise SpecError(
        'TrainSpec.train_step takes (model, state, data), the JAX form, but '
        "this training runs on TensorFlow, whose Keras calls "
        'train_step(model, data) and expects the logs dict. Expected '
        'train_step(self, model, data) on TensorFlow. Received: '
        f"{where} on backend 'tensorflow'. Set backend='jax', or write "
        '`def train_step(self, model, data)` returning the logs dict.')


def _uses_gradient_tape(step) -> bool:
  """Whether the code of `step` (or a function defined in it) names
  GradientTape: comments and strings that mention it do not count."""
  code = getattr(step, '__code__', None)
  todo = [code] if code is not None else []
  while todo:
    code = todo.pop()
    if 'GradientTape' in code.co_names:
      return True
    todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
  return False


def check_heads(spec, backend: str) -> None:
  """Heads (canned TrainSpecs included) train on TensorFlow only: their
  `predict`, `classification` and `regression` signatures call the Keras
  model inside TensorFlow functions, which a JAX model cannot serve."""
  heads = [o.name for o in spec.outputs if o.head is not None]
  if backend == JAX_BACKEND and heads:
    raise SpecError(
        'A TrainSpec with a head cannot train on JAX yet: the signatures a '
        "head exports (predict, classification, regression) call the model "
        'from TensorFlow, which a JAX model cannot be called from without '
        f'jax2tf. Expected a TrainSpec without a head on JAX. Received: '
        f'{type(spec).__name__} with heads for {heads} on '
        "backend 'jax'. Set backend='tensorflow' (or leave it unset), or "
        'drop the head and give build_loss and build_metrics.')

def model_features(model, keys: List[str]) -> List[str]:
  """The features the model reads: those of `keys` its inputs are named
  after (all of `keys` for a model that names no inputs). Features it does
  not read are neither parsed nor fed (Keras would match a dict with extra
  keys to the inputs by position).

  Raises:
    SpecError: an input the model names is not one of `keys`.
  """
  try:
    inputs = model.inputs or []
  except (AttributeError, ValueError):
    return keys  # A subclassed model names no inputs; check_batch runs it.
  names = [getattr(t, 'name', None) for t in inputs]
  names = [n.split(':')[0] for n in names if n]
  missing = feature_names.lacking(names, keys)
  if missing:
    raise SpecError(
        f'{feature_names.lacks("The model expects the input(s)", missing, keys, has="The features given to the model are")}'
        f' Expected inputs named after them. Received: inputs {names}. Name '
        "each keras.Input after a feature (keras.Input(shape=(1,), "
        "name='...')), or set TrainSpec.feature_keys.")
  return [k for k in keys if k in names] if names else keys


def check_batch(spec, model, batch) -> None:
  """The model runs on a batch and each output fits its label, loss and
  metrics. `batch` is (features, labels[, weights]), labels as read."""
  features, labels = batch[0], batch[1]
  try:
    outputs = model(features, training=False)
  except Exception as e:  # pylint: disable=broad-except
    raise (_inputs_disagree(spec, model, features) or SpecError(
        f'The model fails on a batch of the train data: {type(e).__name__}: '
        f'{summarize(e)}. The batch has features '
        f'{_shapes(features)}. Check the inputs of build_model(). Expected '
        'inputs that take the features as read. Received: the features '
        'above.')) from e
  declared = spec.outputs
  if len(declared) == 1:
    output = declared[0]
    _check_output(None, output, outputs, labels, spec.loss, spec.metrics)
    return
  names = outputs_lib.label_keys(declared)
  if not isinstance(outputs, dict) or sorted(outputs) != sorted(names):
    got = sorted(outputs) if isinstance(outputs, dict) else _shapes(outputs)
    raise SpecError(
        f'The spec has {len(names)} labels {names}, so the model must output '
        f'a dict with one output per label, keyed by label. Its outputs: '
        f'{got}. Received: {"a dict" if isinstance(outputs, dict) else "one tensor"}. Return keras.Model(inputs, {{{names[0]!r}: ..., '
        f'{names[1]!r}: ...}}).')
  losses = _per_output('build_loss()', spec.loss, names)
  metrics = _per_output('build_metrics()', spec.metrics, names, default=[])
  for key in (spec.loss_weights or {}):
    if key not in names:
      raise SpecError(
          f'TrainSpec.loss_weights names {key!r}, which is not an output. '
          f'The outputs: {names}. Expected keys among those. Received: '
          f'loss_weights={spec.loss_weights}. Name each key of loss_weights '
          'after an output.')
  for output in declared:
    _check_output(output.name, output, outputs[output.name],
                  labels[output.name], losses[output.name],
                  metrics[output.name])


def _input_names(model) -> List[str]:
  """The names of a built functional model's inputs ([] for a model that
  names none: a Sequential not built yet, a subclassed model)."""
  if isinstance(model, keras.Sequential):
    return []
  try:
    inputs = model.inputs or []
  except (AttributeError, ValueError):
    return []
  return [getattr(t, 'name', '').split(':')[0] for t in inputs]


def _inputs_disagree(spec, model, features):
  """For a model that failed on the first batch: a SpecError when what the
  data gives and what the model takes disagree in kind (a dict of
  features to a keras.Sequential, which takes one tensor; one tensor from
  `preprocess` to a model of named inputs), saying both sides and how to
  change either; None for any other failure."""
  name = type(spec).__name__
  own = type(spec).preprocess is not spec_lib.TrainSpec.preprocess
  source = (f'{name}.preprocess() returns' if own else
            'the data gives the model (no preprocess)')
  names = _input_names(model)
  if isinstance(features, dict) and isinstance(model, keras.Sequential):
    keys = list(features)
    shown = keys if len(keys) <= 6 else keys[:6] + ['...']
    return SpecError(
        f'{name}.build_model() returns a keras.Sequential, which takes one '
        f'tensor, but {source} a dict of {len(keys)} features '
        f'({_shapes(features)}); Keras says "Exception encountered when '
        'calling Sequential.call()". Expected a model that takes the dict '
        'of features: one keras.Input per feature, named after it. '
        f'Received: a Sequential fed a dict of {len(keys)} features. Build '
        'a functional model with named inputs: inputs = {k: '
        f'keras.Input(shape=(1,), name=k) for k in {shown!r}}}; x = '
        'keras.layers.Concatenate()(list(inputs.values())); then your '
        'layers on x; return keras.Model(inputs, outputs). Or keep the '
        'Sequential and make preprocess() return one tensor: '
        'keras.ops.concatenate([keras.ops.cast(features[k], "float32") '
        'for k in sorted(features)], axis=-1).')
  if not isinstance(features, dict) and len(names) > 1:
    return SpecError(
        f'{source} one tensor ({_shape(features)}), but {name}.build_model()'
        f"'s model takes {len(names)} named inputs ({', '.join(names)}): "
        'the two sides disagree. Expected them to agree: preprocess() '
        "returns a dict keyed by the model's input names, or one tensor for "
        f'a model of one input. Received: one tensor for {len(names)} '
        'inputs. Change one side: return a dict from preprocess() ({k: '
        f'keras.ops.cast(features[k], "float32") for k in {names!r}}}), or '
        'build the model to take the one tensor (a keras.Sequential of '
        'layers, without keras.Input).')
  return None


def _per_output(member: str, value, names: List[str], default=None):
  """{output name: value} of a spec member given as one value for every
  output, or as a dict by output name."""
  if not isinstance(value, dict):
    if default is not None and not value:
      return {n: default for n in names}
    if member == 'build_metrics()':
      raise SpecError(
          f'With several outputs, {member} must return a dict of metric '
          f'lists keyed by output ({names}), e.g. {{{names[0]!r}: '
          f'[keras.metrics.SparseCategoricalAccuracy()]}}. Received: '
          f'{value!r}. Return a dict of lists keyed by those names.')
    return {n: value for n in names}
  unknown = sorted(set(value) - set(names))
  missing = [n for n in names if n not in value]
  if unknown or (missing and default is None):
    raise SpecError(
        f'{member} is keyed by {sorted(value)} but the outputs are {names}'
        f'{"; it lacks " + str(missing) if missing and default is None else ""}'
        f'{"; unknown: " + str(unknown) if unknown else ""}. Give one entry '
        'per output, keyed by its label. Expected one entry per output. '
        f'Received: keys {sorted(value)}.')
  return {n: value.get(n, default) for n in names}


def _check_output(name, output, outputs, labels, loss, metrics) -> None:
  """One output against its label, loss and metrics; `name` None for a
  spec's only output (the messages then name no output)."""
  where = f'Output {name!r}: ' if name else ''
  if output.head is not None:
    output.head.check_labels(labels, output.name)
    labels = output.head.encode_labels(labels)
  units = outputs.shape[-1] if hasattr(outputs, 'shape') else None
  if output.head is None and not isinstance(loss, dict):
    label_checks.check_kind(output.name, labels, loss, units)
  if _is_sparse_categorical(loss) and units:
    top = int(np.max(np.asarray(labels)))
    if top >= units:
      raise SpecError(
          f'{where}The labels go up to {top} but the model has {units} '
          f'output unit(s): SparseCategoricalCrossentropy needs one unit per '
          f'class (here at least {top + 1}), e.g. '
          f'keras.layers.Dense({top + 1}). Received: {units} unit(s), labels '
          f'up to {top}. Use keras.layers.Dense({top + 1}) as the output '
          'layer.')
  try:
    value = keras.losses.get(loss)(labels, outputs)
    for metric in map(keras.metrics.get, [
        m for m in metrics if m not in member_checks.COMPILE_METRIC_NAMES]):
      metric.update_state(labels, outputs)
      metric.reset_state()
  except Exception as e:  # pylint: disable=broad-except
    raise SpecError(
        f'{where}The model outputs do not fit the loss or metrics: '
        f'{type(e).__name__}: {summarize(e)}. Model outputs: '
        f'{_shapes(outputs)}; labels: {_shapes(labels)}. To train integer '
        'class labels, Use SparseCategoricalCrossentropy with one output unit per '
        'class; for 0/1 labels, BinaryCrossentropy with one unit. Expected '
        'outputs the loss takes with these labels. Received: the shapes '
        'above.') from e
  if not np.all(np.isfinite(np.asarray(value))):
    raise SpecError(
        f'{where}The loss is {np.asarray(value)} on the first batch, before '
        'any training. Check the inputs for NaN/Inf and the label range. '
        f'Expected a finite loss. Received: {np.asarray(value)}.')


def _is_sparse_categorical(loss) -> bool:
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
