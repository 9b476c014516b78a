"""Parsed rows kept across trainings (`data.kept.cache`): every mutation of
the data, the parse or the entry is a miss that says why, and every read
gives the rows a cache-less read gives (real entries on real TFRecords)."""

import json
import logging
import os
import subprocess
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO, command_env
from generic_trainer.system import progress
from generic_trainer.data import input_pipeline
from generic_trainer.data.kept import blocks as kept_blocks
from generic_trainer.data.kept import store as kept_store
from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.data.kept import entry as kept_entry
from generic_trainer.data.kept import folder as kept_folder
from generic_trainer.data.kept import key as kept_key

ROWS = (5000, 3000)  # Two files: blocks of 4096 rows and a short last one.

# What a store leaves beside its entries: its decisions and its marker.
_MARKED = sorted([kept_folder.DECISIONS, kept_folder.MARKER])


def _write(path, rows, offset=0.0, extra=False):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with tf.io.TFRecordWriter(path, 'GZIP') as writer:
    for r in range(rows):
      feature = {f'x{j}': tf.train.Feature(float_list=tf.train.FloatList(
          value=[r * 0.001 + j + offset])) for j in range(3)}
      feature['y'] = tf.train.Feature(int64_list=tf.train.Int64List(
          value=[r % 3]))
      if extra:
        feature['z'] = tf.train.Feature(float_list=tf.train.FloatList(
            value=[-r]))
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


@pytest.fixture(scope='module')
def span(tmp_path_factory):
  """A span's train split: two gzip TFRecord files."""
  folder = tmp_path_factory.mktemp('Examples') / '7' / 'Split-train'
  files = [str(folder / f'data_tfrecord-{i}.gz') for i in range(2)]
  for path, rows in zip(files, ROWS):
    _write(path, rows)
  return files


def _config(extra=False, default=None):
  config = {f'x{j}': tf.io.FixedLenFeature([], tf.float32, default)
            for j in range(3)}
  config['y'] = tf.io.FixedLenFeature([], tf.int64)
  if extra:
    config['z'] = tf.io.FixedLenFeature([], tf.float32)
  return config


def _read(files, store=None, config=None, transform=None, epochs=2):
  """The rows of `files` as a seeded, shuffled two-epoch stream reads
  them: (x0 column, label column, every other column by name)."""
  config = config or _config()
  names = {k: k for k in config}
  kept = kept_blocks.with_key(store, config, names, 'y',
                              input_pipeline.PARSE_ROWS, transform)
  dataset = input_pipeline.block_dataset(
      files, config, names, 'y', 256, epochs, True, cache=False, seed=7,
      kept=kept)
  others = sorted(k for k in config if k not in ('x0', 'y'))
  batches = [[f['x0'].numpy(), y.numpy()] + [f[k].numpy() for k in others]
             for f, y in dataset]
  return tuple(np.concatenate(column) for column in zip(*batches))


def _same(a, b):
  return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def _decisions(store):
  return {os.path.basename(f): (d['decision'], d['why'])
          for f, d in store.decisions.items()}


def _kept_twice(span, folder, **kw):
  """Reads with a store twice (writes, then hits); returns the rows."""
  for _ in range(2):
    with kept_cache.SpanCache(str(folder)) as store:
      rows = _read(span, store, **kw)
  assert set(d for d, _ in _decisions(store).values()) == {'hit'}
  return rows


