"""TFRecord files as ExampleGen writes them: gzip when the name ends in .gz.

The one place that knows a file's compression from its name, and reads a
file's first record to tell early whether it is a readable TFRecord file.
"""

from typing import List


def compression(path: str) -> str:
  """'GZIP' for a name ending in .gz (as ExampleGen writes them), else ''."""
  return 'GZIP' if path.endswith('.gz') else ''


def common_compression(files: List[str]) -> str:
  """The compression of `files`, which must all be of one kind.

  Raises:
    InputArtifactError: gzip and uncompressed files are mixed.
  """
  kinds = {compression(f) for f in files}
  if len(kinds) > 1:
    from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
    raise InputArtifactError(
        'The files mix gzip (.gz) and uncompressed TFRecords. Expected one '
        f'kind, as ExampleGen writes them. Received: {sorted(files)[:5]}.')
  return kinds.pop() if kinds else ''


def describe(path: str) -> str:
  """'gzip TFRecord' or 'TFRecord', for messages."""
  return f'{"gzip " if compression(path) else ""}TFRecord'


def first_record_error(path: str):
  """The error reading the first record of a TFRecord file raises, or None
  when it reads."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.util import deprecation  # pylint: disable=g-import-not-at-top,g-direct-tensorflow-import
  options = tf.io.TFRecordOptions(compression_type=compression(path))
  # TF's record reader, not a tf.data pipeline: ~6 ms a file instead of
  # ~30 ms, and its error says what is wrong with the file.
  try:
    with deprecation.silence():
      next(tf.compat.v1.io.tf_record_iterator(path, options), None)
  except tf.errors.OpError as e:
    return e
  return None
