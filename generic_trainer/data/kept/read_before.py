"""Which input files the check before training need not read whole again:
those an earlier check read whole and found whole, whose parsed rows a
training kept (`kept_cache`), unchanged since.

Before training, every TFRecord file of at most
`tfrecords.FULL_CHECK_BYTES` is read to its end, so that a damaged or
truncated one is named before the first step (`fnargs.inputs`,
`data.local_files`): ~1.2 s of CPU per 1M gzip rows. A retraining on a rolling
window of spans would read every span whole again for that alone, more
than reading their kept rows back.

`check_error` is that check. It notes, in this process, each file it read
whole and found whole (its file fields: real path, size, modification
time, compression, content checksum; `kept_key.file_fields`). A training
that keeps the file's rows writes `read_whole: true` in the entry's
manifest for a noted file only (`read_whole`, asked by `kept_cache`):
rows kept of a file no check read (a `run_fn` module's own split) say
false. A later check that finds such an entry in the earlier kept rows,
with the file's fields as they are now, reads only its first record, and
notes the file again (an entry written anew keeps the flag).

Only an entry checked whole spares the read, never a manifest alone: one
of this user's alone (`system.trust`), its blocks' sizes and CRC32s as
its manifest says (`kept_entry.check_entry`), so a manifest put there, or
an entry another user can write, is a full read.

What this trusts is what the entry's key trusts: a file changed in place
with its size, modification time and content checksum kept (a gzip
file's trailer; an uncompressed file's first and last 64 KiB) is taken
for the same file. Damage of that kind is then found when the file is
parsed, not before the first step. Any doubt (no entry, an unreadable
manifest, a field that changed) is a full read: this only saves time.
"""

import json
import os
import zlib
from typing import Any, Dict, Optional

import tensorflow as tf

from generic_trainer.data.kept import key as kept_key
from generic_trainer.data import tfrecords
from generic_trainer.system import paths
from generic_trainer.data.kept import entry as kept_entry
from generic_trainer.data.kept.entry import BLOCKS, MANIFEST

# Real path -> file fields, of the files this process's check read whole.
_READ_WHOLE: Dict[str, Dict[str, Any]] = {}


def check_error(path: str, kept_rows: Optional[str]):
  """`tfrecords.check_error` of `path` (the error, or None when it reads):
  its first record only when the earlier kept rows in `kept_rows` (a cache
  folder or ParsedRows artifact, local or on an object store; None: none)
  say a check read it whole, unchanged since; else read whole when small.
  A file read whole, or found so, without an error is noted."""
  try:
    fields = kept_key.file_fields(path, tfrecords.compression(path))
  except (OSError, tf.errors.OpError):
    fields = None  # The check says what is wrong with it.
  before = fields is not None and _kept_read_whole(kept_rows, fields)
  error = tfrecords.check_error(path, read_whole_before=before)
  if error is None and fields is not None and (
      before or tfrecords.checks_whole(fields['size'])):
    _READ_WHOLE[fields['path']] = fields
  return error


def read_whole(key: Dict[str, Any]) -> bool:
  """Whether this process's check read the file of entry key `key` whole
  and found it whole, with the file fields `key` holds."""
  noted = _READ_WHOLE.get(key.get('path'))
  return noted is not None and all(
      key.get(field) == value for field, value in noted.items())


def _kept_read_whole(kept_rows: Optional[str], fields: Dict[str, Any]
                     ) -> bool:
  """Whether `kept_rows` holds an entry of the file of `fields` (its file
  fields now), checked whole (`kept_entry.check_entry`: ours, its blocks'
  CRC32s; on an object store, which has no owners, its blocks' CRC32s),
  whose manifest says a check read the file whole, with those fields. A
  manifest alone never spares the read."""
  if not kept_rows:
    return False
  entry = os.path.join(kept_rows, kept_key.entry_name(fields['path']))
  if paths.is_remote(entry):
    read = _remote_checked(entry)
  else:
    checked = kept_entry.check_entry(entry, None)[0]
    read = checked.manifest if checked is not None else None
    if checked is not None:
      checked.close()
  try:
    key = read['key']
    return read.get('read_whole') is True and all(
        key[field] == value for field, value in fields.items())
  except (KeyError, TypeError):
    return False


def _remote_checked(entry: str) -> Optional[Dict[str, Any]]:
  """The manifest of the remote entry `entry` when its blocks are whole
  (size and CRC32s); else None."""
  try:
    with tf.io.gfile.GFile(os.path.join(entry, MANIFEST), 'r') as f:
      manifest = json.loads(f.read())
    if kept_entry.manifest_mismatch(manifest, None):
      return None
    size_of_row = kept_entry.row_bytes(manifest['columns'])
    with tf.io.gfile.GFile(os.path.join(entry, BLOCKS), 'rb') as f:
      for rows, crc in manifest['blocks']:
        if zlib.crc32(f.read(rows * size_of_row)) != crc:
          return None
      return manifest if not f.read(1) else None
  except (tf.errors.OpError, ValueError, KeyError, TypeError):
    return None
