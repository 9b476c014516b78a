"""The check before training reads a file whole only when no earlier
training read it whole (`data.read_before`): a file whose rows are kept,
unchanged since, is read by its first record; a changed one, or one
without a readable entry, is read whole and its damage named (real
entries on real TFRecords)."""

import json
import os

import pytest
import tensorflow as tf

from generic_trainer.data import read_before
from generic_trainer.data import span_cache
from generic_trainer.data import span_entry
from generic_trainer.data import span_key
from generic_trainer.data import tfrecords

from test_kept_rows import _read, _write  # pylint: disable=g-bad-import-order


@pytest.fixture
def kept(tmp_path):
  """(two gzip TFRecord files, the folder their rows were kept in)."""
  files = [str(tmp_path / 'Split-train' / f'data-{i}.gz') for i in range(2)]
  for path in files:
    _write(path, 300)
  folder = tmp_path / 'parsed-rows'
  with span_cache.SpanCache(str(folder)) as store:
    _read(files, store, epochs=1)
  return files, str(folder)


def _whole_reads(monkeypatch):
  """The files `tfrecords.read_error` reads to their end, as it is called."""
  reads = []
  real = tfrecords.read_error

  def read_error(path, whole=True):
    if whole:
      reads.append(path)
    return real(path, whole)

  monkeypatch.setattr(tfrecords, 'read_error', read_error)
  return reads


def test_a_kept_file_unchanged_is_not_read_whole_again(kept, monkeypatch):
  files, folder = kept
  reads = _whole_reads(monkeypatch)
  for path in files:
    assert read_before.kept_unchanged(path, [None, folder])
    assert tfrecords.check_error(path, read_whole_before=True) is None
  assert not reads
  assert tfrecords.check_error(files[0]) is None  # Without: read whole.
  assert reads == [files[0]]


def test_a_file_cut_short_since_it_was_kept_is_read_whole_and_named(kept):
  files, folder = kept
  with open(files[0], 'rb') as f:
    data = f.read()
  with open(files[0], 'wb') as f:
    f.write(data[:len(data) // 2])
  assert not read_before.kept_unchanged(files[0], [folder])
  error = tfrecords.check_error(files[0], read_before.kept_unchanged(
      files[0], [folder]))
  assert error is not None
  assert read_before.kept_unchanged(files[1], [folder])  # The other one.


def test_a_file_touched_since_is_read_whole(kept):
  files, folder = kept
  stat = os.stat(files[0])
  os.utime(files[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
  assert not read_before.kept_unchanged(files[0], [folder])


@pytest.mark.parametrize('damage', ['no entry', 'not json', 'no key',
                                    'another file'])
def test_without_a_readable_entry_of_the_file_it_is_read_whole(kept, damage):
  files, folder = kept
  entry = os.path.join(folder, span_key.entry_name(files[0]))
  manifest = os.path.join(entry, span_entry.MANIFEST)
  if damage == 'no entry':
    os.unlink(manifest)
  elif damage == 'not json':
    with open(manifest, 'w') as f:
      f.write('{"key": ')
  elif damage == 'no key':
    with open(manifest, 'w') as f:
      json.dump({'blocks': []}, f)
  else:  # The other file's manifest in this file's entry.
    other = os.path.join(folder, span_key.entry_name(files[1]),
                         span_entry.MANIFEST)
    with open(other) as f, open(manifest, 'w') as g:
      g.write(f.read())
  assert not read_before.kept_unchanged(files[0], [folder])


def test_no_folder_of_kept_rows_reads_whole(kept, tmp_path):
  files, _ = kept
  assert not read_before.kept_unchanged(files[0], [])
  assert not read_before.kept_unchanged(files[0], [None])
  assert not read_before.kept_unchanged(files[0], [str(tmp_path / 'none')])
  assert not read_before.kept_unchanged(str(tmp_path / 'gone.gz'), [
      str(tmp_path)])


def test_a_kept_file_is_found_on_an_object_store(kept):
  """A Kubeflow run's ParsedRows artifact: read through tf.io.gfile."""
  files, folder = kept
  remote = 'ram://read-before/parsed-rows'
  for name in os.listdir(folder):
    manifest = os.path.join(folder, name, span_entry.MANIFEST)
    if os.path.exists(manifest):
      tf.io.gfile.makedirs(f'{remote}/{name}')
      tf.io.gfile.copy(manifest, f'{remote}/{name}/{span_entry.MANIFEST}',
                       overwrite=True)
  assert read_before.kept_unchanged(files[0], [remote])