def test_a_second_read_hits_and_gives_the_same_rows(span, tmp_path, caplog):
  """Written as the first read parses, read back by the second: the same
  seeded stream as without the cache; the log says hit."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  expected = _read(span)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), expected)
  assert _decisions(store) == {
      'data_tfrecord-0.gz': ('miss', 'no entry'),
      'data_tfrecord-1.gz': ('miss', 'no entry')}
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), expected)
    store.log_decisions()
  assert _decisions(store) == {
      'data_tfrecord-0.gz': ('hit', '5,000 rows'),
      'data_tfrecord-1.gz': ('hit', '3,000 rows')}
  assert any('parsed rows: hit for' in r.getMessage() and '7/Split-train'
             in r.getMessage() for r in caplog.records)
  summary = json.loads((tmp_path / kept_cache.DECISIONS).read_text())
  assert summary['hits'] == 2 and summary['misses'] == 0


def test_entries_take_less_than_twice_the_gzip_input(span, tmp_path):
  """Cache bytes per row are the parsed columns' bytes: 20 a row here
  (three float32, one int64), with nothing per block but a manifest."""
  _kept_twice(span, tmp_path)
  kept = sum(os.path.getsize(os.path.join(tmp_path, n, kept_entry.BLOCKS))
             for n in os.listdir(tmp_path) if kept_folder.is_entry(n))
  assert kept == sum(ROWS) * 20


def _mutated(span, tmp_path, mutate, read=None):
  """Keeps the span, applies `mutate(folder)`, then reads again: returns
  (the decisions, whether the rows equal a cache-less read)."""
  read = read or (lambda store: _read(span, store))
  _kept_twice(span, tmp_path)
  mutate(tmp_path)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    rows = read(store)
  return _decisions(store), rows


def test_vector_and_integer_columns_come_back_whole(tmp_path_factory):
  """Every column of a hit is cut from its entry's bytes: a float vector of
  shape [2, 3], an int64 vector, floats, the label; one file hits and one
  misses in the same read, and the rows are the cache-less read's."""
  folder = tmp_path_factory.mktemp('vectors') / 'Split-train'
  files = [str(folder / f'data_tfrecord-{i}.gz') for i in range(2)]
  for i, (path, rows) in enumerate(zip(files, ROWS)):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path, 'GZIP') as writer:
      for r in range(rows):
        feature = {
            'x0': _floats([r + i * 0.5]),
            'm': _floats([r * 0.01 + j for j in range(6)]),
            'k': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[r, -r, 2**40 + r])),
            'y': tf.train.Feature(int64_list=tf.train.Int64List(
                value=[r % 5]))}
        writer.write(tf.train.Example(features=tf.train.Features(
            feature=feature)).SerializeToString())
  config = {'x0': tf.io.FixedLenFeature([], tf.float32),
            'm': tf.io.FixedLenFeature([2, 3], tf.float32),
            'k': tf.io.FixedLenFeature([3], tf.int64),
            'y': tf.io.FixedLenFeature([], tf.int64)}
  cache = tmp_path_factory.mktemp('cache')
  expected = _read(files, config=config)
  assert [c.shape for c in expected] == [(16000,), (16000,), (16000, 3),
                                         (16000, 2, 3)]
  with kept_cache.SpanCache(str(cache)) as store:
    _read(files[1:], store, config=config)
  with kept_cache.SpanCache(str(cache)) as store:
    assert _same(_read(files, store, config=config), expected)
  assert _decisions(store) == {
      'data_tfrecord-0.gz': ('miss', 'no entry'),
      'data_tfrecord-1.gz': ('hit', '3,000 rows')}
  with kept_cache.SpanCache(str(cache)) as store:
    assert _same(_read(files, store, config=config), expected)
  assert {d for d, _ in _decisions(store).values()} == {'hit'}


def test_an_empty_file_and_no_label_are_kept_too(tmp_path_factory):
  """A file of no records is an entry of no blocks (a miss, then a hit);
  without a label popped, every column is a feature. The rows are the
  cache-less read's either way."""
  folder = tmp_path_factory.mktemp('empty') / 'Split-train'
  files = [str(folder / f'data_tfrecord-{i}.gz') for i in range(2)]
  _write(files[0], 0)
  _write(files[1], ROWS[0])
  config = _config()
  names = {k: k for k in config}
  cache = tmp_path_factory.mktemp('cache')

  def columns(store=None):
    kept = kept_blocks.with_key(store, config, names, None,
                                input_pipeline.PARSE_ROWS, None)
    blocks = list(input_pipeline.parsed_blocks(files, config, names, None,
                                               True, kept=kept))
    return [np.concatenate([b[k].numpy() for b in blocks])
            for k in sorted(config)]

  expected = columns()
  assert len(expected[0]) == ROWS[0]
  for decision in ('miss', 'hit'):
    with kept_cache.SpanCache(str(cache)) as store:
      assert all(np.array_equal(a, b)
                 for a, b in zip(columns(store), expected))
    assert {d for d, _ in _decisions(store).values()} == {decision}


def _floats(values):
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def test_a_span_rewritten_in_place_misses(tmp_path_factory):
  """The same URI with other rows: the file's checksum (and size, time)
  changed; the new rows are read."""
  folder = tmp_path_factory.mktemp('rewritten') / 'Split-train'
  files = [str(folder / 'data_tfrecord-0.gz')]
  _write(files[0], 5000)
  cache = tmp_path_factory.mktemp('cache')
  _kept_twice(files, cache)
  _write(files[0], 5000, offset=0.5)
  with kept_cache.SpanCache(str(cache)) as store:
    rows = _read(files, store)
  decision, why = _decisions(store)['data_tfrecord-0.gz']
  assert decision == 'miss' and "the file's content checksum" in why, why
  assert _same(rows, _read(files))
  with kept_cache.SpanCache(str(cache)) as store:
    assert _same(_read(files, store), _read(files))
  assert _decisions(store)['data_tfrecord-0.gz'][0] == 'hit'


