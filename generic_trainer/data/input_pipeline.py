"""Fast tf.data input over tf.Example TFRecords, with TFXIO's parsing.

Two pipelines, both parsing with the config TFXIO derives from the schema
(so features come out exactly as `TensorFlowDataset` gives them: dense,
sparse or ragged, renamed, default values filled):

- `DatasetFactory`: `fn_args.data_accessor.tf_dataset_factory` for `run_fn`
  modules. Same options and same element order as TFXIO's, faster: TFXIO
  reads the files with a parallel interleave whose per-record cost bounds
  the whole input on few cores, and parses in one thread. Here local files
  are read one after the other, in TFXIO's order, by a sequential reader
  (cheap per record), and batches are parsed in parallel. Remote files
  (gs://, s3://...) and options that need TFXIO go to TFXIO unchanged.
- `block_dataset`: what a TrainSpec trains on when every feature it reads
  is dense. Records are read from the files in parallel and parsed in
  parallel, `PARSE_ROWS` at a time (`parsed_blocks`), into blocks that are
  kept in memory when they fit, else on local disk when it has room
  (`cache_fit`), shuffled as blocks, mixed into pools of `POOL_ROWS` rows
  that are permuted, then cut into batches. After the first epoch no
  record is read or parsed again; every epoch sees a new order, a function
  of a seed when one is given (TrainSpec.shuffle_seed).

Measured on 2 cores, 200k rows of 12 float features, batch 256: iterating
TFXIO's dataset ~20-25k rows/s, `DatasetFactory` ~130k rows/s; parsing 1M
rows from gzip files ~2.5 s (benchmarks/README.md has the training numbers).
"""

