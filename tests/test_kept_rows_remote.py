"""Parsed rows kept where a pipeline's artifacts live on an object store
(`data.kept.remote`): TensorFlow's in-memory filesystem (ram://) stands in
for gs://, through the same `tf.io.gfile` calls and with no links, locks
or renames."""

import os
import tempfile
import types
import uuid

import pytest
import tensorflow as tf

from generic_trainer.system import scratch
from generic_trainer.data import input_pipeline
from generic_trainer.data.kept import blocks as kept_blocks
from generic_trainer.data.kept import store as kept_store
from generic_trainer.data.kept import entry as kept_entry
from generic_trainer.data.kept import key as kept_key
from test_kept_rows import _config, _decisions, _read, _same, _write


@pytest.fixture(scope='module')
def span(tmp_path_factory):
  """A span's train split on local disk: two gzip TFRecord files."""
  folder = tmp_path_factory.mktemp('Examples') / '3' / 'Split-train'
  files = [str(folder / f'data_tfrecord-{i}.gz') for i in range(2)]
  for path, rows in zip(files, (5000, 3000)):
    _write(path, rows)
  return files


@pytest.fixture
def bucket(tmp_path, monkeypatch):
  """A fresh ram:// folder, and a TMPDIR of the test's own (the local
  scratch folders are looked for there)."""
  monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
  return f'ram://bucket-{uuid.uuid4().hex}/pipeline/GenericTrainer'


def _execution(files, bucket, number, previous=None, **read):
  """One execution's training: its ParsedRows output is
  `bucket/updated_parsed_rows/<number>`, its input the earlier one's.
  Returns (rows, the store, the output's URI)."""
  output = f'{bucket}/updated_parsed_rows/{number}'
  fn_args = types.SimpleNamespace(
      parsed_rows_dir=output, parsed_rows_budget=None,
      parsed_rows_from=previous and f'{bucket}/updated_parsed_rows/'
      f'{previous}')
  with kept_store.store(fn_args) as store:
    rows = _read(files, store, **read)
  return rows, store, output


def test_an_object_store_artifact_carries_rows_to_the_next_execution(
    span, bucket, tmp_path):
  """Execution 1 parses both files and uploads their entries; 2 and 3
  fetch them from the previous execution's artifact and read them back:
  the rows a cache-less read gives, every decision in the artifact, and
  no local folder left."""
  expected = _read(span)
  rows, store, first = _execution(span, bucket, 1)
  assert _same(rows, expected)
  assert _decisions(store) == {'data_tfrecord-0.gz': ('miss', 'no entry'),
                               'data_tfrecord-1.gz': ('miss', 'no entry')}
  summary = kept_store.read_decisions(first)
  assert summary['misses'] == 2
  (decisions,) = summary['spans'].values()  # One span: .../3/Split-train.
  assert [d['written'] for d in decisions] == [True, True]
  for path in span:
    entry = f'{first}/{kept_key.entry_name(path)}'
    assert tf.io.gfile.exists(f'{entry}/{kept_entry.MANIFEST}')
    assert tf.io.gfile.exists(f'{entry}/{kept_entry.BLOCKS}')
  for number in (2, 3):
    rows, store, output = _execution(span, bucket, number, number - 1)
    assert _same(rows, expected)
    assert _decisions(store) == {
        'data_tfrecord-0.gz': ('hit', '5,000 rows'),
        'data_tfrecord-1.gz': ('hit', '3,000 rows')}
    assert kept_store.read_decisions(output)['hits'] == 2
  assert not [n for n in os.listdir(tmp_path)
              if n.startswith(scratch.PREFIX)]


