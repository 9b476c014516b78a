"""tf.Examples built from rows and the schema, to call a served model.

An export's `serving_default` parses serialized tf.Example with the
schema's features (`loop.export`): an INT feature must come as an
int64_list, a FLOAT one as a float_list, a BYTES one as a bytes_list. A
tf.Example built by hand with a float for an INT feature reaches the
signature and fails inside it with TensorFlow's "Feature: body_mass_g.
Data types don't match. Data type: float but expected type: int64",
which names neither the row nor the fix. `tf_examples` builds the
examples from plain dicts and the schema, and refuses a value of another
type than its feature's before anything is called, naming the feature,
its type in the schema, the row, the value and how to write it
(docs/guides/calling-the-model.md).

A row without a feature the signature parses as required ends inside it
in TensorFlow's "Feature: bill_length_mm (data type: float) is required
but could not be found", which names no row either. Which features those
are the export records (`not_served.required`: the features the model
reads, without labels and weights); given the model's folder,
`tf_examples` refuses a row that lacks one. Without it, the schema alone
cannot tell a label (which a request leaves out) from a feature, so a
row is refused only for lacking a feature the schema requires (presence
min_fraction 1) that another row of the same call carries.
"""

import math
import numbers
from typing import Any, Dict, List, Optional, Sequence, Union

from tensorflow_metadata.proto.v0 import schema_pb2

from generic_trainer.data import feature_names
from generic_trainer.data import not_served
from generic_trainer.data import schema_file
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.system.lazy import tf

# A schema's feature types: what a tf.Example carries each in, and what
# Python values fit it.
_INT, _FLOAT, _BYTES = schema_pb2.INT, schema_pb2.FLOAT, schema_pb2.BYTES
_LISTS = {_INT: 'an int64_list', _FLOAT: 'a float_list',
          _BYTES: 'a bytes_list'}
_TYPE_NAMES = {_INT: 'INT', _FLOAT: 'FLOAT', _BYTES: 'BYTES'}
_EXPECTED = {_INT: 'an int', _FLOAT: 'a number (float or int)',
             _BYTES: 'a str or bytes'}


def tf_examples(rows: Sequence[Dict[str, Any]],
                schema: Union[str, Any],
                model_dir: Optional[str] = None) -> List[bytes]:
  """Serialized tf.Examples of `rows`, each feature typed as `schema` says.

  Args:
    rows: One dict per example: {feature name: a value, or a list of
      values}. Leave out the label (serving signatures do not read it);
      None or [] leaves a feature out of that example.
    schema: The schema the model was trained with: a schema.pbtxt path
      (SchemaGen's artifact, the command's OUTPUT_DIR/schema/schema.pbtxt,
      an Estimator's MODEL_DIR/schema.pbtxt) or a Schema proto.
    model_dir: The export the examples are for (the command's
      OUTPUT_DIR/model), or None. Given, a row that lacks a feature its
      `serving_default` requires is refused; without it, only a row that
      lacks a feature the schema requires and another row carries.

  Returns:
    One serialized tf.Example (bytes) per row: call a model with
    `loaded.signatures['serving_default'](examples=tf.constant(them))`.

  Raises:
    InvalidArgumentError: a feature the schema does not have, or a value
      of another type than its feature's (a float for an INT feature, a
      str for a number), naming the row, the value and how to write it;
      a row without a required feature, naming the row and the feature.
  """
  if isinstance(schema, str):
    schema = schema_file.read(schema)
  types = {f.name: f.type for f in schema.feature}
  required = _required(rows, schema, model_dir)
  examples = []
  for index, row in enumerate(rows):
    features = {}
    for name, value in row.items():
      if name not in types:
        raise InvalidArgumentError(
            f'Row {index} names the feature {name!r}, which the schema does '
            f'not have{feature_names.did_you_mean(name, types)}. Expected '
            f'features of the schema: {", ".join(sorted(types))}. Received: '
            f'{name}={value!r}. Name the features as the schema does, or '
            'leave this one out.')
      values = [] if value is None else (
          list(value) if isinstance(value, (list, tuple)) else [value])
      if values:
        features[name] = _feature(index, name, types[name], values)
    lacked = [name for name in required if name not in features]
    if lacked:
      raise InvalidArgumentError(_lacks(index, row, lacked, model_dir))
    examples.append(tf.train.Example(features=tf.train.Features(
        feature=features)).SerializeToString())
  return examples