def test_a_changed_schema_misses(span, tmp_path):
  """Default values in the schema: the parse changed."""
  _kept_twice(span, tmp_path)
  config = _config(default=0.0)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    rows = _read(span, store, config=config)
  assert _same(rows, _read(span, config=config))
  assert _decisions(store)['data_tfrecord-0.gz'] == (
      'miss', 'changed: the parsed features (schema: names, dtypes, shapes '
      'or default values): x0, x1, x2')


def test_an_added_feature_in_the_data_misses(tmp_path_factory):
  """The data gained a column the schema now reads."""
  folder = tmp_path_factory.mktemp('added') / 'Split-train'
  files = [str(folder / 'data_tfrecord-0.gz')]
  _write(files[0], 3000)
  cache = tmp_path_factory.mktemp('cache')
  _kept_twice(files, cache)
  _write(files[0], 3000, extra=True)
  with kept_cache.SpanCache(str(cache)) as store:
    rows = _read(files, store, config=_config(extra=True))
  assert _same(rows, _read(files, config=_config(extra=True)))
  _, why = _decisions(store)['data_tfrecord-0.gz']
  assert "the file's size (" in why and 'default values): z' in why, why


def test_a_changed_transform_graph_misses(span, tmp_path):
  """Another transform_fn (its files are fingerprinted)."""
  graph = tmp_path / 'transform_graph'
  (graph / 'transform_fn').mkdir(parents=True)
  (graph / 'transform_fn' / 'saved_model.pb').write_bytes(b'graph one')
  cache = tmp_path / 'cache'
  _kept_twice(span, cache, transform=str(graph))
  (graph / 'transform_fn' / 'saved_model.pb').write_bytes(b'graph two')
  with kept_cache.SpanCache(str(cache)) as store:
    rows = _read(span, store, transform=str(graph))
  assert _same(rows, _read(span))
  assert _decisions(store)['data_tfrecord-0.gz'] == (
      'miss', 'changed: the Transform graph')


def test_another_parser_version_misses(span, tmp_path, monkeypatch):
  """Entries of another entry format are not read."""
  _kept_twice(span, tmp_path)
  monkeypatch.setattr(kept_key, 'FORMAT_VERSION', kept_key.FORMAT_VERSION + 1)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
  assert _decisions(store)['data_tfrecord-1.gz'] == (
      'miss', f'changed: the entry format ({kept_key.FORMAT_VERSION - 1} -> '
      f'{kept_key.FORMAT_VERSION})')


def test_an_entry_of_another_tensorflow_misses(span, tmp_path, monkeypatch):
  """Written under TensorFlow 2.15.1 (the key says so): not read."""
  real = kept_key.environment_fields
  monkeypatch.setattr(kept_key, 'environment_fields',
                      lambda: dict(real(), tensorflow='2.15.1'))
  with kept_cache.SpanCache(str(tmp_path)) as store:
    _read(span, store)
  monkeypatch.setattr(kept_key, 'environment_fields', real)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
  assert _decisions(store)['data_tfrecord-0.gz'] == (
      'miss', 'changed: the TensorFlow version (2.15.1 -> '
      f'{tf.__version__})')


def _blocks_file(folder, source):
  return os.path.join(str(folder), kept_key.entry_name(source),
                      kept_entry.BLOCKS)


def test_a_truncated_entry_misses(span, tmp_path):
  """Blocks cut short: the size tells, before any row is read."""
  _kept_twice(span, tmp_path)
  path = _blocks_file(tmp_path, span[0])
  os.truncate(path, os.path.getsize(path) - 100)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
  assert _decisions(store)['data_tfrecord-0.gz'] == (
      'miss', 'damaged: its blocks take 99,900 bytes, its manifest says '
      '100,000')


def test_an_entry_it_cannot_read_misses(span, tmp_path):
  """Blocks that cannot be read as a file of ours (a FIFO in their place;
  a link: `test_shared_machine`): a miss that says why, the right rows,
  and no error out of the training."""
  _kept_twice(span, tmp_path)
  blocks = _blocks_file(tmp_path, span[0])
  os.unlink(blocks)
  os.mkfifo(blocks, 0o600)
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
  assert _decisions(store)['data_tfrecord-0.gz'] == (
      'miss', 'its blocks are not a plain file')


def test_a_bit_flipped_entry_misses(span, tmp_path):
  """One bit flipped, the size unchanged: the block's CRC32 tells."""
  _kept_twice(span, tmp_path)
  path = _blocks_file(tmp_path, span[0])
  with open(path, 'r+b') as f:
    f.seek(70_000)
    byte = f.read(1)
    f.seek(70_000)
    f.write(bytes([byte[0] ^ 0x10]))
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
  assert _decisions(store)['data_tfrecord-0.gz'] == (
      'miss', 'damaged: block 0 fails its CRC32')
  with kept_cache.SpanCache(str(tmp_path)) as store:
    _read(span, store)  # The miss wrote a whole entry again.
  assert _decisions(store)['data_tfrecord-0.gz'][0] == 'hit'


