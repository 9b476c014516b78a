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


# Files up to this size are read to their end before training, so that one
# cut short or damaged past its first record is named then (reading 16 MiB
# of gzip records takes ~0.1 s); larger ones are checked by their first
# record, and a damaged tail is reported when training reaches it.
FULL_CHECK_BYTES = 16 << 20


def read_error(path: str, whole: bool = True):
  """The error reading a TFRecord file (its first record, or all of it with
  `whole`) raises, or None when it reads."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.util import deprecation  # pylint: disable=g-import-not-at-top,g-direct-tensorflow-import
  options = tf.io.TFRecordOptions(compression_type=compression(path))
  # TF's record reader, not a tf.data pipeline: ~6 ms a file instead of
  # ~30 ms, and its error says what is wrong with the file.
  try:
    with deprecation.silence():
      records = tf.compat.v1.io.tf_record_iterator(path, options)
      if whole:
        for _ in records:
          pass
      else:
        next(records, None)
  except tf.errors.OpError as e:
    return e
  if whole and compression(path):
    return _gzip_end_error(path)
  return None


def first_record(path: str):
  """The first record of a TFRecord file (bytes), or None when it has none."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.util import deprecation  # pylint: disable=g-import-not-at-top,g-direct-tensorflow-import
  options = tf.io.TFRecordOptions(compression_type=compression(path))
  with deprecation.silence():
    return next(tf.compat.v1.io.tf_record_iterator(path, options), None)


class TruncatedFile(Exception):
  """A gzip file that ends before its stream does."""


def _gzip_end_error(path: str):
  """TensorFlow's gzip reader takes a stream cut at a record boundary for
  the file's end; zlib tells whether the stream really ended."""
  import zlib  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  stream = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
  try:
    with tf.io.gfile.GFile(path, 'rb') as f:
      while True:
        chunk = f.read(1 << 20)
        if not chunk:
          break
        while chunk:
          stream.decompress(chunk)
          chunk = stream.unused_data  # The next member of the file, if any.
          if chunk:
            stream = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
  except zlib.error as e:
    return TruncatedFile(f'its gzip stream is damaged ({e})')
  if not stream.eof:
    return TruncatedFile('its gzip stream ends before its end marker: the '
                         'file was cut short (corrupt or truncated)')
  return None


def check_error(path: str):
  """The error of the check before training: the whole file when it is at
  most FULL_CHECK_BYTES, else its first record; None when it reads."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    small = tf.io.gfile.stat(path).length <= FULL_CHECK_BYTES
  except tf.errors.OpError as e:
    return e
  return read_error(path, whole=small)