def test_a_damaged_or_changed_remote_entry_misses(span, bucket):
  """A truncated upload fails its size check where it lands; a changed
  parse misses on the manifest alone. Both give the right rows."""
  _execution(span, bucket, 1)
  blocks = (f'{bucket}/updated_parsed_rows/1/{kept_key.entry_name(span[0])}'
            f'/{kept_entry.BLOCKS}')
  with tf.io.gfile.GFile(blocks, 'rb') as f:
    data = f.read()
  with tf.io.gfile.GFile(blocks, 'wb') as f:
    f.write(data[:len(data) // 2])
  rows, store, _ = _execution(span, bucket, 2, 1)
  assert _same(rows, _read(span))
  decisions = _decisions(store)
  assert decisions['data_tfrecord-0.gz'][0] == 'miss'
  assert decisions['data_tfrecord-0.gz'][1].startswith('damaged: its blocks')
  assert decisions['data_tfrecord-1.gz'][0] == 'hit'
  config = _config(default=-1.0)
  rows, store, _ = _execution(span, bucket, 3, 2, config=config)
  assert _same(rows, _read(span, config=config))
  assert all(d == 'miss' and why.startswith('changed: the parsed features')
             for d, why in _decisions(store).values())


def test_a_failed_training_uploads_nothing(span, bucket):
  """A training that raises leaves its output artifact empty: TFX does not
  publish it, and no half of an execution's rows is kept."""
  output = f'{bucket}/updated_parsed_rows/1'
  fn_args = types.SimpleNamespace(parsed_rows_dir=output)
  with pytest.raises(RuntimeError, match='the training failed'):
    with kept_store.store(fn_args) as store:
      _read(span, store)
      raise RuntimeError('the training failed')
  assert not tf.io.gfile.exists(output)
  assert kept_store.read_decisions(output) is None


def test_examples_on_the_object_store_are_kept_too(span, bucket):
  """Examples artifacts on the object store: keyed by their URI, size
  and gzip trailer (read through tf.io.gfile), read back the same."""
  remote = [f'{bucket}/Examples/3/Split-train/{os.path.basename(p)}'
            for p in span]
  for local, path in zip(span, remote):
    tf.io.gfile.copy(local, path)
  expected = _read(span)
  for number in (1, 2):
    rows, store, _ = _execution(remote, bucket, number, number - 1 or None)
    assert _same(rows, expected)
    assert [d for d, _ in _decisions(store).values()] == [
        ('miss', 'hit')[number - 1]] * 2


def test_a_failed_upload_is_noted_and_missed_next_time(span, bucket,
                                                       monkeypatch):
  """An entry whose upload fails: the training still succeeds, its
  decision says so, and the next execution parses that file again."""
  copy = tf.io.gfile.copy

  def failing(source, target, overwrite=False):
    if target.startswith(bucket) and target.endswith(kept_entry.BLOCKS):
      raise tf.errors.UnavailableError(None, None, 'the bucket is away')
    return copy(source, target, overwrite)

  monkeypatch.setattr(tf.io.gfile, 'copy', failing)
  _, _, first = _execution(span, bucket, 1)
  monkeypatch.setattr(tf.io.gfile, 'copy', copy)
  (decisions,) = kept_store.read_decisions(first)['spans'].values()
  assert all('not kept: not uploaded to ' in d['why'] and 'the bucket is '
             'away' in d['why'] and d['written'] is False for d in decisions)
  rows, store, _ = _execution(span, bucket, 2, 1)
  assert _same(rows, _read(span))
  assert [d for d, _ in _decisions(store).values()] == ['miss', 'miss']


def test_a_file_read_twice_in_one_training_is_uploaded(span, bucket):
  """Two datasets of the same files made before either is read (a train
  and an eval dataset, a run_fn calling the factory twice): both write
  each entry, one is put in place, it is uploaded and the decision says
  written."""
  config = _config()
  names = {k: k for k in config}
  output = f'{bucket}/updated_parsed_rows/1'
  with kept_store.store(types.SimpleNamespace(parsed_rows_dir=output)) as store:
    kept = kept_blocks.with_key(store, config, names, 'y',
                                input_pipeline.PARSE_ROWS, None)
    datasets = [input_pipeline.block_dataset(
        span, config, names, 'y', 256, 1, False, cache=False, kept=kept)
                for _ in range(2)]
    counts = [sum(int(y.shape[0]) for _, y in d) for d in datasets]
  assert counts == [8000, 8000]
  (decisions,) = kept_store.read_decisions(output)['spans'].values()
  assert [(d['decision'], d['written']) for d in decisions] == [
      ('miss', True), ('miss', True)]
  _, store, _ = _execution(span, bucket, 2, 1)
  assert [d for d, _ in _decisions(store).values()] == ['hit', 'hit']