def test_a_foreign_manifest_misses(span, tmp_path):
  """A manifest that is not ours (or half a JSON) is a miss."""
  _kept_twice(span, tmp_path)
  manifest = os.path.join(tmp_path, kept_key.entry_name(span[0]),
                          kept_entry.MANIFEST)
  os.chmod(manifest, 0o644)
  with open(manifest, 'w') as f:
    f.write('{"key": ')
  with kept_cache.SpanCache(str(tmp_path)) as store:
    assert _same(_read(span, store), _read(span))
  decision, why = _decisions(store)['data_tfrecord-0.gz']
  assert decision == 'miss' and why.startswith('its manifest is unreadable')


def test_an_iterator_stopped_early_leaves_no_entry(span, tmp_path):
  """The first of a file's two blocks read, then the iterator dropped: an
  unfinished folder while the training lasts, no entry, and nothing left
  once it ends."""
  config = _config()
  names = {k: k for k in config}
  parse = input_pipeline._parse_fn(config, names, 'y')  # pylint: disable=protected-access
  with kept_cache.SpanCache(str(tmp_path)) as store:
    shared = {k: v for k, v in _key(span[0]).items()
              if k not in kept_key.file_fields(span[0], 'GZIP')}
    blocks = kept_blocks.interleaved(
        [span[0]], 'GZIP',
        lambda n: tf.data.TFRecordDataset(n, 'GZIP').batch(4096), parse,
        kept_blocks.block_spec(config, names, 'y'), (store, shared), 'y', 1,
        2, True)
    first, = list(blocks.take(1))
    assert first[1].shape == (4096,)
    assert [n for n in os.listdir(tmp_path) if n.startswith('.tmp-')]
  assert sorted(os.listdir(tmp_path)) == _MARKED


def test_a_dataset_read_after_its_store_was_left_writes_nothing(span,
                                                                tmp_path):
  """Its writers went with the store: every row still comes (the same
  stream as without kept rows), and no entry appears outside a training's
  locks and decisions."""
  config = _config()
  names = {k: k for k in config}
  kept = kept_blocks.with_key(kept_cache.SpanCache(str(tmp_path)), config,
                              names, 'y', input_pipeline.PARSE_ROWS, None)
  with kept[0]:
    dataset = input_pipeline.block_dataset(
        span, config, names, 'y', 256, 2, True, cache=False, seed=7,
        kept=kept)
  rows = [f['x0'].numpy() for f, _ in dataset]
  assert np.array_equal(np.concatenate(rows), _read(span)[0])
  assert sorted(os.listdir(tmp_path)) == _MARKED


_TRAINING = '''
import sys
sys.path[:0] = [sys.argv[1]]
import numpy as np
import tensorflow as tf
from generic_trainer.data import input_pipeline
from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.data.kept import key as kept_key
limit = int(sys.argv[4])
if limit:
  import resource, signal
  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
config = {f'x{j}': tf.io.FixedLenFeature([], tf.float32) for j in range(3)}
config['y'] = tf.io.FixedLenFeature([], tf.int64)
names = {k: k for k in config}
with kept_cache.SpanCache(sys.argv[2]) as store:
  shared = {**kept_key.parser_fields(config, names, 'y', 4096),
            **kept_key.environment_fields(), 'transform': None}
  dataset = input_pipeline.block_dataset(
      sys.argv[5:], config, names, 'y', 256, 1, True, cache=False, seed=7,
      kept=(store, shared))
  np.save(sys.argv[3], np.concatenate([f['x0'].numpy() for f, _ in dataset]))
print({k.rsplit('/', 1)[-1]: d for k, d in store.decisions.items()})
'''


def _trainings(tmp_path, span, cache, count, limit=0):
  script = tmp_path / 'training.py'
  script.write_text(_TRAINING)
  procs = [subprocess.Popen(
      [sys.executable, str(script), REPO, str(cache),
       str(tmp_path / f'rows-{i}.npy'), str(limit)] + span,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=command_env()) for i in range(count)]
  outputs = [p.communicate(timeout=300) for p in procs]
  for proc, (_, err) in zip(procs, outputs):
    assert proc.returncode == 0, err[-3000:]
  return [out for out, _ in outputs]