def _feature(index: int, name: str, kind: int, values: List[Any]):
  """The tf.train.Feature of `values` for a feature of type `kind`."""
  bad = next((v for v in values if not _fits(kind, v)), _NONE)
  if bad is not _NONE:
    raise InvalidArgumentError(_wrong_type(index, name, kind, bad))
  if kind == _INT:
    return tf.train.Feature(int64_list=tf.train.Int64List(
        value=[int(v) for v in values]))
  if kind == _FLOAT:
    return tf.train.Feature(float_list=tf.train.FloatList(
        value=[float(v) for v in values]))
  return tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[v.encode() if isinstance(v, str) else bytes(v) for v in values]))


_NONE = object()


def _required(rows: Sequence[Dict[str, Any]], schema,
              model_dir: Optional[str]) -> List[str]:
  """The features every row must carry (see the module docstring)."""
  if model_dir is not None:
    served = not_served.required(model_dir)
    if served is not None:
      return served
  left_out = not_served.from_schema(schema)
  carried = {name for row in rows for name, value in row.items()
             if value is not None and value != []}
  return [f.name for f in schema.feature
          if f.presence.min_fraction >= 1.0 and f.name not in left_out and
          f.name in carried]


def _lacks(index: int, row: Dict[str, Any], lacked: List[str],
           model_dir: Optional[str]) -> str:
  """The message for row `index`, which lacks the features `lacked`."""
  names = ', '.join(repr(n) for n in lacked)
  which = (f"the model's serving_default (in {model_dir}) parses "
           'without a default' if model_dir is not None else
           'the schema requires in every example (presence min_fraction 1) '
           'and another row of this call carries')
  return (
      f'Row {index} lacks {names}, which {which}: the signature would refuse '
      'the whole request with TensorFlow\'s "is required but could not be '
      f'found". Expected every row to carry {names}. Received: row {index} '
      f'with {", ".join(sorted(row)) or "no feature"}. Give each row a '
      f'value for {names} (the model reads it), or train a model that '
      'does without it.')


def _fits(kind: int, value: Any) -> bool:
  if kind == _INT:
    return isinstance(value, numbers.Integral)
  if kind == _FLOAT:
    return isinstance(value, numbers.Real)
  if kind == _BYTES:
    return isinstance(value, (str, bytes))
  return True  # A type the schema leaves unknown: TensorFlow decides.


def _wrong_type(index: int, name: str, kind: int, value: Any) -> str:
  """The message for `value` in a feature of type `kind`."""
  kind_name, carrier = _TYPE_NAMES[kind], _LISTS[kind]
  if kind == _INT and isinstance(value, numbers.Real):
    shown = (f'{int(value)}' if float(value).is_integer() else
             f'{math.floor(value)} or {math.ceil(value)}, as you mean it')
    todo = (f'Pass an int ({shown}), or make the feature FLOAT in the '
            'schema and train again.')
  elif kind == _BYTES:
    todo = f'Pass the text ({str(value)!r}) as a str.'
  else:
    todo = ('Pass the number itself, not text (float(value) of a str read '
            'from a file).')
  return (
      f'Row {index} gives the feature {name!r} the value {value!r}, a '
      f'{type(value).__name__}, but {name!r} is {kind_name} in the schema: '
      f'a tf.Example carries it as {carrier}, and the serving signature '
      'would refuse another type with TensorFlow\'s "Data types don\'t '
      f'match". Expected {_EXPECTED[kind]} for {name!r}. Received: '
      f'{name}={value!r} ({type(value).__name__}). {todo}')
