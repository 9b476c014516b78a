"""The check before training reads a file whole only when no earlier check
did (`data.kept.read_before`): a file an earlier check read whole, whose rows
are kept, unchanged since, is read by its first record; a changed one,
one whose rows were kept without a check, or one without a readable entry
is read whole and its damage named (real entries on real TFRecords)."""

import json
import os
import zlib

import pytest
import tensorflow as tf

from generic_trainer.data.kept import read_before
from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.data.kept import entry as kept_entry
from generic_trainer.data.kept import key as kept_key
from generic_trainer.data import tfrecords

from test_kept_rows import _read, _write  # pylint: disable=g-bad-import-order


def _keep(files, folder):
  """Keeps the rows of `files` in `folder` as a training does."""
  with kept_cache.SpanCache(str(folder)) as store:
    _read(files, store, epochs=1)


@pytest.fixture
def kept(tmp_path):
  """(two gzip TFRecord files, checked then kept, the folder of their
  rows)."""
  files = [str(tmp_path / 'Split-train' / f'data-{i}.gz') for i in range(2)]
  for path in files:
    _write(path, 300)
    assert read_before.check_error(path, None) is None  # Read whole.
  folder = str(tmp_path / 'parsed-rows')
  _keep(files, folder)
  return files, folder


@pytest.fixture
def whole_reads(monkeypatch):
  """The files `tfrecords.read_error` reads to their end, as it is called."""
  reads, real = [], tfrecords.read_error

  def read_error(path, whole=True):
    if whole:
      reads.append(path)
    return real(path, whole)

  monkeypatch.setattr(tfrecords, 'read_error', read_error)
  return reads


def _manifest(folder, path):
  return os.path.join(folder, kept_key.entry_name(path), kept_entry.MANIFEST)


def test_a_checked_kept_file_unchanged_is_not_read_whole_again(
    kept, whole_reads):
  files, folder = kept
  for path in files:
    with open(_manifest(folder, path)) as f:
      assert json.load(f)['read_whole'] is True
    assert read_before.check_error(path, folder) is None
  assert not whole_reads
  assert read_before.check_error(files[0], None) is None  # No kept rows.
  assert whole_reads == [files[0]]


def test_rows_kept_without_a_check_do_not_spare_the_read(tmp_path,
                                                         whole_reads):
  """A `run_fn` module's own split: its rows kept, no check ever read it."""
  path = str(tmp_path / 'Split-test' / 'data.gz')
  _write(path, 300)
  folder = str(tmp_path / 'parsed-rows')
  _keep([path], folder)
  with open(_manifest(folder, path)) as f:
    assert json.load(f)['read_whole'] is False
  assert read_before.check_error(path, folder) is None
  assert whole_reads == [path]


def test_a_gzip_file_cut_at_a_record_boundary_kept_unchecked_is_named(
    tmp_path):
  """TensorFlow's reader takes the cut for the file's end, so its rows are
  kept; the check, not spared, finds the gzip stream unfinished."""
  whole = str(tmp_path / 'whole.tfrecord')
  _write(whole, 300)  # Gzip, despite the name: inflated below.
  with open(whole, 'rb') as f:
    records = zlib.decompress(f.read(), wbits=31)
  cut = 0
  for _ in range(200):  # The first 200 records' framing.
    cut += 12 + int.from_bytes(records[cut:cut + 8], 'little') + 4
  stream = zlib.compressobj(wbits=31)
  path = str(tmp_path / 'Split-test' / 'cut.gz')
  os.makedirs(os.path.dirname(path))
  with open(path, 'wb') as f:
    f.write(stream.compress(records[:cut]) + stream.flush(zlib.Z_SYNC_FLUSH))
  assert sum(1 for _ in tfrecords.records(path)) == 200  # Read as whole.
  folder = str(tmp_path / 'parsed-rows')
  _keep([path], folder)
  error = read_before.check_error(path, folder)
  assert isinstance(error, tfrecords.TruncatedFile), error


