"""TFRecord files as ExampleGen writes them: gzip when the name ends in .gz.

The one owner of the format: a file's compression from its name, reading
its records (`records`, TF's record reader), the framing of a record
(length, its CRC, the data, its CRC) and gzip members (`sample`, for an
estimate without TF's reader), telling early whether a file is a
readable TFRecord file, cut short or not (`check_error`), and a cheap
checksum of its content (`content_checksum`, from the gzip trailer).
"""

import contextlib
import hashlib
import struct
import zlib
from typing import Iterator, List, Optional, Tuple
from generic_trainer.system import atomic_files
from generic_trainer.errors import InputArtifactError
from generic_trainer.system.lazy import tf
from generic_trainer.system.lazy import tf_deprecation

# A record's framing: an 8-byte length and its 4-byte CRC before the data,
# the data's 4-byte CRC after it.
_HEADER_BYTES = 12
_FOOTER_BYTES = 4


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
    raise InputArtifactError(
        'The files mix gzip (.gz) and uncompressed TFRecords. Expected one '
        f'kind, as ExampleGen writes them. Received: {sorted(files)[:5]}. '
        'Keep the files of one kind in the split\'s folder.')
  return kinds.pop() if kinds else ''


def describe(path: str) -> str:
  """'gzip TFRecord' or 'TFRecord', for messages."""
  return f'{"gzip " if compression(path) else ""}TFRecord'


# Files up to this size are read to their end before training, so that one
# cut short or damaged past its first record is named then (reading 16 MiB
# of gzip records takes ~0.1 s); larger ones are checked by their first
# record, and a damaged tail is reported when training reaches it.
FULL_CHECK_BYTES = 16 << 20


def records(path: str) -> Iterator[bytes]:
  """The records of a TFRecord file, in order. TF's record reader, not a
  tf.data pipeline: ~6 ms a file instead of ~30 ms, and its error (a
  `tf.errors.OpError`, raised as the iteration reaches the damage) says
  what is wrong with the file."""
  options = tf.io.TFRecordOptions(compression_type=compression(path))
  with tf_deprecation.silence():
    reader = tf.compat.v1.io.tf_record_iterator(path, options)
  yield from reader


@contextlib.contextmanager
def writer(path: str, mode: Optional[int] = None):
  """A TFRecord writer for `path` (gzip when its name ends in .gz) whose
  file replaces `path` whole once the block ends without an error
  (`atomic_files`: a temporary file beside it until then); a new file gets
  `mode` (less the umask) when given."""
  with atomic_files.replacing_path(
      path, mode, suffix='.gz' if compression(path) else '') as temp:
    with tf.io.TFRecordWriter(temp, options=compression(path)) as records:
      yield records


def read_error(path: str, whole: bool = True):
  """The error reading a TFRecord file (its first record, or all of it with
  `whole`) raises, or None when it reads."""
  try:
    if whole:
      for _ in records(path):
        pass
    else:
      next(records(path), None)
  except tf.errors.OpError as e:
    return e
  if whole and compression(path):
    return _gzip_end_error(path)
  return None


def count(paths: List[str]) -> int:
  """The records of the TFRecord files `paths`, read to their ends."""
  return sum(1 for path in paths for _ in records(path))


def first_record(path: str):
  """The first record of a TFRecord file (bytes), or None when it has none."""
  return next(records(path), None)


def sample(path: str, stored_bytes: int) -> Tuple[List[bytes], int, int, int]:
  """What an estimate of the file's rows needs, without reading the rest:
  (the complete records in the first `stored_bytes` of the file, the bytes
  read, those bytes inflated, the inflated bytes the records take with
  their framing).

  Raises:
    OSError, zlib.error, tf.errors.OpError: the file cannot be read.
  """
  with tf.io.gfile.GFile(path, 'rb') as f:
    stored = f.read(stored_bytes)
  data = _inflate(stored) if compression(path) else stored
  found, framed = _frame(data)
  return found, len(stored), len(data), framed


def _inflate(stored: bytes) -> bytes:
  """As much of a gzip file's start as `stored` holds, inflated (several
  gzip members too)."""
  out = []
  while stored:
    stream = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    out.append(stream.decompress(stored))
    stored = stream.unused_data
  return b''.join(out)


def _frame(data: bytes) -> Tuple[List[bytes], int]:
  """(the complete records at the start of `data`, the bytes they take with
  their framing)."""
  found, offset = [], 0
  while offset + _HEADER_BYTES <= len(data):
    length, = struct.unpack_from('<Q', data, offset)
    end = offset + _HEADER_BYTES + length + _FOOTER_BYTES
    if end > len(data):
      break
    found.append(data[offset + _HEADER_BYTES:end - _FOOTER_BYTES])
    offset = end
  return found, offset


class TruncatedFile(Exception):
  """A gzip file that ends before its stream does."""


def _gzip_end_error(path: str):
  """TensorFlow's gzip reader takes a stream cut at a record boundary for
  the file's end; zlib tells whether the stream really ended."""
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


# An uncompressed file up to this size is hashed whole, a larger one by its
# first and last `_EDGE_BYTES` (`content_checksum`).
_SMALL_FILE = 1 << 20
_EDGE_BYTES = 64 << 10


def content_checksum(path: str, size: int) -> str:
  """A checksum of the file's content, cheap to take: a gzip file's trailer
  ('gzip-trailer:<hex>', its last 8 bytes: the CRC32 and length of all of
  its uncompressed content, one small read; of its last member when it has
  several); else the SHA-256 of all of a small file, or of its first and
  last 64 KiB."""
  with tf.io.gfile.GFile(path, 'rb') as f:
    if compression(path) and size >= 18:
      f.seek(size - 8)
      return f'gzip-trailer:{f.read(8).hex()}'
    if size <= _SMALL_FILE:
      return f'sha256:{hashlib.sha256(f.read()).hexdigest()}'
    head = f.read(_EDGE_BYTES)
    f.seek(size - _EDGE_BYTES)
    return f'sha256-edges:{hashlib.sha256(head + f.read()).hexdigest()}'


def check_error(path: str, read_whole_before: bool = False):
  """The error of the check before training: the whole file when it is at
  most FULL_CHECK_BYTES, else its first record; None when it reads. Only
  its first record with `read_whole_before` (an earlier training read
  this very file whole: `data.kept.read_before`)."""
  try:
    small = checks_whole(tf.io.gfile.stat(path).length)
  except tf.errors.OpError as e:
    return e
  return read_error(path, whole=small and not read_whole_before)


def checks_whole(size: int) -> bool:
  """Whether `check_error` reads a file of `size` bytes to its end."""
  return size <= FULL_CHECK_BYTES
