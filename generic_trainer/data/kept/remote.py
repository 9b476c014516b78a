"""Kept rows where artifacts live on an object store (gs://, or any
`tf.io.gfile` scheme): a Kubeflow run's ParsedRows artifacts, with no
shared volume between executions.

An object store has no locks, links or renames, and a training reads each
entry's bytes twice (the CRC32 check, then the rows), so a training works
in a local folder (`kept_store.store`: a scratch folder of TMPDIR) and the
entries travel through it:

- `fetch`: an entry of the earlier artifact (the `parsed_rows` input),
  its manifest first (a changed key is a miss without a download), then
  its blocks, into a local folder that the store checks whole and puts in
  place, as it does any entry;
- `publish`: when the training ends without an error, each entry it hit
  or wrote goes to the output artifact (`updated_parsed_rows`), its blocks
  before its manifest (an entry without a manifest is no entry; one whose
  upload failed halfway fails its size check), then `decisions.json`.
  The output is this execution's own, so no one else writes it.
"""

import json
import os
from typing import Any, Dict

import tensorflow as tf

from generic_trainer.system import atomic_files
from generic_trainer.system import progress
from generic_trainer.data.kept import key as kept_key
from generic_trainer.data.kept.entry import BLOCKS, MANIFEST
from generic_trainer.data.kept.folder import DECISIONS
from generic_trainer.data.kept.entry import manifest_mismatch


def fetch(entry: str, key: Dict[str, Any], temp: str) -> str:
  """Copies the earlier entry at `entry` (remote) into the empty local
  folder `temp` when its manifest is of `key`; '' when copied, else why
  not (as `kept_entry.check_entry` says it). Its blocks are checked where
  they land, by the store."""
  try:
    with tf.io.gfile.GFile(os.path.join(entry, MANIFEST), 'rb') as f:
      text = f.read()
  except tf.errors.NotFoundError:
    return 'no entry'
  except tf.errors.OpError as e:
    return f'its manifest is unreadable ({e.message})'
  try:
    why = manifest_mismatch(json.loads(text), key)
  except ValueError as e:
    return f'its manifest is unreadable ({e})'
  if why:
    return why
  try:
    tf.io.gfile.copy(os.path.join(entry, BLOCKS), os.path.join(temp, BLOCKS))
  except tf.errors.OpError as e:
    return f'its blocks are unreadable ({e.message})'
  # Ours alone (`trust`), through a descriptor: a link is not followed.
  fd = os.open(os.path.join(temp, BLOCKS), os.O_RDONLY | os.O_NOFOLLOW |
               os.O_CLOEXEC)
  try:
    os.fchmod(fd, 0o600)
  finally:
    os.close(fd)
  atomic_files.write_bytes(os.path.join(temp, MANIFEST), text, 0o600)
  return ''


def publish(store, folder: str) -> None:
  """Uploads the entries of the files `store` (a left `kept_cache.SpanCache`
  on a scratch folder) decided on, hit or written, to the remote `folder`,
  then its decisions (`decisions.json`, noting an entry whose upload
  failed: the next training misses it). Never raises: kept rows only save
  time; a failure is logged."""
  for source in sorted(store.decisions):
    name = kept_key.entry_name(source)
    local, remote = (os.path.join(store.folder, name),
                     os.path.join(folder, name))
    if not os.path.isfile(os.path.join(local, MANIFEST)):
      continue  # Not kept: a miss not written, or not in place.
    try:
      tf.io.gfile.makedirs(remote)
      for part in (BLOCKS, MANIFEST):  # The manifest last: then it is whole.
        tf.io.gfile.copy(os.path.join(local, part),
                         os.path.join(remote, part), overwrite=True)
    except (tf.errors.OpError, OSError) as e:
      store.not_kept(source, f'not uploaded to {folder} ({_message(e)})')
  try:
    atomic_files.write_json(os.path.join(folder, DECISIONS), store.summary(),
                            indent=1)
  except (tf.errors.OpError, OSError) as e:
    progress.log().warning('parsed rows: the decisions could not be written '
                           'to %s (%s)', folder, _message(e))
    return
  progress.log().info('parsed rows: this training\'s entries uploaded to %s',
                      folder)


def _message(error: BaseException) -> str:
  return getattr(error, 'message', None) or str(error)