@pytest.mark.slow
def test_two_trainings_writing_the_same_span_at_once(span, tmp_path):
  """Two processes miss and write the same entries at once: both get the
  right rows, one entry per file stays, and it is whole."""
  cache = tmp_path / 'cache'
  _trainings(tmp_path, span, cache, 2)
  expected = _read(span, epochs=1)[0]
  for i in range(2):
    assert np.array_equal(np.load(tmp_path / f'rows-{i}.npy'), expected)
  entries = [n for n in os.listdir(cache) if kept_folder.is_entry(n)]
  assert sorted(entries) == sorted(kept_key.entry_name(f) for f in span)
  with kept_cache.SpanCache(str(cache)) as store:
    assert _same(_read(span, store), _read(span))
  assert {d for d, _ in _decisions(store).values()} == {'hit'}


@pytest.mark.slow
def test_a_full_disk_while_writing_keeps_no_entry(span, tmp_path):
  """Files may not pass 70 kB (RLIMIT_FSIZE: the kernel refuses the write,
  EFBIG, as on a full disk): the rows are right, the entry is dropped, the
  decision says why, and nothing unfinished is left."""
  cache = tmp_path / 'cache'
  out, = _trainings(tmp_path, span, cache, 1, limit=70_000)
  assert np.array_equal(np.load(tmp_path / 'rows-0.npy'),
                        _read(span, epochs=1)[0])
  assert "not kept: the disk is full" in out, out
  assert [n for n in os.listdir(cache) if kept_folder.is_entry(n)] == [
      kept_key.entry_name(span[1])]  # 60 kB of rows: kept.


def test_least_recently_used_entries_go_past_the_budget(span, tmp_path):
  """Over a budget of 70 kB the least recently used entry goes first, but
  never one in use."""
  _kept_twice(span, tmp_path)
  os.utime(os.path.join(tmp_path, kept_key.entry_name(span[0]),
                        kept_entry.MANIFEST), (1, 1))
  with kept_cache.SpanCache(str(tmp_path), budget_bytes=70_000,
                            evict=False) as store:
    assert store.lookup(span[0], _key(span[0])) is not None  # In use.
    assert store.evict_to_budget() == [kept_key.entry_name(span[1])]
  store = kept_cache.SpanCache(str(tmp_path), budget_bytes=70_000)
  assert store.evict_to_budget() == [kept_key.entry_name(span[0])]


def _key(path):
  config = _config()
  return {**kept_key.parser_fields(config, {k: k for k in config}, 'y',
                                   input_pipeline.PARSE_ROWS),
          **kept_key.environment_fields(), 'transform': None,
          **kept_key.file_fields(path, 'GZIP')}


def test_an_earlier_artifacts_entries_are_carried_over(span, tmp_path):
  """A pipeline's ParsedRows input: hits are linked into the new output,
  which then holds this execution's files only."""
  earlier, later = tmp_path / 'earlier', tmp_path / 'later'
  _kept_twice(span[:1], earlier)
  with kept_cache.SpanCache(str(later), previous=str(earlier)) as store:
    assert _same(_read(span, store), _read(span))
  assert _decisions(store) == {'data_tfrecord-0.gz': ('hit', '5,000 rows'),
                               'data_tfrecord-1.gz': ('miss', 'no entry')}
  entry = kept_key.entry_name(span[0])
  assert os.path.samefile(earlier / entry / kept_entry.BLOCKS,
                          later / entry / kept_entry.BLOCKS)
  assert len([n for n in os.listdir(later) if kept_folder.is_entry(n)]) == 2


def test_the_parsed_rows_flags_are_checked(tmp_path):
  """--parsed-rows-cache: a folder outside the output folder, or off;
  --parsed-rows-budget: positive gigabytes; each message has four parts."""
  from message_parts import assert_four_parts  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  module = tmp_path / 'mod.py'
  module.write_text('def run_fn(fn_args):\n  pass\n')
  data = tmp_path / 'train.csv'
  data.write_text('a,b\n1,2\n')
  out = tmp_path / 'out'
  base = ['--module-file', str(module), '--train-data', str(data),
          '--output-dir', str(out)]
  kept = cli_args.parse(base, 0.0).parsed_rows
  assert kept.folder == os.path.join(
      os.environ['XDG_CACHE_HOME'], 'tfx-generic-trainer', 'parsed-rows')
  assert kept.budget_bytes is None
  kept = cli_args.parse(base + ['--parsed-rows-cache', str(tmp_path / 'r'),
                                '--parsed-rows-budget', '0.5'], 0.0).parsed_rows
  assert (kept.folder, kept.budget_bytes) == (str(tmp_path / 'r'),
                                              500_000_000)
  assert cli_args.parse(base + ['--parsed-rows-cache', 'off'],
                        0.0).parsed_rows is None
  for extra, text in (
      (['--parsed-rows-cache', str(data)], '--parsed-rows-cache names a file'),
      (['--parsed-rows-cache', str(out / 'rows')],
       '--parsed-rows-cache is inside --output-dir'),
      (['--parsed-rows-cache', 'gs://bucket/rows'],
       '--parsed-rows-cache names an object store'),
      (['--parsed-rows-cache', ' '], '--parsed-rows-cache must name a '
       'folder'),
      (['--parsed-rows-budget', '-1'], '--parsed-rows-budget must be a '
       'positive number of gigabytes')):
    with pytest.raises(InvalidArgumentError, match=text) as info:
      cli_args.parse(base + extra, 0.0)
    assert_four_parts(str(info.value))


