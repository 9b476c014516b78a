"""A TrainSpec's outputs: each one's label, head and weight, in one place.

A spec has one output (`label_key = 'species'`) or several (`label_key =
['species', 'body_mass_g']`, or a head per output: `head = {'species':
MultiClassHead(3), 'body_mass_g': RegressionHead()}`). Each output is named
after its label: the model's output of that name is compared with that
label, by that output's loss and metrics, weighted by its weight column
(the head's `weight_key`, else the spec's). The input pipeline, the checks
before training, compilation and the export all read the outputs from
`outputs_of` and nowhere else.

With one output the model has one output tensor, and Keras names the
metrics plainly (`accuracy`); with several it has a dict of them, and Keras
prefixes each metric with its output's name (`species_accuracy`).
"""

from typing import Any, Callable, Dict, List, Optional

import attr

from generic_trainer.errors import SpecError
from generic_trainer.heads.head import Head
from generic_trainer.heads.head import dense_labels
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import tf


@attr.s(frozen=True)
class Output:
  """One output of a TrainSpec.

  Attributes:
    name: The label's key, which is also the model output's name.
    head: The output's Head, or None when the spec gives its own output
      layer, loss and metrics.
    weight_key: The feature weighting this output's loss, or None.
  """
  name = attr.ib(type=str)
  head = attr.ib(type=Optional[Head], default=None)
  weight_key = attr.ib(type=Optional[str], default=None)


def outputs_of(spec) -> List[Output]:
  """The outputs `spec` declares (a TrainSpec instance or class).

  Raises:
    SpecError: label_key, head and weight_key do not fit together.
  """
  head, label_key = spec.head, spec.label_key
  weight_key = spec.weight_key
  if isinstance(head, dict):
    _check_heads(head)
    names = list(head)
    if label_key is not None and sorted(_as_list(label_key)) != sorted(names):
      raise SpecError(
          f'TrainSpec.head has a head for the labels {names} but label_key '
          f'is {label_key!r}. With a head per output, the labels are the '
          "head dict's keys: leave label_key unset, or make them agree. "
          'Expected label_key to name the same labels, or to be unset. '
          f'Received: label_key={label_key!r}, heads for {names}. Remove '
          'label_key, or list the heads\' labels in it.')
    return [Output(n, head[n], head[n].weight_key or weight_key)
            for n in names]
  names = _as_list(label_key)
  if not names or not all(isinstance(n, str) and n for n in names):
    raise SpecError(
        'TrainSpec.label_key must be a feature name, or a list of them for '
        f'several outputs. Received: label_key={label_key!r}. Set it to the '
        "label column's name, e.g. label_key = 'species'.")
  if len(set(names)) < len(names):
    raise SpecError(f'TrainSpec.label_key names a label twice: {names}. '
                    'Expected each label once. Received: label_key='
                    f'{label_key!r}. Remove the repeated name.')
  if head is None:
    return [Output(n, None, weight_key) for n in names]
  _check_heads({names[0]: head})
  if len(names) > 1:
    raise SpecError(
        f'TrainSpec.head is one {type(head).__name__} but label_key names '
        f'{len(names)} labels {names}. Give a head per label: head = '
        "{'" + names[0] + "': ..., '" + names[1] + "': ...}. Expected a head "
        'per label. Received: one head.')
  return [Output(names[0], head, head.weight_key or weight_key)]


def label_keys(outputs: List[Output]) -> List[str]:
  return [o.name for o in outputs]


def target_keys(outputs: List[Output]) -> List[str]:
  """The label and weight columns the input must read, each once."""
  keys = []
  for key in label_keys(outputs) + [o.weight_key for o in outputs]:
    if key and key not in keys:
      keys.append(key)
  return keys


def plain(outputs: List[Output]) -> bool:
  """One output, no head and no weight: the label is fed as read."""
  return (len(outputs) == 1 and outputs[0].head is None and
          not outputs[0].weight_key)


def per_output(outputs: List[Output], value: Callable[[Output], Any]):
  """`value(output)` of the one output, or {name: value} of several."""
  if len(outputs) == 1:
    return value(outputs[0])
  return {o.name: value(o) for o in outputs}


