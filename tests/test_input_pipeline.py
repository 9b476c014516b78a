"""The tuned input: same datasets as TFXIO's for run_fn modules; blocks,
caching and shuffling for TrainSpecs; steps per execution."""

import os
import re
import subprocess
import sys
import textwrap
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from tfx_bsl.public import tfxio

from benchmarks import synthetic_data
from conftest import command_env
from generic_trainer import SpecError
from generic_trainer.data import input_pipeline
from generic_trainer.data.cache_folder import CacheFolder
from generic_trainer.loop import fit_loop

ROWS = 3000


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  """Synthetic tf.Examples in 4 gzip shards, and their schema."""
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  paths = synthetic_data.write(str(tmp_path_factory.mktemp('synthetic')),
                               ROWS, 500, shards=4)
  with open(paths['schema']) as f:
    schema = text_format.Parse(f.read(), schema_pb2.Schema())
  return [os.path.join(paths['train'], '*')], schema


def _tfxio(patterns, schema, options):
  return tfxio.TFExampleRecord(patterns, schema=schema).TensorFlowDataset(
      options)


def _assert_same_batches(expected, actual):
  expected, actual = list(expected), list(actual)
  assert len(expected) == len(actual)
  for (want_f, want_l), (got_f, got_l) in zip(expected, actual):
    assert sorted(want_f) == sorted(got_f)
    for key in want_f:
      a, b = want_f[key], got_f[key]
      assert type(a) is type(b) and a.dtype == b.dtype, key
      if isinstance(a, tf.SparseTensor):
        np.testing.assert_array_equal(a.indices, b.indices)
        a, b = a.values, b.values
      np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(want_l.numpy(), got_l.numpy())


@pytest.mark.parametrize('shuffle', [False, True])
def test_factory_gives_tfxios_batches_in_tfxios_order(data, shuffle):
  """Unshuffled, or shuffled with a seed: the same batches as TFXIO's."""
  patterns, schema = data
  options = tfxio.TensorFlowDatasetOptions(
      batch_size=128, label_key='label', num_epochs=1, shuffle=shuffle,
      shuffle_seed=7)
  _assert_same_batches(_tfxio(patterns, schema, options),
                       input_pipeline.DatasetFactory()(patterns, options,
                                                       schema))


def test_factory_gives_tfxios_sparse_tensors(data):
  """A feature without a fixed shape is a SparseTensor, as with TFXIO."""
  patterns, schema = data
  schema = type(schema).FromString(schema.SerializeToString())
  schema.feature[0].ClearField('shape')
  options = tfxio.TensorFlowDatasetOptions(batch_size=100, label_key='label',
                                           num_epochs=1, shuffle=False)
  batches = list(input_pipeline.DatasetFactory()(patterns, options, schema))
  assert isinstance(batches[0][0][schema.feature[0].name], tf.SparseTensor)
  _assert_same_batches(_tfxio(patterns, schema, options), batches)


def test_factory_repeats_with_full_batches(data):
  """num_epochs=None repeats forever and drops the short batch, as TFXIO."""
  patterns, schema = data
  options = tfxio.TensorFlowDatasetOptions(batch_size=1024, label_key='label')
  sizes = [int(l.shape[0]) for _, l in input_pipeline.DatasetFactory()(
      patterns, options, schema).take(10)]
  assert sizes == [1024] * 10


def _rows(dataset):
  """The f00 values of every row of a finite dataset, in order."""
  return np.concatenate([f['f00'].numpy()[:, 0] for f, _ in dataset])


def _block_dataset(data, **kwargs):
  patterns, schema = data
  config, names = input_pipeline.DatasetFactory().parser(
      schema, synthetic_data.FEATURE_KEYS + ['label'])
  assert input_pipeline.dense_only(config)
  return input_pipeline.block_dataset(patterns, config, names, 'label',
                                      **kwargs)


def _cache(setting, tmp_path):
  """block_dataset's `cache` for a test's setting: 'disk' is a file prefix."""
  return str(tmp_path / 'cache' / 'blocks') if setting == 'disk' else setting