def test_the_estimators_cache_folder_is_checked(tmp_path):
  """parsed_rows_cache=: a local folder (a path object too), True or
  False; an object store, a number or a file is refused when the
  Estimator is made, with a message in four parts."""
  import pathlib  # pylint: disable=g-import-not-at-top
  from message_parts import assert_four_parts  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.notebook.estimator import Estimator  # pylint: disable=g-import-not-at-top
  model_dir = str(tmp_path / 'model')
  kept = Estimator(PenguinSpec, model_dir,
                   parsed_rows_cache=pathlib.Path('rows'))._parsed_rows_dir  # pylint: disable=protected-access
  assert kept == os.path.abspath('rows')
  assert Estimator(PenguinSpec, model_dir,
                   parsed_rows_cache=False)._parsed_rows_dir is None  # pylint: disable=protected-access
  a_file = tmp_path / 'a-file'
  a_file.write_text('')
  for value, text in (('gs://bucket/rows', 'names an object store'),
                      (3, 'must name a folder'), (str(a_file), 'names a file')):
    with pytest.raises(InvalidArgumentError,
                       match=f'parsed_rows_cache {text}') as info:
      Estimator(PenguinSpec, model_dir, parsed_rows_cache=value)
    assert_four_parts(str(info.value))


def test_keep_parsed_rows_must_be_a_flag():
  """keep_parsed_rows='yes' is refused when the pipeline is built; a
  ParsedRows input alone keeps rows for the next execution too."""
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer, ParsedRows  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  examples = Channel(type=standard_artifacts.Examples)
  module = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  with pytest.raises(InvalidArgumentError, match="'keep_parsed_rows' must "
                     'be True, False or None'):
    GenericTrainer(examples=examples, module_file=module,
                   keep_parsed_rows='yes')
  assert 'updated_parsed_rows' not in GenericTrainer(
      examples=examples, module_file=module).outputs
  trainer = GenericTrainer(examples=examples, module_file=module,
                           parsed_rows=Channel(type=ParsedRows))
  assert trainer.outputs['updated_parsed_rows'].type is ParsedRows


@pytest.mark.slow
def test_a_second_estimator_training_reads_the_rows_back(
    penguin_artifacts, tmp_path, caplog, monkeypatch):
  """The notebook Estimator (as the command) keeps rows in its cache
  folder: the second training on the same TFRecords parses nothing, and
  its check before training reads no file whole again."""
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.notebook.estimator import Estimator  # pylint: disable=g-import-not-at-top
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  examples, _ = penguin_artifacts
  train = os.path.join(examples.uri, 'Split-train', '*')
  evaluation = os.path.join(examples.uri, 'Split-eval', '*')
  cache = tmp_path / 'parsed-rows'

  class Seeded(PenguinSpec):
    shuffle_seed = 3
    epochs = 1

  results, lines, whole = [], [], _whole_reads(monkeypatch)
  for run in range(2):
    caplog.clear()
    whole.append([])
    est = Estimator(Seeded, str(tmp_path / f'run{run}'),
                    parsed_rows_cache=str(cache))
    results.append(est.train(train, eval_data=evaluation))
    lines.append([r.getMessage() for r in caplog.records
                  if r.getMessage().startswith('parsed rows: ')])
  assert all(' parsing ' in line and ' this run ' in line
             for line in lines[0]), lines[0]
  assert lines[1] and all(' hit for ' in l for l in lines[1]), lines[1]
  assert [r['epochs'] for r in results] == [1, 1]
  assert len(whole[0]) == 2 and whole[1] == [], whole  # One file a split.


def _whole_reads(monkeypatch):
  """A list that each training appends a list to; the files the check
  before training reads to their end go in the last one."""
  from generic_trainer.data import tfrecords  # pylint: disable=g-import-not-at-top
  reads, real = [], tfrecords.read_error

  def read_error(path, whole=True):
    if whole:
      reads[-1].append(path)
    return real(path, whole)

  monkeypatch.setattr(tfrecords, 'read_error', read_error)
  return reads


