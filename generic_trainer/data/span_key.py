"""What a kept entry of parsed rows is keyed on: everything that changes a row.

An entry holds the parsed blocks of one TFRecord file of a span
(`span_cache`). Its key is a dict of named fields, kept whole in the
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
import json
import os
import sys
from typing import Any, Dict, List, Optional

FORMAT_VERSION = 1  # Of the entry (span_cache); a change misses every entry.
_SMALL_FILE = 1 << 20  # Hashed whole when uncompressed and at most this.
_EDGE_BYTES = 64 << 10  # Else its first and last this many bytes.


def parser_fields(config: Dict[str, Any], names: Dict[str, str],
                  label_key: Optional[str], parse_rows: int) -> Dict[str, Any]:
  """The parse's part of the key: {feature: [tensor name, dtype, shape,
  default value]}, the label popped and the rows per block."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  features = {}
  for feature, spec in sorted(config.items()):
    default = spec.default_value
    if default is not None:
      default = np.asarray(default).tolist()
    features[feature] = [names[feature], spec.dtype.name,
                         list(spec.shape), default]
  return {'features': features, 'label': label_key, 'parse_rows': parse_rows}


def environment_fields() -> Dict[str, Any]:
  """The versions that make the rows: entry format, TensorFlow, tfx_bsl,
  NumPy, and the byte order."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    from tfx_bsl import version as bsl  # pylint: disable=g-import-not-at-top
    bsl_version = bsl.__version__
  except ImportError:
    bsl_version = None
  return {'format': FORMAT_VERSION, 'tensorflow': tf.__version__,
          'tfx_bsl': bsl_version, 'numpy': np.__version__,
          'byte_order': sys.byteorder}


def transform_fingerprint(transform_graph_path: Optional[str]
                          ) -> Optional[str]:
  """A hash of the Transform output's files (names, sizes, contents), or
  None without one. The folder is small: a graph and its assets."""
  if not transform_graph_path:
    return None
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
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
  and `content_checksum`.

  Raises:
    OSError: the file cannot be read.
  """
  real = _real(path)
  if '://' in real:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    stat = tf.io.gfile.stat(real)
    size, mtime = stat.length, stat.mtime_nsec
  else:
    stat = os.stat(real)
    size, mtime = stat.st_size, stat.st_mtime_ns
  return {'path': real, 'size': size, 'mtime_ns': mtime,
          'compression': compression,
          'checksum': content_checksum(real, size, compression)}


def content_checksum(path: str, size: int, compression: str) -> str:
  """'gzip-trailer:<crc32>:<length>' (the last 8 bytes of a gzip file:
  its uncompressed content's CRC32 and length, one small read), else
  'sha256:<hex>' of the whole of a small file, or of its first and last
  64 KiB."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(path, 'rb') as f:
    if compression == 'GZIP' and size >= 18:
      f.seek(size - 8)
      return f'gzip-trailer:{f.read(8).hex()}'
    if size <= _SMALL_FILE:
      return f'sha256:{hashlib.sha256(f.read()).hexdigest()}'
    head = f.read(_EDGE_BYTES)
    f.seek(size - _EDGE_BYTES)
    return f'sha256-edges:{hashlib.sha256(head + f.read()).hexdigest()}'


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


def _real(path: str) -> str:
  return path if '://' in path else os.path.realpath(path)