@pytest.mark.parametrize('cache', [True, False, 'disk'])
def test_blocks_read_every_row_once_per_epoch_in_a_new_order(data, cache,
                                                            tmp_path):
  """Two shuffled epochs: each row twice, and the epochs' orders differ."""
  (tmp_path / 'cache').mkdir()
  rows = _rows(_block_dataset(data, batch_size=100, num_epochs=2,
                              shuffle=True, cache=_cache(cache, tmp_path)))
  expected = _rows(_tfxio(data[0], data[1], tfxio.TensorFlowDatasetOptions(
      batch_size=500, label_key='label', num_epochs=1, shuffle=False)))
  assert len(rows) == 2 * ROWS
  np.testing.assert_array_equal(np.sort(rows[:ROWS]), np.sort(expected))
  np.testing.assert_array_equal(np.sort(rows[ROWS:]), np.sort(expected))
  assert not np.array_equal(rows[:ROWS], rows[ROWS:])
  assert not np.array_equal(rows[:ROWS], expected)


@pytest.mark.parametrize('cache', [True, False, 'disk'])
def test_seeded_blocks_are_one_stream_a_skip_reads_on(data, cache, tmp_path):
  """Seeded and repeated: the same batches in every iterator, a new order
  every pass, and `skip(k)` gives batch k on (what a resume reads); on
  disk, the first pass writes the blocks and the others read them back."""
  (tmp_path / 'cache').mkdir()
  cache = _cache(cache, tmp_path)

  def stream(**kwargs):
    return _block_dataset(data, batch_size=100, num_epochs=None, shuffle=True,
                          cache=cache, seed=5, **kwargs)
  rows = _rows(stream().take(2 * ROWS // 100))
  np.testing.assert_array_equal(rows, _rows(stream().take(2 * ROWS // 100)))
  np.testing.assert_array_equal(np.sort(rows[:ROWS]), np.sort(rows[ROWS:]))
  assert not np.array_equal(rows[:ROWS], rows[ROWS:])
  np.testing.assert_array_equal(
      _rows(stream().skip(37).take(10)), rows[3700:4700])
  if isinstance(cache, str):
    assert sorted(os.listdir(tmp_path / 'cache')) == [
        'blocks.data-00000-of-00001', 'blocks.index']
  other_seed = _rows(_block_dataset(
      data, batch_size=100, num_epochs=None, shuffle=True, cache=cache,
      seed=6).take(10))
  assert not np.array_equal(other_seed, rows[:1000])


def test_seeded_epochs_of_one_pass_differ_the_same_way_everywhere(data):
  """Seeded, read once per iteration: iteration i has its own order, the
  same for every dataset built with the seed."""
  first, second = [_block_dataset(data, batch_size=100, num_epochs=1,
                                  shuffle=True, cache=True, seed=5)
                   for _ in range(2)]
  epochs = [_rows(first), _rows(first)]
  assert not np.array_equal(epochs[0], epochs[1])
  np.testing.assert_array_equal(epochs[0], _rows(second))
  np.testing.assert_array_equal(epochs[1], _rows(second))


def test_blocks_mix_the_shards_within_a_batch(data):
  """A shuffled batch draws rows from several shards, not one file's run."""
  patterns, schema = data
  by_file = [_rows(_tfxio([f], schema, tfxio.TensorFlowDatasetOptions(
      batch_size=1000, label_key='label', num_epochs=1, shuffle=False)))
             for f in sorted(tf.io.gfile.glob(patterns))]
  features, _ = next(iter(_block_dataset(data, batch_size=256, num_epochs=1,
                                         shuffle=True, cache=False)))
  batch = features['f00'].numpy()[:, 0]
  assert sum(bool(np.isin(batch, rows).any()) for rows in by_file) >= 2


def test_blocks_unshuffled_keep_every_row_and_a_short_last_batch(data):
  """One unshuffled epoch: all rows once, the last batch holds the rest."""
  dataset = _block_dataset(data, batch_size=128, num_epochs=1, shuffle=False,
                           cache=True)
  sizes = [int(l.shape[0]) for _, l in dataset]
  assert sum(sizes) == ROWS and sizes[-1] == ROWS % 128
  assert set(sizes[:-1]) == {128}


def _config(data):
  config, _ = input_pipeline.DatasetFactory().parser(data[1])
  return config


def test_cache_only_when_the_parsed_rows_fit(data, monkeypatch):
  """Small data fits in memory; with no memory to spare it does not; the
  reason names the sizes weighed."""
  fit = input_pipeline.cache_fit(data[0], _config(data), available=10**9)
  assert fit.where == 'memory' and re.fullmatch(
      r'168 kB of parsed rows \(~(2,9|3,0)\d\d rows\) fit in a quarter of the '
      r'1\.0 GB available', fit.reason)
  monkeypatch.setattr(input_pipeline, 'CACHE_MEMORY_FRACTION', 0.0)
  fit = input_pipeline.cache_fit(data[0], _config(data), available=10**9)
  assert fit.where is None and re.fullmatch(
      r'168 kB of parsed rows \(~(2,9|3,0)\d\d rows\) do not fit in 0% of the '
      r'1\.0 GB available', fit.reason)


def test_rows_too_big_for_memory_go_to_local_disk_if_it_has_room(
    data, monkeypatch, tmp_path):
  """Not in memory: on the disk of the cache folder when the rows fit in
  half of its free space; not on a filesystem in memory (tmpfs)."""
  from generic_trainer.system import machine  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(input_pipeline, 'CACHE_MEMORY_FRACTION', 0.0)
  fit = input_pipeline.cache_fit(data[0], _config(data), available=10**9,
                                 disk_dir='/scratch', disk_free=10**6)
  assert fit.where == 'disk' and re.fullmatch(
      r'168 kB of parsed rows \(~(2,9|3,0)\d\d rows\) do not fit in 0% of the '
      r'1\.0 GB available; they fit in the 500 kB of local disk at /scratch '
      r'this training may take \(half of the 1\.0 MB free\)', fit.reason)
  assert 160_000 < fit.parsed_bytes < 176_000
  # Two workers caching on one disk, and the other split's rows: their
  # shares count.
  fit = input_pipeline.cache_fit(data[0], _config(data), available=10**9,
                                 disk_dir='/scratch', disk_free=10**6,
                                 disk_sharers=2, disk_claimed=100_000)
  assert fit.where is None and fit.reason.endswith(
      'they do not fit in the 150 kB of local disk at /scratch this training '
      'may take (half of the 1.0 MB free, split between 2 workers, less 100 '
      'kB for the other split)')
  monkeypatch.setattr(machine, 'filesystem_type', lambda path: 'tmpfs')
  fit = input_pipeline.cache_fit(data[0], _config(data), available=10**9,
                                 disk_dir=str(tmp_path))
  assert fit.where is None and fit.reason.endswith(
      f'{tmp_path} is on tmpfs, in memory: set TMPDIR to a folder on a '
      'local disk')


def test_parsed_size_is_estimated_from_the_first_records(data, monkeypatch):
  """A sample of the first file's start gives the rows and a row's bytes
  (12 floats and an int64 label: 56), within a few percent."""
  from generic_trainer.data import parsed_size  # pylint: disable=g-import-not-at-top
  files = sorted(tf.io.gfile.glob(data[0][0]))
  size = parsed_size.estimate(files, _config(data))
  assert size.row_bytes == 56 and abs(size.rows - ROWS) < 0.01 * ROWS
  monkeypatch.setattr(parsed_size, 'SAMPLE_BYTES', 4096)
  size = parsed_size.estimate(files, _config(data))
  assert abs(size.rows - ROWS) < 0.05 * ROWS
  assert size.parsed_bytes == int(size.rows * 56)


def test_cache_unknown_size_is_off(tmp_path, data):
  """A file whose start holds no complete record: no cache, and why."""
  path = tmp_path / 'cut.tfrecord'
  path.write_bytes(b'\x10' * 8)
  fit = input_pipeline.cache_fit([str(path)], _config(data), available=10**9)
  assert fit == (None, 'the size of the parsed rows is unknown: the start '
                 'of the first file could not be read, or holds no complete '
                 'record', 0)


def _spec(value=None, checkpoint=None, handlers=()):
  return types.SimpleNamespace(steps_per_execution=value,
                               checkpoint=checkpoint,
                               user_handlers=list(handlers))


class _BatchHandler(keras.callbacks.Callback):

  def on_train_batch_end(self, batch, logs=None):
    pass


@pytest.mark.parametrize('spec, steps, eval_steps, expected', [
    (_spec(), None, None, 32),
    (_spec(), 3906, None, 31),
    (_spec(), 100, 30, 10),
    (_spec(), 7, None, 7),
    (_spec(), 37, None, 1),
    (_spec(handlers=[_BatchHandler()]), 64, None, 1),
    (_spec(handlers=[keras.callbacks.History()]), 64, None, 32),
    (_spec(checkpoint={'every_steps': 8}), 64, None, 1),
    (_spec(4), 64, 8, 4),
])
def test_steps_per_execution(spec, steps, eval_steps, expected):
  """Automatic: the largest divisor of the step counts up to 32, or 1."""
  assert fit_loop.steps_per_execution(spec, steps, eval_steps) == expected


def test_one_step_per_execution_under_a_distribution_strategy():
  """Keras 3.12's multi-step loop fails on distributed iterators."""
  assert fit_loop.steps_per_execution(_spec(), 64, None, distributed=True) == 1


def test_steps_per_execution_must_divide_the_steps():
  """A given value that Keras would run past is refused, with the counts."""
  with pytest.raises(SpecError, match=(
      r'TrainSpec.steps_per_execution=8 does not divide the steps per epoch '
      r'\(100\) and eval steps \(None\)')):
    fit_loop.steps_per_execution(_spec(8), 100, None)
  with pytest.raises(SpecError, match=(
      r'must be a positive int or None. Received: steps_per_execution=0')):
    fit_loop.steps_per_execution(_spec(0), 100, None)


def test_blocks_run_without_tf_data_autotuning(data):
  """Autotuning stalled each new iterator (each epoch) for seconds; the
  block pipeline sets its parallelism itself and turns it off."""
  dataset = _block_dataset(data, batch_size=64, num_epochs=1, shuffle=True,
                           cache=True)
  assert dataset.options().autotune.enabled is False


def test_a_training_kept_in_memory_asks_no_ram_it_would_not_use(tmp_path):
  """A notebook Estimator whose parsed rows are kept in memory: TensorFlow
  no longer logs "Prefetch autotuner tried to allocate 377957122048 bytes"
  (the cache read ahead a buffer of 1M blocks); the read-ahead is the
  data's blocks, twice over."""
  columns = [f'f{i}' for i in range(20)]
  random = np.random.RandomState(2)
  lines = [','.join(columns + ['label'])] + [
      ','.join(f'{v:.4f}' for v in random.rand(20)) + f',{i % 2}'
      for i in range(5000)]
  (tmp_path / 'wide.csv').write_text('\n'.join(lines) + '\n')
  script = tmp_path / 'notebook.py'
  script.write_text(textwrap.dedent('''
      from generic_trainer import Estimator
      from generic_trainer.canned import LinearClassifierSpec

      class Spec(LinearClassifierSpec):
        label_key = 'label'
        checkpoint = None

      Estimator(Spec, 'model').train('wide.csv', steps=5)
      print('trained')
      '''))
  proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                        text=True, cwd=str(tmp_path), timeout=600,
                        env=dict(command_env(), TF_CPP_MIN_LOG_LEVEL='0'),
                        check=False)
  assert proc.returncode == 0 and 'trained' in proc.stdout, proc.stderr
  assert 'cache: in memory for' in proc.stderr
  assert 'Prefetch autotuner' not in proc.stderr


def test_the_memory_cache_reads_ahead_the_datas_blocks(data):
  """Twice the blocks the estimate gives (4 shards: a part block each)."""
  config, _ = input_pipeline.parser_config(data[1])
  assert input_pipeline.read_ahead_blocks(data[0], config) == 2 * (1 + 4)


def test_blocks_log_nothing(data, monkeypatch, capfd):
  """Slices of the parser's blocks made TF log an error line for every
  tensor a later rebatch concatenated (~22k lines an epoch on 1M rows)."""
  monkeypatch.setattr(input_pipeline, 'PARSE_ROWS', 200)
  monkeypatch.setattr(input_pipeline, 'POOL_ROWS', 1000)
  monkeypatch.setattr(input_pipeline, 'SHUFFLE_BLOCKS', 4)
  capfd.readouterr()
  rows = _rows(_block_dataset(data, batch_size=64, num_epochs=2, shuffle=True,
                              cache=True))
  assert len(rows) == 2 * ROWS
  assert 'SubBuffer' not in capfd.readouterr().err


@pytest.mark.parametrize('with_label', [True, False])
def test_spec_preprocess_applies_on_blocks(data, with_label):
  """An overridden `preprocess` runs on every batch; without one the
  blocks come through unmapped, holding exactly the spec's keys."""
  from generic_trainer import TrainSpec
  from generic_trainer.loop import datasets as spec_input  # pylint: disable=g-import-not-at-top
  patterns, schema = data

  class Plain(TrainSpec):
    label_key = 'label'
    build_model = build_optimizer = build_loss = lambda self: None

  class Doubled(Plain):

    def preprocess(self, features):
      return {'f00': features['f00'] * 2.0}

  fn_args = types.SimpleNamespace(data_accessor=types.SimpleNamespace(
      tf_dataset_factory=input_pipeline.DatasetFactory()))

  def first(spec_class):
    batch = next(iter(spec_input.make_dataset(
        spec_class(), fn_args, schema, patterns, ['f00', 'f01'], 50,
        num_epochs=1, shuffle=False, with_label=with_label)))
    if with_label:
      features, label = batch
      assert label.shape[0] == 50
      return features
    return batch

  plain, doubled = first(Plain), first(Doubled)
  assert set(plain) == {'f00', 'f01'} and set(doubled) == {'f00'}
  np.testing.assert_allclose(doubled['f00'].numpy(),
                             2.0 * plain['f00'].numpy())


@pytest.mark.parametrize('cache, expected', [
    (None, r'cache: in memory for Split-train \(36 kB of parsed rows '
     r'\(~(2,9|3,0)\d\d rows\) fit in a quarter of the [0-9.]+ GB available\)'),
    (False, r'cache: off for Split-train \(TrainSpec.cache=False\); every '
     r'epoch reads and parses the files'),
    ('disk', r'cache: on disk for Split-train, in \S+/Split-train-\w+ '
     r"\(TrainSpec.cache='disk'\); the first epoch writes the parsed rows "
     r'there, later epochs read them back'),
])
def test_the_cache_decision_is_logged_with_its_reason(data, caplog, cache,
                                                      expected):
  """Without the cache every epoch reads the files: the log says which,
  and why."""
  import logging  # pylint: disable=g-import-not-at-top
  from generic_trainer import TrainSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import progress
  from generic_trainer.loop import datasets as spec_input  # pylint: disable=g-import-not-at-top
  patterns, schema = data

  class Spec(TrainSpec):
    label_key = 'label'
    build_model = build_optimizer = build_loss = lambda self: None

  Spec.cache = cache
  fn_args = types.SimpleNamespace(data_accessor=types.SimpleNamespace(
      tf_dataset_factory=input_pipeline.DatasetFactory()))
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  with CacheFolder() as folder:
    dataset = spec_input.make_dataset(Spec(), fn_args, schema, patterns,
                                      ['f00'], 50, num_epochs=1, shuffle=True,
                                      cache_folder=folder)
    lines = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith('cache: ')]
    assert len(lines) == 1 and re.fullmatch(expected, lines[0]), lines
    assert sum(int(label.shape[0]) for _, label in dataset) == ROWS
    written = [n for d in os.listdir(folder.path)
               if os.path.isdir(os.path.join(folder.path, d))  # Not the lock.
               for n in os.listdir(os.path.join(folder.path, d))]
    assert ('blocks.index' in written) == (cache == 'disk'), written
  assert not os.path.exists(folder.path)


@pytest.mark.parametrize('setting, shown', [
    ('memory', "'memory'"), (1, '1'),
    # numpy 1 (TFX 1.16): 'True (a numpy.bool_)'; numpy 2: 'np.True_ (a
    # numpy.bool)'.
    (np.True_, f'{np.True_!r} (a numpy.{type(np.True_).__qualname__})'),
])
def test_a_cache_setting_of_another_kind_is_refused(setting, shown):
  """TrainSpec.cache='memory' (say) fails before training, listing the
  settings."""
  from generic_trainer.loop import spec_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError, match=re.escape(
      "TrainSpec.cache must be None (keep the parsed rows where they fit: in "
      "memory, else on local disk), True (memory), 'disk', or False (read "
      f"and parse the files every epoch). Received: cache={shown}.")):
    spec_checks.check_cache(types.SimpleNamespace(cache=setting))


def test_cache_folders_of_dead_processes_are_removed(tmp_path):
  """A killed training leaves its folder; the next one removes it once its
  lock is free, whatever PID its name holds (PID 1 included); a folder
  whose lock a process holds stays, even when its named PID is gone."""
  from generic_trainer.system import owner_lock  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import scratch  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import cache_folder  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  dead = tmp_path / f'{cache_folder.PREFIX}1-abc'
  alive = tmp_path / f'{cache_folder.PREFIX}999999-abc'
  other = tmp_path / 'someone-else'
  for folder in (dead, alive, other):
    (folder / 'sub').mkdir(parents=True)
  lock = owner_lock.OwnerLock(str(dead / scratch.LOCK_FILE))
  assert lock.acquire()
  lock.release()  # As the kernel does when its process dies.
  holder = subprocess.Popen(
      [sys.executable, '-c', 'import fcntl, sys, time\n'
       'f = open(sys.argv[1], "w"); fcntl.flock(f, fcntl.LOCK_EX)\n'
       'print("locked", flush=True); time.sleep(60)',
       str(alive / scratch.LOCK_FILE)], stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == 'locked'
    cache_folder.remove_stale(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted([alive.name, other.name])
  finally:
    holder.kill()
    holder.wait()