from typing import (Any, Dict, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import tensorflow as tf

from generic_trainer.system import machine
from generic_trainer.system import paths
from generic_trainer.data.tfrecords import common_compression
from generic_trainer.data import tf_example_dataset
from generic_trainer.data import parsed_size
from generic_trainer.data.kept import blocks as kept_blocks
from generic_trainer.data.tf_example_dataset import plain

PARSE_ROWS = 4096  # Records per parse_example call, and per cached block.
POOL_ROWS = 8 * PARSE_ROWS  # Rows mixed and permuted together.
PREFETCH_BATCHES = 8
READ_AHEAD_MARGIN = 2  # Blocks read ahead when cached: twice the estimate.
SHUFFLE_BLOCKS = 16  # Blocks held for shuffling: 64k rows (TFXIO: 10k).
CACHE_MEMORY_FRACTION = 0.25
CACHE_DISK_FRACTION = 0.5  # Of the free local disk, for parsed rows.
_PASS_SEEDS = 1 << 20  # Pass p of a seeded stream shuffles with seed*this+p.


class DatasetFactory:
  """A `tf_dataset_factory(file_pattern, options, schema)` for tf.Example.

  Returns what TFXIO's `TFExampleRecord(file_pattern, schema=schema)
  .TensorFlowDataset(options)` returns, in the same order; only faster on
  local files. On remote files it is `tf_example_dataset.dataset`, TFXIO's
  own pipeline. Neither imports Apache Beam.
  """

  def __init__(self, telemetry_descriptors: Optional[List[str]] = None):
    self.telemetry_descriptors = telemetry_descriptors  # As TFXIO's; unused.

  def __call__(self, file_pattern, options, schema=None):
    patterns = [file_pattern] if isinstance(file_pattern, str) else list(
        file_pattern)
    if schema is None or any('://' in p for p in patterns):
      return tf_example_dataset.dataset(patterns, options, schema)
    return record_dataset(patterns, options, schema)

  def parser(self, schema, keys: Optional[Sequence[str]] = None):
    """(parse config, tensor names) of `keys`; see `parser_config`."""
    return parser_config(schema, keys)


def parser_config(schema, keys: Optional[Sequence[str]] = None
                  ) -> Tuple[Dict[str, Any], Dict[str, str]]:
  """TFXIO's tf.Example parse config of `schema`, limited to the tensors
  `keys`: ({feature name: tf.io feature}, {feature name: tensor name})."""
  config, names = tf_example_dataset.parser_config(schema)
  if keys is not None:
    wanted = set(keys)
    config = {f: c for f, c in config.items() if names[f] in wanted}
    names = {f: names[f] for f in config}
  return config, names


def record_dataset(patterns: List[str], options, schema):
  """TFXIO's TensorFlowDataset pipeline, with cheaper reading and parsing,
  and without tf.data's autotuning (see `without_autotuning`): its AUTOTUNE
  values resolve to the cores and a self-sizing prefetch buffer."""
  config, names = parser_config(schema)
  if options.label_key is not None and options.label_key not in names.values():
    return tf_example_dataset.dataset(patterns, options, schema)  # Its error.
  found = paths.expand(patterns)
  if not found:
    return tf_example_dataset.dataset(patterns, options, schema)  # Its error.
  files = tf.data.Dataset.from_tensor_slices(found)
  if options.shuffle:  # As tf.data.Dataset.list_files, without its glob.
    files = files.shuffle(len(found), seed=options.shuffle_seed)
  compression = common_compression(found)
  # TFXIO's order (its parallel interleave yields the files one after the
  # other), without the per-record cost of a parallel interleave.
  dataset = files.flat_map(plain(
      lambda f: tf.data.TFRecordDataset(f, compression, buffer_size=1 << 20)))
  if options.shuffle:
    dataset = dataset.shuffle(options.shuffle_buffer_size,
                              options.shuffle_seed)
  if options.num_epochs != 1:
    dataset = dataset.repeat(options.num_epochs)
  dataset = dataset.batch(
      options.batch_size,
      drop_remainder=options.drop_final_batch or options.num_epochs is None)
  dataset = dataset.map(
      _parse_fn(config, names, options.label_key),
      num_parallel_calls=options.parser_num_threads,
      deterministic=not options.sloppy_ordering)
  return without_autotuning(dataset.prefetch(options.prefetch_buffer_size))


def dense_only(config: Dict[str, Any]) -> bool:
  """Whether every feature parses to a dense tensor (what blocks need)."""
  return all(isinstance(c, tf.io.FixedLenFeature) for c in config.values())


def block_dataset(patterns: List[str], config: Dict[str, Any],
                  names: Dict[str, str], label_key: Optional[str],
                  batch_size: int, num_epochs: Optional[int], shuffle: bool,
                  cache: Union[bool, str], seed: Optional[int] = None,
                  kept=None):
  """Batches of (features, label) (features alone without `label_key`).

  Dense features only (`dense_only`). The blocks of parsed rows
  (`parsed_blocks`) are kept after the first pass: in memory with
  `cache=True` (and the first epoch parses ahead of training), in files
  with `cache` a path prefix on local disk (tf.data's file cache: the first
  pass writes them, later passes read them back; an iterator that stops
  early removes what it wrote). From then on no record is read or parsed
  again. With `cache=False` every pass reads and parses the files. The
  blocks are shuffled `SHUFFLE_BLOCKS` at a time, mixed into pools of
  `POOL_ROWS` rows that are permuted, and cut into batches. With
  `num_epochs=None` it repeats forever and every batch is full; otherwise
  the last batch of the last epoch may be short.

  Measured against a uniform shuffle of all rows gathered from memory
  (load all first, then gather each epoch's order): the first epoch here
  trains while it parses, and the later epochs take less CPU. The blocks
  are the parser's own tensors, never slices of them: TF 2.16 logs an
  error line for every sliced tensor that a later rebatch concatenates
  (~22k lines an epoch on 1M rows, and their CPU).

  With a `seed` the order is a function of it alone, the same in every
  process (every worker, every attempt of a resumed training): files are
  read and blocks parsed in order, and the shuffles are seeded. Repeated
  (`num_epochs` != 1), the dataset is one stream of passes over the data,
  pass p shuffled with (seed, p) and each pool permuted with the next seed
  of a seeded sequence: its batch k is the same in every iterator, so a
  resumed training's `skip(k)` reads on where the interrupted one stopped.
  Read once (`num_epochs=1`, iterated again every epoch), each iteration
  of the dataset in a process is shuffled differently, iteration i the same
  in every process. Without a seed, reading and parsing take blocks as they
  come, and every run has its own order.

  With `kept` (a `data.kept.cache.SpanCache` and the key fields every file
  shares), each file's blocks come from its kept entry, or are parsed and
  written to one (`kept_blocks`); the blocks are the same either way.
  """
  seeded = seed is not None
  blocks = parsed_blocks(patterns, config, names, label_key,
                         deterministic=seeded or not shuffle, kept=kept)
  if isinstance(cache, str):
    blocks = blocks.prefetch(PREFETCH_BATCHES).cache(cache)
  elif cache:
    # Read ahead all the blocks: they are all kept anyway, and the parse
    # goes on on idle cores, also while Keras traces the model.
    blocks = blocks.prefetch(read_ahead_blocks(patterns, config)).cache()
  if shuffle and seeded:
    if num_epochs == 1:
      pools = blocks.shuffle(SHUFFLE_BLOCKS, seed=seed).rebatch(POOL_ROWS)
    else:
      passes = (tf.data.Dataset.range(num_epochs) if num_epochs else
                tf.data.Dataset.counter())
      one_pass = blocks
      pools = passes.flat_map(plain(lambda p: one_pass.shuffle(
          SHUFFLE_BLOCKS, seed=seed * _PASS_SEEDS + p).rebatch(POOL_ROWS)))
    pool_seeds = tf.data.Dataset.random(
        seed=seed, rerandomize_each_iteration=num_epochs == 1)
    blocks = tf.data.Dataset.zip((pools, pool_seeds)).map(
        _permute_rows_seeded, num_parallel_calls=machine.cores(),
        deterministic=True)
  else:
    if shuffle:
      blocks = blocks.shuffle(SHUFFLE_BLOCKS).rebatch(POOL_ROWS).map(
          _permute_rows, num_parallel_calls=machine.cores())
    if num_epochs != 1:
      blocks = blocks.repeat(num_epochs)
  batches = blocks.rebatch(batch_size, drop_remainder=num_epochs is None)
  return without_autotuning(batches.prefetch(PREFETCH_BATCHES))


def read_ahead_blocks(patterns: List[str], config: Dict[str, Any]) -> int:
  """How many parsed blocks the memory cache reads ahead: every block of
  the data (twice the estimate, `parsed_size.estimate`), or
  `PREFETCH_BATCHES` when the size is unknown.

  Not "without bound": tf.data's prefetch asks its RAM budget for the first
  block's size times the buffer (`PrefetchAutotuner::SetElementSize`,
  tensorflow/core/kernels/data/prefetch_autotuner.cc), and a buffer of 1M
  blocks of 360 kB asked for 378 GB, which TensorFlow logged as "Prefetch
  autotuner tried to allocate 377957122048 bytes ... the autotune ram
  budget to be exceeded" in every training that kept its rows in memory.
  Bounded by the data, it asks for about twice the parsed rows, which the
  cache only holds when they fit in a quarter of the memory.
  """
  files = paths.expand(patterns)
  size = parsed_size.estimate(files, config)
  if size is None:
    return PREFETCH_BATCHES
  blocks = -(-size.rows // PARSE_ROWS) + len(files)  # A part block per file.
  return max(PREFETCH_BATCHES, READ_AHEAD_MARGIN * blocks)


def parsed_blocks(patterns: List[str], config: Dict[str, Any],
                  names: Dict[str, str], label_key: Optional[str],
                  deterministic: bool, kept=None):
  """The records of `patterns`, parsed `PARSE_ROWS` at a time.

  Files are read in parallel and the blocks parsed in parallel: one
  `parse_example` call on 4096 records costs less than four on 1024 (TF's
  parser splits large batches over its threads). With `kept` (see
  `block_dataset`), each file's blocks are its entry's or written to one,
  interleaved as the files' records would be.
  """
  files = paths.expand(patterns)
  compression = common_compression(files)
  cores = machine.cores()
  readers = max(1, min(len(files), cores))
  parse = _parse_fn(config, names, label_key)

  @plain
  def read(path):
    return tf.data.TFRecordDataset(path, compression,
                                   buffer_size=1 << 20).batch(PARSE_ROWS)

  if kept is not None and files:
    return kept_blocks.interleaved(
        files, compression, read, parse,
        kept_blocks.block_spec(config, names, label_key), kept, label_key,
        readers, cores, deterministic)
  records = tf.data.Dataset.from_tensor_slices(files).interleave(
      read, cycle_length=readers,
      num_parallel_calls=readers if readers > 1 else None,
      deterministic=deterministic if readers > 1 else None)
  return records.map(parse, num_parallel_calls=cores,
                     deterministic=deterministic)


def without_autotuning(dataset):
  """`dataset` with tf.data's autotuning off (our parallelism is fixed).

  With it on (TF 2.16), every new iterator, so every epoch and every eval
  pass, could wait for the autotuner's next wake-up (1.3, 2.6, 5.1 s...
  after its start) before its first batch: on 2 cores, 1-4 s of a 3 s
  epoch. A tutorial run_fn's `fit` of 2000 steps on one iterator took
  10.2 s with it on, 6.3 s with it off.
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  return dataset.with_options(options)


class CacheFit(NamedTuple):
  """Where the parsed rows of some files are kept after the first epoch,
  and why.

  Attributes:
    where: 'memory' when they fit in `CACHE_MEMORY_FRACTION` of the memory
      available; else 'disk' when they fit in this training's share of the
      local disk (see `cache_fit`); else None: every epoch reads and parses
      the files.
    reason: The sizes weighed, for the log: '58 MB of parsed rows (~1.0M
      rows) fit in a quarter of the 20.1 GB available'.
    parsed_bytes: The estimated size of the parsed rows (0 if unknown).
  """
  where: Optional[str]
  reason: str
  parsed_bytes: int = 0


def cache_fit(patterns: List[str], config: Dict[str, Any],
              available: Optional[int] = None,
              disk_dir: Optional[str] = None,
              disk_free: Optional[int] = None, disk_sharers: int = 1,
              disk_claimed: int = 0) -> CacheFit:
  """Where to keep the rows of `patterns` parsed with `config` (dense
  features): in memory if they fit in `CACHE_MEMORY_FRACTION` of
  `available` bytes (default: the memory available now, under the
  cgroup's limit in a container: `machine.memory`), else on the disk
  of `disk_dir` if they fit in this process's share of it:
  `CACHE_DISK_FRACTION` of `disk_free` bytes (default: free there now; a
  filesystem in memory, tmpfs, is no disk) split between `disk_sharers`
  processes (workers caching on the same disk), less the `disk_claimed`
  bytes this process's other datasets take there. Sizes from
  `parsed_size.estimate`; an unknown size keeps nothing."""
  room = machine.Memory(available) if available is not None else (
      machine.memory())  # A cgroup limit bounds it, and is named.
  available = room.available
  files = paths.expand(patterns)
  size = parsed_size.estimate(files, config)
  if size is None:
    return CacheFit(None, 'the size of the parsed rows is unknown: the '
                    'start of the first file could not be read, or holds '
                    'no complete record')
  rows = (f'{_size(size.parsed_bytes)} of parsed rows '
          f'(~{_count(size.rows)} rows)')
  if available is None:
    memory = f'{rows}: the memory available is unknown'
  else:
    fits = size.parsed_bytes <= available * CACHE_MEMORY_FRACTION
    memory = (f'{rows} {"fit" if fits else "do not fit"} in '
              f'{_share(CACHE_MEMORY_FRACTION)} of {room.describe(_size)}')
    if fits:
      return CacheFit('memory', memory)
  parsed = size.parsed_bytes
  if disk_dir is None:
    return CacheFit(None, memory, parsed)
  kind = machine.memory_filesystem(disk_dir)
  if kind:
    return CacheFit(None, f'{memory}, and {disk_dir} is on {kind}, in '
                    'memory: set TMPDIR to a folder on a local disk', parsed)
  if disk_free is None:
    disk_free = machine.free_disk(disk_dir)
  if disk_free is None:
    return CacheFit(None, f'{memory}, and the free space of {disk_dir} is '
                    'unknown', parsed)
  budget = disk_free * CACHE_DISK_FRACTION / max(1, disk_sharers)
  budget -= disk_claimed
  fits = parsed <= budget
  shares = [f'{_share(CACHE_DISK_FRACTION)} of the {_size(disk_free)} free']
  if disk_sharers > 1:
    shares.append(f'split between {disk_sharers} workers')
  if disk_claimed:
    shares.append(f'less {_size(disk_claimed)} for the other split')
  return CacheFit('disk' if fits else None, (
      f'{memory}; they {"fit" if fits else "do not fit"} in the '
      f'{_size(max(0, budget))} of local disk at {disk_dir} this training '
      f'may take ({", ".join(shares)})'), parsed)


def _share(fraction: float) -> str:
  """'a quarter', 'half', '10%'."""
  return {0.25: 'a quarter', 0.5: 'half'}.get(fraction, f'{fraction:.0%}')


def _size(n: float) -> str:
  """'58 MB', '1.2 GB': bytes as a person reads them."""
  for unit in ('B', 'kB', 'MB', 'GB'):
    if n < 999.5 or unit == 'GB':
      break
    n /= 1000
  return f'{n:.0f} {unit}' if unit == 'B' or n >= 9.95 else f'{n:.1f} {unit}'


def _count(n: int) -> str:
  """'1.0M', '250k', '7,500': a row count as a person reads it."""
  if n < 10_000:
    return f'{n:,}'
  return f'{n / 1e6:.1f}M' if n >= 999_500 else f'{n / 1e3:.0f}k'


def _parse_fn(config, names, label_key):

  @plain
  def parse(serialized):
    parsed = tf.io.parse_example(serialized, config)
    features = {names[f]: t for f, t in parsed.items()}
    if label_key is None:
      return features
    return features, features.pop(label_key)

  return parse


@plain
def _permute_rows(*columns):
  """The rows of a block in a random order (features, or features and label;
  tf.data passes a tuple's parts as arguments)."""
  rows = tf.shape(tf.nest.flatten(columns)[0])[0]
  order = tf.random.shuffle(tf.range(rows))
  permuted = tf.nest.map_structure(lambda t: tf.gather(t, order), columns)
  return permuted if len(permuted) > 1 else permuted[0]


@plain
def _permute_rows_seeded(columns, seed):
  """The rows of a block (features, or (features, label)) in the order the
  int64 `seed` gives."""
  rows = tf.shape(tf.nest.flatten(columns)[0])[0]
  order = tf.random.experimental.stateless_shuffle(
      tf.range(rows), seed=tf.stack([seed, tf.constant(0, tf.int64)]))
  return tf.nest.map_structure(lambda t: tf.gather(t, order), columns)
