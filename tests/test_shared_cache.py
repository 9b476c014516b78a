"""Nothing trusted that another user can write (issue 40): the parsed rows
cache's folder and entries, and scratch folders. Each test is one defect
an attacker on a shared host found; in-process, real entries on real
TFRecords ("another user" is `os.chown(path, 65534, 65534)`, as root:
tests/needs-root.txt; the rule is decided on ownership and mode bits)."""

import json
import logging
import os
import shutil
import threading
import time
import fcntl

import pytest

from message_parts import assert_four_parts
from generic_trainer.system import trust
from generic_trainer.system import owner_lock
from generic_trainer.system import progress
from generic_trainer.system import scratch
from generic_trainer.errors import UnsafeFolderError
from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.data.kept import entry as kept_entry
from generic_trainer.data.kept import key as kept_key
from generic_trainer.data.kept import settings as kept_settings

from test_kept_rows import (_decisions, _kept_twice, _key, _read, _same,  # pylint: disable=g-bad-import-order
                            span)  # pylint: disable=unused-import

_NOBODY = 65534


def _entry(folder, source):
  return os.path.join(str(folder), kept_key.entry_name(source))


def _poison(entry):
  """Changes every label of the entry in place and recomputes the CRC32s,
  as an attacker who can write it would."""
  manifest_path = os.path.join(entry, kept_entry.MANIFEST)
  with open(manifest_path) as f:
    manifest = json.load(f)
  size = kept_entry.row_bytes(manifest['columns'])
  label = kept_entry.row_bytes(manifest['columns'][-1:])
  blocks_path = os.path.join(entry, kept_entry.BLOCKS)
  with open(blocks_path, 'rb') as f:
    data = bytearray(f.read())
  start = 0
  for index, (rows, _) in enumerate(manifest['blocks']):
    end = start + rows * size
    label_start = end - rows * label  # The label: the block's last column.
    data[label_start:end] = bytes([1]) * (rows * label)
    manifest['blocks'][index][1] = kept_entry.zlib.crc32(data[start:end])
    start = end
  with open(blocks_path, 'wb') as f:
    f.write(data)
  with open(manifest_path, 'w') as f:
    json.dump(manifest, f)


@pytest.mark.parametrize('whose', ['another user', 'writable by others'])
def test_a_poisoned_entry_not_ours_alone_is_a_miss_that_says_why(
    span, tmp_path, whose, caplog):
  """Labels changed and CRC32s recomputed in an entry of another user, or
  one writable by group or others: a miss, the log says why, the rows are
  the file's, and this training's entry replaces it."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  _kept_twice(span, tmp_path)
  entry = _entry(tmp_path, span[0])
  _poison(entry)
  for name in os.listdir(entry) + ['']:
    if whose == 'another user':
      os.chown(os.path.join(entry, name), _NOBODY, _NOBODY)
    elif name:
      os.chmod(os.path.join(entry, name), 0o666)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
    store.log_decisions()
  decision, why = _decisions(store)['data_tfrecord-0.gz']
  assert decision == 'miss'
  assert why == ('its folder is owned by uid 65534, not you'
                 if whose == 'another user' else
                 f'its manifest is writable by {_who_else()} (mode 0666)')
  assert any(why in r.getMessage() for r in caplog.records)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
  assert _decisions(store)['data_tfrecord-0.gz'][0] == 'hit'


def test_a_cache_folder_of_another_user_writable_by_all_is_refused(tmp_path):
  """The folder --output-dir refuses is refused as --parsed-rows-cache
  too, by the command, the Estimator and the store itself; nothing is
  written there."""
  folder = tmp_path / 'shared-rows'
  folder.mkdir()
  os.chown(folder, _NOBODY, _NOBODY)
  os.chmod(folder, 0o777)
  for name in ('--parsed-rows-cache', 'parsed_rows_cache'):
    with pytest.raises(UnsafeFolderError) as info:
      kept_settings.checked_folder(str(folder), name=name)
    message = str(info.value)
    assert message.startswith(
        f'{name} {folder} is not safe to write: it is owned by ')
    assert 'uid 65534' in message and 'mode 0777' in message
    assert_four_parts(message)
  with pytest.raises(UnsafeFolderError, match='uid 65534'):
    with kept_cache.SpanCache(str(folder)):
      pass
  assert not os.listdir(folder)


def _sweep_at(path_of_lock):
  """A sweeper's probe holding the lock `path_of_lock` for 50 ms."""
  fd = os.open(path_of_lock, os.O_RDONLY)
  fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  threading.Timer(0.05, os.close, [fd]).start()


def test_a_scratch_folder_is_locked_though_a_sweeper_probes_it(
    tmp_path, monkeypatch):
  """A probe holding the new folder's lock file as its owner locks it: the
  owner waits for it, and the folder is never left unlocked for the next
  sweep to delete under a running training."""
  monkeypatch.setenv('TMPDIR', str(tmp_path))
  monkeypatch.setattr(scratch.tempfile, 'tempdir', str(tmp_path))
  made = scratch.tempfile.mkdtemp

  def mkdtemp_then_probe(**kwargs):
    path = made(**kwargs)
    lock = os.path.join(path, scratch.LOCK_FILE)
    open(lock, 'w').close()  # pylint: disable=consider-using-with
    _sweep_at(lock)
    return path

  monkeypatch.setattr(scratch.tempfile, 'mkdtemp', mkdtemp_then_probe)
  with scratch.folder('test') as path:
    time.sleep(0.1)  # The probe is gone.
    assert owner_lock.in_use(os.path.join(path, scratch.LOCK_FILE))
    scratch.remove_stale(str(tmp_path))  # Another training's sweep.
    assert os.path.isdir(path)