def test_a_file_cut_short_since_it_was_kept_is_read_whole_and_named(kept):
  files, folder = kept
  with open(files[0], 'rb') as f:
    data = f.read()
  with open(files[0], 'wb') as f:
    f.write(data[:len(data) // 2])
  assert read_before.check_error(files[0], folder) is not None
  assert read_before.check_error(files[1], folder) is None


def test_a_file_touched_since_is_read_whole(kept, whole_reads):
  files, folder = kept
  stat = os.stat(files[0])
  os.utime(files[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
  assert read_before.check_error(files[0], folder) is None
  assert whole_reads == [files[0]]


@pytest.mark.parametrize('damage', ['no entry', 'not json', 'no key',
                                    'another file', 'not a dict'])
def test_without_a_readable_entry_of_the_file_it_is_read_whole(
    kept, damage, whole_reads):
  files, folder = kept
  manifest = _manifest(folder, files[0])
  if damage == 'no entry':
    os.unlink(manifest)
  elif damage == 'another file':  # The other file's manifest in its entry.
    with open(_manifest(folder, files[1])) as f, open(manifest, 'w') as g:
      g.write(f.read())
  else:
    with open(manifest, 'w') as f:
      f.write({'not json': '{"key": ', 'no key': '{"read_whole": true}',
               'not a dict': '[1, 2]'}[damage])
  assert read_before.check_error(files[0], folder) is None
  assert whole_reads == [files[0]]


def test_a_file_found_read_whole_is_noted_again(kept):
  """An entry written anew for it (a changed schema, a new TensorFlow)
  keeps the flag, though this process did not read the file whole."""
  files, folder = kept
  fields = kept_key.file_fields(files[0], 'GZIP')
  read_before._READ_WHOLE.clear()  # pylint: disable=protected-access
  assert not read_before.read_whole(fields)  # A new process.
  assert read_before.check_error(files[0], folder) is None
  assert read_before.read_whole(fields)
  assert not read_before.read_whole({**fields, 'size': fields['size'] + 1})


def test_a_checked_kept_file_is_found_on_an_object_store(kept, whole_reads):
  """A Kubeflow run's ParsedRows artifact: read through tf.io.gfile, its
  blocks' CRC32s checked; a manifest alone there is a full read."""
  files, folder = kept
  remote = 'ram://read-before/parsed-rows'
  for path in files:
    name = kept_key.entry_name(path)
    tf.io.gfile.makedirs(f'{remote}/{name}')
    tf.io.gfile.copy(_manifest(folder, path),
                     f'{remote}/{name}/{kept_entry.MANIFEST}', overwrite=True)
  name = kept_key.entry_name(files[0])
  tf.io.gfile.copy(os.path.join(folder, name, kept_entry.BLOCKS),
                   f'{remote}/{name}/{kept_entry.BLOCKS}', overwrite=True)
  assert read_before.check_error(files[0], remote) is None
  assert read_before.check_error(files[1], remote) is None  # Manifest only.
  assert whole_reads == [files[1]]


@pytest.mark.parametrize('unchecked', ['manifest alone', 'another user',
                                       'writable by others'])
def test_only_an_entry_checked_whole_spares_the_read(kept, unchecked,
                                                     whole_reads):
  """A manifest saying `read_whole: true` without its blocks, or an entry
  that is not this user's alone, is a full read: a gzip file cut short
  would otherwise train on fewer rows, silently (issue 40)."""
  files, folder = kept
  entry = os.path.dirname(_manifest(folder, files[0]))
  if unchecked == 'manifest alone':
    os.unlink(os.path.join(entry, kept_entry.BLOCKS))
  elif unchecked == 'another user':
    for name in os.listdir(entry) + ['']:
      os.chown(os.path.join(entry, name), 65534, 65534)
  else:
    os.chmod(_manifest(folder, files[0]), 0o666)
  assert read_before.check_error(files[0], folder) is None
  assert read_before.check_error(files[1], folder) is None
  assert whole_reads == [files[0]]
