"""What went wrong when the first batch could not be read, said in the
data's terms.

The first batch runs the whole input pipeline (parse, the spec's
`preprocess`, the label) once before training. When TensorFlow fails
there, its error names a `function_node` and an op (`Cast string to float
is not supported`, `[[{{node Cast}}]]`), not the feature, the schema or the
fix. The usual cause is a schema whose type for a feature disagrees with
what the model does with it: a column of numbers that a user's schema says
is BYTES (strings), which `preprocess` or the model then casts to float; or
a column of words the model reads as numbers. This module finds those
features (the schema's BYTES features the model reads, and their first
values) and says which side to change.
"""

import itertools
from typing import List, Optional

from tensorflow_metadata.proto.v0 import schema_pb2
import tensorflow as tf

from generic_trainer.errors import GenericTrainerError
from generic_trainer.errors import InputArtifactError
from generic_trainer.errors import SpecError
from generic_trainer.errors import summarize
from generic_trainer.data import tfrecords

_SHOWN = 3


def explain(error: BaseException, schema, keys: List[str], files: List[str],
            source: Optional[str]) -> GenericTrainerError:
  """Our error for a TensorFlow error raised reading the first batch.

  Args:
    error: TensorFlow's error.
    schema: The schema the data was parsed with.
    keys: The features the model reads.
    files: The train files.
    source: Where the schema came from (its path), for the message.
  """
  text = summarize(error)
  where = source or 'the schema'
  strings = [f.name for f in schema.feature
             if f.name in keys and f.type == schema_pb2.BYTES]
  if 'string' in text.lower() and strings:
    values = _first_values(files, strings)
    numbers = [k for k in strings if values.get(k) and all(
        _is_number(v) for v in values[k])]
    if numbers:
      shown = '; '.join(f'{k!r}: {values[k][:_SHOWN]}' for k in numbers)
      return InputArtifactError(
          f'The schema and the data disagree on {numbers}: {where} says '
          'BYTES (strings), the data holds numbers, and the model casts '
          f'them to numbers, which TensorFlow cannot do ({text}). Expected '
          f'the type FLOAT or INT for {numbers} in {where}. Received: type '
          f'BYTES in the schema, values {shown} in the data. Set `type: '
          'FLOAT` (or INT) for those features in the schema, or leave '
          '--schema out to infer the types from the data.')
    shown = '; '.join(f'{k!r}: {values.get(k, [])[:_SHOWN]}' for k in strings)
    return SpecError(
        f'The model reads the string feature(s) {strings} as numbers, which '
        f'TensorFlow cannot do ({text}). Expected numbers for every feature '
        f'the model reads as numbers. Received: strings in {where}: '
        f'{shown}. Map the words to numbers in preprocess (e.g. '
        'keras.layers.StringLookup, or a canned spec\'s columns), or leave '
        'those features out of feature_keys.')
  return SpecError(
      f'Reading the first train batch failed: {type(error).__name__}: '
      f'{text}. Expected the features {keys} to parse with {where} and go '
      'through preprocess(). Received: the schema types '
      f'{_types(schema, keys)}. Check that the schema says the type the '
      'data holds, and that preprocess() returns a dict of tensors.')


def _types(schema, keys: List[str]) -> str:
  return ', '.join(f'{f.name}: {schema_pb2.FeatureType.Name(f.type)}'
                   for f in schema.feature if f.name in keys)


def _first_values(files: List[str], names: List[str]):
  """{feature: [value, ...]} of the first records of the first file, as
  text."""
  values = {n: [] for n in names}
  paths = sorted(f for p in files for f in tf.io.gfile.glob(p))
  if not paths:
    return values
  try:
    for record in itertools.islice(tfrecords.records(paths[0]), 20):
      example = tf.train.Example.FromString(record)
      for name in names:
        feature = example.features.feature.get(name)
        if feature is not None and feature.bytes_list.value:
          values[name].append(feature.bytes_list.value[0].decode(
              'utf-8', 'replace'))
  except Exception:  # pylint: disable=broad-except
    pass
  return values


def _is_number(value: str) -> bool:
  try:
    float(value)
  except ValueError:
    return False
  return True