def targets(outputs: List[Output], columns: Dict[str, Any],
            encode: bool = True):
  """(labels, weights) of a batch of `columns` (TensorFlow tensors).

  Labels are one tensor, or {name: tensor} for several outputs; a head's
  labels are encoded as its loss takes them (`encode`). Weights are None
  without weight columns, else shaped like the labels (ones for an output
  without one).
  """

  def label(output):
    value = columns[output.name]
    return output.head.encode_labels(value) if (
        encode and output.head is not None) else value

  labels = per_output(outputs, label)
  if not any(o.weight_key for o in outputs):
    return labels, None
  rows = tf.shape(tf.nest.flatten(labels)[0])[0]

  def weight(output):
    if not output.weight_key:
      return tf.ones([rows, 1], tf.float32)
    return tf.cast(dense_labels(columns[output.weight_key]), tf.float32)

  return labels, per_output(outputs, weight)


def with_heads(body, outputs: List[Output]):
  """The model: `body` (a functional Keras model whose output is the last
  hidden layer, or a dict of them by output name) with each output's head.

  Raises:
    SpecError: the body is not a functional model, or its outputs do not
      match the heads.
  """
  try:
    inputs, hidden = body.input, body.output
  except (AttributeError, ValueError) as e:
    raise SpecError(
        'With a head, build_model() must return a functional keras.Model '
        'whose output is the last hidden layer (keras.Model(inputs, '
        f'hidden)); the head adds the output layer. Received: {body!r} '
        f'({e}). Build the body with the functional API and return '
        'keras.Model(inputs, hidden).') from e
  names = label_keys(outputs)
  if isinstance(hidden, dict):
    if sorted(hidden) != sorted(names):
      raise SpecError(
          f'build_model() returns a model whose outputs are {sorted(hidden)}'
          f'; with a head per output they must be the outputs {names} (one '
          'hidden layer per head), or one tensor that every head reads. '
          f'Received: outputs {sorted(hidden)}. Name the outputs by label, or '
          'return one hidden tensor.')
  elif isinstance(hidden, (list, tuple)):
    raise SpecError(
        'build_model() returns a model with a list of outputs. With a head, '
        'expected one hidden tensor, or a dict of them keyed by output name. '
        'Received: a list. Return one tensor, or a dict by output name.')
  else:
    hidden = {n: hidden for n in names}
  result = per_output(outputs, lambda o: o.head.output(hidden[o.name], o.name))
  return keras.Model(inputs, result, name=getattr(body, 'name', None))


def head_losses(outputs: List[Output]):
  """Each head's loss: one, or {name: loss}."""
  return per_output(outputs, lambda o: o.head.build_loss())


def metrics_with_heads(outputs: List[Output], extra) -> Any:
  """The heads' metrics followed by `extra` (the spec's build_metrics():
  a list for one output, {name: list} for several)."""
  if len(outputs) == 1:
    return outputs[0].head.build_metrics() + list(extra or [])
  extra = extra or {}
  if not isinstance(extra, dict) or set(extra) - set(label_keys(outputs)):
    raise SpecError(
        'With several outputs, build_metrics() must return extra metrics as '
        f'a dict keyed by output name ({label_keys(outputs)}). Received: '
        f'{extra!r}. Return {{name: [metrics]}} keyed by those names.')
  return {o.name: o.head.build_metrics() + list(extra.get(o.name, []))
          for o in outputs}


def _as_list(label_key) -> List[Any]:
  if label_key is None:
    return []
  return list(label_key) if isinstance(label_key, (list, tuple)) else [
      label_key]


def _check_heads(heads: Dict[str, Any]) -> None:
  if not heads:
    raise SpecError('TrainSpec.head is an empty dict. Expected a head per '
                    'label, or None. Received: head={}. Give a head per label '
                    "(e.g. {'species': MultiClassHead(3)}) or None.")
  for name, head in heads.items():
    if not isinstance(head, Head):
      raise SpecError(
          f'TrainSpec.head for {name!r} must be a head from '
          'generic_trainer.heads (BinaryClassHead, MultiClassHead, '
          f'MultiLabelHead, RegressionHead). Received: {head!r}. Use one of '
          'those (an instance: MultiClassHead(3)).')