def test_a_cache_folder_that_cannot_be_made_keeps_nothing(tmp_path, caplog):
  """A folder that cannot be made (here under a file; a read-only home
  alike): the training goes on without kept rows, and the log says why."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  blocker = tmp_path / 'a-file'
  blocker.write_text('')
  fn_args = types.SimpleNamespace(parsed_rows_dir=str(blocker / 'rows'))
  with kept_store.store(fn_args) as store:
    assert store is None
  assert any(r.getMessage().startswith('parsed rows: not kept: ')
             for r in caplog.records)


def test_a_worker_that_is_not_the_chief_writes_nothing(span, tmp_path):
  """Every worker reads every file (data sharding); the chief writes the
  misses, the others read what is kept and write nothing."""
  cache, scratch_out = tmp_path / 'cache', tmp_path / 'worker-1'
  expected = _read(span)
  worker = types.SimpleNamespace(
      parsed_rows_dir=str(scratch_out), parsed_rows_from=str(cache),
      is_chief=False)
  with kept_store.store(worker) as store:
    assert _same(_read(span, store), expected)
  assert set(d for d, _ in _decisions(store).values()) == {'miss'}
  assert sorted(os.listdir(scratch_out)) == _MARKED
  _kept_twice(span, cache)
  with kept_store.store(worker) as store:
    assert _same(_read(span, store), expected)
  assert set(d for d, _ in _decisions(store).values()) == {'hit'}


def test_the_commands_budget_reaches_a_training_through_its_request():
  """Through local workers or a child process, the command's cache folder
  is the request's ParsedRows input and output, with its budget."""
  from generic_trainer.fnargs import fn_args  # pylint: disable=g-import-not-at-top
  from generic_trainer.data.kept import settings as kept_settings  # pylint: disable=g-import-not-at-top
  for budget in (5_000_000, None):
    inputs, outputs = {}, {}
    kept_settings.KeptRows('/c', budget).add_artifacts(inputs, outputs)
    assert [a.uri for a in inputs['parsed_rows'] +
            outputs['updated_parsed_rows']] == ['/c', '/c']
    assert fn_args._budget(outputs['updated_parsed_rows']) == budget  # pylint: disable=protected-access


