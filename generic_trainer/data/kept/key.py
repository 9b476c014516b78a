"""What a kept entry of parsed rows is keyed on: everything that changes a row.

An entry holds the parsed blocks of one TFRecord file of a span
(`kept_cache`). Its key is a dict of named fields, kept whole in the
entry's manifest, so that a miss says which field changed ("the file
changed: its size", "TensorFlow 2.15.1 wrote it; this is 2.16.2"):

- the file: its real path (links followed), size, modification time
  (ns) and a content checksum cheap to take (`content_checksum`: a gzip
  file's trailer, CRC32 and length of its whole uncompressed content; else
  a hash of its head and tail, or of all of a small file);
- the parse: the tf.io features (names, dtypes, shapes, default values),
  the tensor names they come out as, the label popped, the records per
  block (`PARSE_ROWS`), the compression;
- where the schema came from: the Transform graph's fingerprint (its
  files' names, sizes and contents), when there is one;
- the parser: the entry format's version, TensorFlow's, tfx_bsl's and
  NumPy's versions, and the byte order the rows are stored in.

The entry's folder is named after the file's real path alone
(`entry_name`): the entry of a file whose key changed is found, told
apart field by field (`differences`) and replaced.
"""

import hashlib
from importlib import metadata
import json
import os
import sys
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow as tf

from generic_trainer.data import tfrecords

FORMAT_VERSION = 1  # Of the entry (kept_cache); a change misses every entry.


def parser_fields(config: Dict[str, Any], names: Dict[str, str],
                  label_key: Optional[str], parse_rows: int) -> Dict[str, Any]:
  """The parse's part of the key: {feature: [tensor name, dtype, shape,
  default value]}, the label popped and the rows per block."""
  features = {}
  for feature, spec in sorted(config.items()):
    default = spec.default_value
    if default is not None:
      default = np.asarray(default).tolist()
    features[feature] = [names[feature], spec.dtype.name,
                         list(spec.shape), default]
  return dict(zip(_PARSER_FIELDS, (features, label_key, parse_rows)))


def parser_part(key: Dict[str, Any]) -> Dict[str, Any]:
  """The fields of `key` that `parser_fields` made."""
  return {field: key[field] for field in _PARSER_FIELDS}


_PARSER_FIELDS = ('features', 'label', 'parse_rows')


def environment_fields() -> Dict[str, Any]:
  """The versions that make the rows: entry format, TensorFlow, tfx_bsl,
  NumPy, and the byte order."""
  return {'format': FORMAT_VERSION, 'tensorflow': tf.__version__,
          'tfx_bsl': _installed_version('tfx-bsl'), 'numpy': np.__version__,
          'byte_order': sys.byteorder}


def transform_fingerprint(transform_graph_path: Optional[str]
                          ) -> Optional[str]:
  """A hash of the Transform output's files (names, sizes, contents), or
  None without one. The folder is small: a graph and its assets."""
  if not transform_graph_path:
    return None
  digest = hashlib.sha256()
  for folder, _, files in sorted(tf.io.gfile.walk(transform_graph_path)):
    for name in sorted(files):
      path = os.path.join(folder, name)
      digest.update(os.path.relpath(path, transform_graph_path).encode())
      with tf.io.gfile.GFile(path, 'rb') as f:
        digest.update(hashlib.sha256(f.read()).digest())
  return digest.hexdigest()


def file_fields(path: str, compression: str) -> Dict[str, Any]:
  """The file's part of the key: real path, size, mtime (ns), compression
  and `tfrecords.content_checksum`.

  Raises:
    OSError: the file cannot be read.
  """
  real = _real(path)
  if '://' in real:
    stat = tf.io.gfile.stat(real)
    size, mtime = stat.length, stat.mtime_nsec
  else:
    stat = os.stat(real)
    size, mtime = stat.st_size, stat.st_mtime_ns
  return {'path': real, 'size': size, 'mtime_ns': mtime,
          'compression': compression,
          'checksum': tfrecords.content_checksum(real, size)}


def entry_name(path: str) -> str:
  """The folder name of a file's entry: a hash of its real path."""
  return hashlib.sha256(_real(path).encode()).hexdigest()[:40]


def fingerprint(key: Dict[str, Any]) -> str:
  """A short hash of a whole key (for logs and the decision record)."""
  return hashlib.sha256(json.dumps(key, sort_keys=True).encode()
                        ).hexdigest()[:16]


# What each key field is, as a miss names it.
_FIELDS = {
    'path': 'the file\'s path', 'size': 'the file\'s size',
    'mtime_ns': 'the file\'s modification time',
    'checksum': 'the file\'s content checksum',
    'compression': 'the compression', 'features': 'the parsed features '
    '(schema: names, dtypes, shapes or default values)',
    'label': 'the label', 'parse_rows': 'the rows per block',
    'transform': 'the Transform graph', 'format': 'the entry format',
    'tensorflow': 'the TensorFlow version', 'tfx_bsl': 'the tfx_bsl version',
    'numpy': 'the NumPy version', 'byte_order': 'the byte order',
}


def differences(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
  """What differs between two keys, as a person reads it: ['the file's
  size (3,200 -> 3,456)', 'the TensorFlow version (2.15.1 -> 2.16.2)'];
  long values are not shown."""
  found = []
  order = list(_FIELDS)
  for field in sorted(set(old) | set(new), key=lambda f: (
      order.index(f) if f in order else len(order), f)):
    before, after = old.get(field), new.get(field)
    if before == after:
      continue
    what = _FIELDS.get(field, field)
    if all(isinstance(v, (str, int, type(None))) and len(str(v)) <= 40
           for v in (before, after)):
      what += f' ({before} -> {after})'
    elif field == 'features' and isinstance(before, dict) and isinstance(
        after, dict):
      changed = sorted(f for f in set(before) | set(after)
                       if before.get(f) != after.get(f))
      what += f': {", ".join(changed[:5])}'
    found.append(what)
  return found


def _installed_version(distribution: str) -> Optional[str]:
  try:
    return metadata.version(distribution)
  except metadata.PackageNotFoundError:
    return None


def _real(path: str) -> str:
  return path if '://' in path else os.path.realpath(path)
