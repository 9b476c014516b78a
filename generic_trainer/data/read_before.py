"""Which input files an earlier training read whole: those whose parsed rows
it kept (`span_cache`), unchanged since.

Before training, every TFRecord file of at most
`tfrecords.FULL_CHECK_BYTES` is read to its end, so that a damaged or
truncated one is named before the first step (`core.inputs`,
`local.data`). A retraining on a rolling window of spans would read every
span whole again for that alone: ~1.2 s of CPU per 1M gzip rows, more
than reading their kept rows back. A file with a kept entry whose file
fields (real path, size, modification time, compression and content
checksum: `span_key.file_fields`) are the file's now was read whole by
the training that kept it, after the same check; only its first record
is read again. Any doubt (no entry, an unreadable manifest, a field that
changed) is a full read: this only saves time.
"""

import json
import os
from typing import Iterable, Optional

import tensorflow as tf

from generic_trainer.data import span_key
from generic_trainer.data import tfrecords
from generic_trainer.data.span_entry import MANIFEST


def kept_unchanged(path: str, folders: Iterable[Optional[str]]) -> bool:
  """Whether one of `folders` (earlier kept rows: a cache folder, a
  ParsedRows artifact, local or on an object store; None entries are
  skipped) holds an entry of `path` whose file fields are the file's now.
  """
  folders = [f for f in folders if f]
  if not folders:
    return False
  try:
    now = span_key.file_fields(path, tfrecords.compression(path))
  except (OSError, tf.errors.OpError):
    return False
  name = span_key.entry_name(path)
  return any(_file_fields(os.path.join(f, name, MANIFEST), now) == now
             for f in dict.fromkeys(folders))


def check_error(path: str, kept_in: Iterable[Optional[str]]):
  """`tfrecords.check_error` of `path`: read whole unless one of `kept_in`
  holds its rows, unchanged since (`kept_unchanged`)."""
  return tfrecords.check_error(path, kept_unchanged(path, kept_in))


def _file_fields(manifest: str, like: dict) -> Optional[dict]:
  """The fields of `like` in the key of the manifest at `manifest`."""
  try:
    with tf.io.gfile.GFile(manifest, 'r') as f:
      key = json.loads(f.read())['key']
    return {field: key[field] for field in like}
  except (tf.errors.OpError, ValueError, KeyError, TypeError):
    return None