def test_a_scratch_folder_whose_lock_stays_taken_is_an_error(
    tmp_path, monkeypatch):
  """A failed lock is not ignored: the folder is removed and the error
  says which folder and what to do."""
  monkeypatch.setenv('TMPDIR', str(tmp_path))
  monkeypatch.setattr(scratch.tempfile, 'tempdir', str(tmp_path))
  monkeypatch.setattr(scratch, '_LOCK_WAIT_S', 0.1, raising=False)
  made, holders = scratch.tempfile.mkdtemp, []

  def mkdtemp_held(**kwargs):
    path = made(**kwargs)
    holders.append(owner_lock.OwnerLock(os.path.join(path, scratch.LOCK_FILE)))
    assert holders[-1].acquire()
    return path

  monkeypatch.setattr(scratch.tempfile, 'mkdtemp', mkdtemp_held)
  with pytest.raises(OSError) as info:
    with scratch.folder('test'):
      pass
  assert_four_parts(str(info.value))
  assert not [n for n in os.listdir(tmp_path) if n.startswith(scratch.PREFIX)]
  holders[0].release()


def test_an_owner_lock_probe_is_shared(tmp_path):
  """Two sweepers probing at once do not take each other's probe for a
  live owner (a probe is a shared lock)."""
  lock = tmp_path / scratch.LOCK_FILE
  lock.write_text('')
  fd = os.open(lock, os.O_RDONLY)
  fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # The other sweeper's probe.
  try:
    assert not owner_lock.in_use(str(lock))
  finally:
    os.close(fd)


def test_an_entry_left_half_removed_is_replaced_not_evicted(span, tmp_path):
  """Blocks without a manifest: the next training misses saying so and
  writes the entry of that key in its place (not 'another writer put it
  in place first'); eviction, which removes only what carries our
  manifest (a name is no proof: issue 55), leaves such a folder."""
  _kept_twice(span, tmp_path)
  os.unlink(os.path.join(_entry(tmp_path, span[0]), kept_entry.MANIFEST))
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
  decision = store.decisions[span[0]]
  assert (decision['decision'], decision['written']) == ('miss', True)
  assert 'another writer' not in decision['why']
  with kept_cache.SpanCache(str(tmp_path)) as store:
    _read(span, store)
  assert _decisions(store)['data_tfrecord-0.gz'][0] == 'hit'
  os.unlink(os.path.join(_entry(tmp_path, span[1]), kept_entry.MANIFEST))
  store = kept_cache.SpanCache(str(tmp_path))
  assert kept_key.entry_name(span[1]) not in store.evict_to_budget()
  assert os.path.isdir(_entry(tmp_path, span[1]))


@pytest.mark.parametrize('change', ['evicted', 'replaced'])
def test_a_reader_reads_the_entry_it_checked(span, tmp_path, change):
  """An entry evicted, or replaced by another key's, after its check and
  before its blocks are read (later epochs): the training reads the
  blocks it checked, not NotFoundError and not another key's rows."""
  _kept_twice(span, tmp_path)
  other = tmp_path.with_name(tmp_path.name + '-other')  # Not in the cache.
  _kept_twice(span[1:], other)
  entry = _entry(tmp_path, span[0])
  real_lookup = kept_cache.SpanCache.lookup

  def lookup_then_change(store, source, key):
    found = real_lookup(store, source, key)
    if source == span[0]:
      shutil.rmtree(entry)
      if change == 'replaced':
        shutil.copytree(_entry(other, span[1]), entry)
    return found

  kept_cache.SpanCache.lookup = lookup_then_change
  try:
    with kept_cache.SpanCache(str(tmp_path)) as store:
      rows = _read(span, store)
  finally:
    kept_cache.SpanCache.lookup = real_lookup
  assert _decisions(store)['data_tfrecord-0.gz'][0] == 'hit'
  assert _same(rows, _read(span))


def test_an_entry_is_locked_by_its_writer_until_it_is_in_place(
    span, tmp_path, monkeypatch):
  """A sweep (another training entering the folder) as the finished entry
  is renamed in finds it in use: its owner lock is held through the
  rename, and the entry lands whole."""
  seen = []
  real = kept_cache.SpanCache.put_in_place

  def swept_then_put(store, temp, final, key, synced=False):
    seen.append(owner_lock.in_use(os.path.join(temp, kept_entry.OWNER)))
    kept_cache.SpanCache(store.folder).__enter__()  # Its sweep.
    return real(store, temp, final, key, synced)

  monkeypatch.setattr(kept_cache.SpanCache, 'put_in_place', swept_then_put)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    _read(span, store)
  assert seen == [True, True]
  assert all(d['written'] for d in store.decisions.values())
  monkeypatch.undo()
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert store.lookup(span[0], _key(span[0])) is not None


def _who_else() -> str:
  """Who else may write a 0666 file of ours: others, and the group unless
  it is ours alone (`trust.owners_group_alone`: root's group, or a user's
  user-private group)."""
  alone = trust.owners_group_alone(os.getegid(), os.geteuid())
  return 'others' if alone else 'group and others'