@pytest.mark.slow
def test_the_commands_local_workers_keep_rows_for_the_next_run(
    penguin_artifacts, tmp_path):
  """`--num-workers 2`: the chief keeps every file's rows in the cache
  folder, worker 1 writes none; the next run (one process) reads them
  all back."""
  examples, schema = penguin_artifacts
  cache = tmp_path / 'cache'
  logs = []
  for run, workers in enumerate(('2', '1')):
    done = subprocess.run(
        [sys.executable, '-m', 'generic_trainer', '--module-file',
         os.path.join(REPO, 'module_files', 'penguin_spec.py'),
         '--train-data', os.path.join(examples.uri, 'Split-train', '*'),
         '--eval-data', os.path.join(examples.uri, 'Split-eval', '*'),
         '--schema', os.path.join(schema.uri, 'schema.pbtxt'),
         '--output-dir', str(tmp_path / f'out{run}'), '--steps', '10',
         '--num-workers', workers, '--parsed-rows-cache', str(cache)],
        env=command_env(), capture_output=True, text=True, timeout=400,
        check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    logs.append([line for line in done.stderr.splitlines()
                 if 'parsed rows: ' in line])
  assert len(logs[0]) == 4 and all(' this run ' in l for l in logs[0])
  assert sum('[worker 1]' in l and '(the chief keeps them)' in l
             for l in logs[0]) == 2, logs[0]
  assert len(logs[1]) == 2 and all(' hit for ' in l for l in logs[1]), logs


def _schema():
  """The schema of the span's files (three floats, an int label)."""
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  schema = schema_pb2.Schema()
  for name in ('x0', 'x1', 'x2', 'y'):
    feature = schema.feature.add(name=name, type=(
        schema_pb2.INT if name == 'y' else schema_pb2.FLOAT))
    feature.shape.dim.add(size=1)
    feature.presence.min_fraction = 1.0
  return schema


def test_a_run_fn_modules_datasets_keep_rows_too(span, tmp_path):
  """`fn_args.data_accessor.tf_dataset_factory` with a store: TFXIO's
  features (the same spec), every row once, written by the first read and
  read back by the second; no store: DatasetFactory's dataset."""
  from tfx_bsl.tfxio.dataset_options import TensorFlowDatasetOptions  # pylint: disable=g-import-not-at-top
  from generic_trainer.data.kept import factory as kept_factory  # pylint: disable=g-import-not-at-top
  schema = _schema()
  options = TensorFlowDatasetOptions(batch_size=500, label_key='y',
                                     num_epochs=1, shuffle_seed=3)
  plain = input_pipeline.DatasetFactory()(span, options, schema)

  def rows(dataset):
    """The (x0, label) pairs, sorted: every row once, whatever the order."""
    x, y = zip(*[(f['x0'].numpy(), label.numpy()) for f, label in dataset])
    pairs = np.stack([np.concatenate(x)[:, 0],
                      np.concatenate(y)[:, 0].astype(np.float32)], axis=1)
    return pairs[np.lexsort(pairs.T[::-1])]

  expected = rows(plain)
  decided = []
  for _ in range(2):
    with kept_cache.SpanCache(str(tmp_path)) as store:
      kept = kept_factory.KeptRowsFactory(store, None)(span, options, schema)
      assert kept.element_spec == plain.element_spec
      assert np.array_equal(rows(kept), expected)
    decided.append(sorted(d for d, _ in _decisions(store).values()))
  assert decided == [['miss', 'miss'], ['hit', 'hit']]


def test_a_run_fn_dataset_blocks_would_change_is_left_as_it_was(span,
                                                                 tmp_path):
  """Unshuffled (TFXIO's file-after-file order, which a module may line
  predictions up against), or with several workers (TFXIO's datasets
  shard by file): DatasetFactory's dataset, and nothing looked up."""
  from tfx_bsl.tfxio.dataset_options import TensorFlowDatasetOptions  # pylint: disable=g-import-not-at-top
  from generic_trainer.data.kept import factory as kept_factory  # pylint: disable=g-import-not-at-top
  schema = _schema()
  for workers, options in (
      (1, TensorFlowDatasetOptions(batch_size=500, label_key='y',
                                   num_epochs=1, shuffle=False)),
      (2, TensorFlowDatasetOptions(batch_size=500, label_key='y',
                                   num_epochs=1, shuffle_seed=3))):
    with kept_cache.SpanCache(str(tmp_path)) as store:
      dataset = kept_factory.KeptRowsFactory(store, None, workers)(
          span, options, schema)
      first = next(iter(dataset))
    assert store.decisions == {}
    if not options.shuffle:  # The first file's first rows, in order.
      assert np.allclose(first[0]['x0'].numpy()[:3, 0], [0.0, 0.001, 0.002])


@pytest.mark.slow
def test_a_run_fn_pipeline_execution_reads_the_previous_ones_rows(
    trainer_io, tmp_path, monkeypatch):
  """The tutorial's run_fn module (penguin_keras.py) in two executions of
  GenericTrainer: the second reads back every file the first parsed, and
  ML Metadata's properties on the ParsedRows output say so; its check
  before training reads no file whole again."""
  from generic_trainer.data.kept.artifact import ParsedRows  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  module = os.path.join(REPO, 'module_files', 'penguin_keras.py')
  outputs, whole = [], _whole_reads(monkeypatch)
  for run in range(2):
    whole.append([])
    inputs, output_dict, properties = trainer_io(module_file=module)
    for artifacts in output_dict.values():
      artifacts[0].uri = str(tmp_path / f'run{run}' / artifacts[0].uri)
    outputs.append(ParsedRows())
    outputs[-1].uri = str(tmp_path / f'rows{run}')
    output_dict['updated_parsed_rows'] = [outputs[-1]]
    if run:
      inputs['parsed_rows'] = [outputs[0]]
    GenericExecutor().Do(inputs, output_dict, properties)
  counts = [(a.get_int_custom_property('hits'),
             a.get_int_custom_property('misses')) for a in outputs]
  assert counts == [(0, 2), (2, 0)]
  assert len(whole[0]) == 2 and whole[1] == [], whole


def test_a_block_of_more_columns_than_one_writev_takes_is_written_whole(
    tmp_path):
  """A wide table's block (more columns than IOV_MAX, 1024 on Linux) is
  written in several system calls, every byte in order."""
  views = [memoryview(np.full(3, i, np.int32)).cast('B')
           for i in range(2 * kept_entry._IOV_MAX + 5)]  # pylint: disable=protected-access
  path = tmp_path / 'blocks.bin'
  fd = os.open(path, os.O_WRONLY | os.O_CREAT)
  try:
    kept_entry._write_all(fd, views)  # pylint: disable=protected-access
  finally:
    os.close(fd)
  assert path.read_bytes() == b''.join(bytes(v) for v in views)


def test_the_cache_lines_read_as_information(tmp_path, caplog):
  """A first run's kept-rows line says the rows are parsed this run, with
  none kept yet, not "miss ... (no entry)", which reads like an error."""
  from generic_trainer.data.kept import cache  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import progress  # pylint: disable=g-import-not-at-top
  spans = cache.SpanCache(str(tmp_path))
  spans.decisions['/out/data/Split-train/data.gz'] = {
      'decision': 'miss', 'why': 'no entry', 'key': 'k'}
  with caplog.at_level('INFO', logger=progress.log().name):
    spans.log_decisions()
  (line,) = [r.getMessage() for r in caplog.records]
  assert 'miss' not in line and 'no entry' not in line
  assert line.startswith('parsed rows: parsing ') and (
      'data.gz: none kept yet' in line)
