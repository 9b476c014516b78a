"""Checks tf.Example data against the parse config a schema gives, before
TensorFlow parses it.

A record that lacks a required feature, holds another kind of value than
the schema says (bytes where it says FLOAT) or the wrong number of values
fails deep in a tf.data graph, with an error that names neither the file
nor the record. `check_examples` reads the first records of each file,
decodes them as tf.Example and compares each feature with the parse config
TFXIO derives from the schema (`tf_example_dataset.parser_config`), the
config training parses with; the first mismatch is an InputArtifactError
that names the file, the record, the feature, what the schema expects and
what the record holds.
"""

from typing import Any, Dict, List

import tensorflow as tf

from generic_trainer.data import tfrecords
from generic_trainer.errors import InputArtifactError

RECORDS_PER_FILE = 64  # Enough to meet a column of another kind.
_KINDS = {'float32': 'float_list', 'int64': 'int64_list',
          'string': 'bytes_list'}
_NAMES = {'float_list': 'floats', 'int64_list': 'ints',
          'bytes_list': 'bytes (strings)', None: 'no values'}


def check_examples(files: List[str], config: Dict[str, Any], what: str,
                   schema_source: str) -> None:
  """Raises InputArtifactError at the first record of `files` that parsing
  with `config` ({feature name: tf.io feature}) would fail on.

  Args:
    files: TFRecord files of tf.Example (gzip when the name ends in .gz).
    config: The parse config, as `tf_example_dataset.parser_config` gives.
    what: What the files are, for the message: 'train', 'eval'...
    schema_source: Where the schema came from, for the message.
  """
  for path in files:
    records = tfrecords.records(path)
    for index in range(RECORDS_PER_FILE):
      try:
        record = next(records, None)
      except tf.errors.OpError:
        break  # Reading errors are the TFRecord checks' to report.
      if record is None:
        break
      problem = record_problem(record, config)
      if problem:
        raise InputArtifactError(
            f'The {what} data does not match the schema ({schema_source}): '
            f'{path}, record {index}: {problem} Fix the data, or the '
            'schema (a feature that may be missing needs '
            'presence.min_fraction below 1 and no fixed shape). Expected '
            'records that follow the schema. Received: the record above.')


def record_problem(record: bytes, config: Dict[str, Any]) -> str:
  """What parsing `record` with `config` would fail on, or ''."""
  try:
    example = tf.train.Example.FromString(record)
  except Exception as e:  # pylint: disable=broad-except
    return (f'it is not a tf.Example ({type(e).__name__}). Expected TFRecord '
            'files of serialized tf.Example, as ExampleGen writes them.')
  features = example.features.feature
  for name, spec in sorted(config.items()):
    kind = _KINDS.get(getattr(spec, 'dtype', tf.string).name)
    feature = features.get(name)
    present = feature.WhichOneof('kind') if feature is not None else None
    count = len(getattr(feature, present).value) if present else 0
    if isinstance(spec, tf.io.FixedLenFeature):
      size = 1
      for dim in spec.shape:
        size *= dim
      if not count:
        if spec.default_value is None:
          return (f'feature {name!r} is missing; the schema makes it '
                  f'required ({size} {_NAMES[kind]} per example).')
        continue
      if present != kind:
        return (f'feature {name!r} holds {_NAMES[present]}; the schema says '
                f'{_NAMES[kind]}. Received: {_preview(feature, present)}.')
      if count != size:
        return (f'feature {name!r} has {count} values; the schema says '
                f'{size} per example. Received: {_preview(feature, present)}.')
    elif present and kind and present != kind:
      return (f'feature {name!r} holds {_NAMES[present]}; the schema says '
              f'{_NAMES[kind]}. Received: {_preview(feature, present)}.')
  return ''


def _preview(feature, kind) -> str:
  values = list(getattr(feature, kind).value)[:5]
  return repr(values)[:120]
