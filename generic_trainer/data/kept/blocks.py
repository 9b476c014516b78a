"""The parsed blocks of files, each read back from its kept entry or parsed
and written to one as it passes (`kept_cache`).

Files are interleaved as `input_pipeline.parsed_blocks` interleaves them,
`readers` at a time, a block from each in turn. Each file is its own small
dataset, hit or miss chosen by a `tf.cond` once per file, so a hit pays
nothing for the misses beside it, and a miss nothing for the hits:

- a hit's blocks are read by TensorFlow ops, no Python: the entry's file
  read once, each block's columns cut out of it by one `substr` and
  decoded as raw bytes;
- a miss's batches of records are parsed, then pass a sequential `map` (a
  `tf.numpy_function`) that appends each to a new entry: the first epoch
  writes while it trains, and no pass over the data is added. A file's
  first block opens its entry (dropping an unfinished one: a pass stopped
  early, read again); a 0-row block after its last one finishes it, and
  is filtered out before training sees it.

Hit or miss, the blocks and their boundaries are the same, so a seeded
order is the same, and a resumed training's `skip(k)` reads on in the same
stream.
"""

import os
import sys
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.data.kept import entry as kept_entry
from generic_trainer.data.kept import key as kept_key
from generic_trainer.data.tf_example_dataset import plain


def interleaved(files: List[str], compression: str, read: Callable,
                parse: Callable, spec, kept, label_key: Optional[str],
                readers: int, cores: int, deterministic: bool):
  """The blocks of `files`, each file's its kept entry's or parsed and
  written to one, interleaved as `input_pipeline.parsed_blocks`
  interleaves files (`readers` at a time, a block from each in turn).

  Args:
    files: The TFRecord files, in order.
    compression: Their compression (`tfrecords.common_compression`).
    read: A function of a vector of file names (here, one) to the dataset
      of their records in batches of `PARSE_ROWS`; made from `compression`
      alone.
    parse: A batch of records to its parsed block (of `spec`); made from
      the parse's fields of the key (`kept_key.parser_fields`) alone.
    spec: The element spec of a parsed block.
    kept: (a `kept_cache.SpanCache`, the key fields every file shares).
    label_key: The label the parser pops, or None.
    readers: Files read at a time (at most `cores`).
    cores: Batches each missed file parses at a time: as many as the
      cores, so that the cores stay busy while a file waits on its read
      (a window of misses on 2 cores, 2 files at a time: 0.2-0.4 s less
      wall, ~0.15 s less CPU than one batch at a time).
    deterministic: Whether files' blocks come in a fixed order (else as
      ready). A file's own blocks always come in order.
  """
  store, shared = kept
  columns = _columns(spec, label_key)
  entries, numbers, missed = [], [], []
  for path in files:
    key = {**shared, **kept_key.file_fields(path, compression)}
    entry = store.lookup(path, key)
    entries.append(entry)
    numbers.append(_NO_WRITER if entry is not None else store.writer(
        path, key, columns, label_key).number)
    missed.append([] if entry is not None else [path])
  paths, starts, sizes = _tables(entries, columns)
  any_miss = any(entry is None for entry in entries)
  one_file = _one_file_fn(
      read, parse, spec, kept_key.fingerprint(kept_key.parser_part(shared)),
      compression, cores if any_miss else 0,  # Hits parse none.
      any(entry is not None for entry in entries), any_miss)
  elements = tf.data.Dataset.from_tensor_slices((
      tf.constant(numbers, tf.int64), paths, starts, sizes,
      tf.ragged.constant(missed, tf.string)))
  return elements.interleave(
      one_file, cycle_length=readers,
      num_parallel_calls=readers if readers > 1 else None,
      deterministic=deterministic if readers > 1 else None)


def with_key(store, config: Dict[str, Any], names: Dict[str, str],
             label_key: Optional[str], parse_rows: int,
             transform_graph_path: Optional[str]):
  """`interleaved`'s `kept`: (`store`, the key fields every file shares),
  or None: no store, or a column of strings (entries keep numbers only)."""
  if store is None or any(c.dtype == tf.string for c in config.values()):
    return None
  return store, {
      **kept_key.parser_fields(config, names, label_key, parse_rows),
      **kept_key.environment_fields(),
      'transform': kept_key.transform_fingerprint(transform_graph_path)}


_NO_WRITER = -1  # A hit's writer number.


def _write(number, ordinal, *columns):
  """Appends a block to the entry of writer `number` (a numpy function):
  ordinal 0 opens it, a 0-row block finishes it."""
  writer = kept_cache.writer_of(int(number))
  if writer is None:  # Its store was left: nothing more is written.
    return _DONE
  if int(ordinal) == 0:
    writer.start()
  if columns[0].shape[0]:
    writer.append(columns)
  else:
    writer.finish()
  return _DONE


_DONE = np.int32(0)  # What the write returns (nothing uses it).

# The interleave's function, traced once per process for each kind of
# file list: a training's eval dataset calls its train dataset's when they
# are of the same kind (~25 ms of CPU a dataset), not traced again.
_TRACED: Dict[tuple, Callable] = {}
_TRACED_MOST = 16  # Kinds kept; the oldest go first.


def forget_traced() -> None:
  """Forgets the traced functions: the next dataset traces its function
  again, as a new process's first does (for measuring)."""
  _TRACED.clear()


def _one_file_fn(read: Callable, parse: Callable, spec, parsing: str,
                 compression: str, parsers: int, any_hit: bool,
                 any_miss: bool):
  """The function of a file's element to its dataset of blocks, for files
  of one kind: the parsing (a fingerprint of the parse's key fields), the
  compression, the batches a miss parses at a time, whether there are
  hits, misses. It captures nothing of one file list: a file's element
  holds its part of the tables and its writer's number."""
  key = (parsing, compression, parsers, any_hit, any_miss)
  if key not in _TRACED:
    if len(_TRACED) >= _TRACED_MOST:
      del _TRACED[next(iter(_TRACED))]
    _TRACED[key] = tf.function(plain(_one_file(
        read, parse, spec, parsers, any_hit, any_miss)))
  return _TRACED[key]


def _one_file(read: Callable, parse: Callable, spec, parsers: int,
              any_hit: bool, any_miss: bool):
  """See `_one_file_fn`."""
  nonempty = plain(lambda *block: tf.shape(tf.nest.flatten(block)[0])[0] > 0)

  @plain
  def decode(content, block):
    return _decode(spec, content, *block)

  @plain
  def written(number, ordinal, block):
    """`block` as it is, written on the way (a stateful numpy_function:
    tf.data runs it though nothing uses its result; it costs less a call
    than a py_function, which makes eager tensors of its arguments)."""
    tf.numpy_function(_write, [number, ordinal] + tf.nest.flatten(block),
                      Tout=tf.int32, stateful=True)
    return block

  def one_file(number, entry, starts, sizes, missed):
    """The file's blocks: a hit's read from its entry (`entry`, its
    blocks' columns at `starts`, `sizes` bytes each); a miss's (`missed`
    holds the file) parsed and written by writer `number`."""

    def hit():
      return tf.data.Dataset.zip((
          _every(tf.io.read_file(entry)),
          tf.data.Dataset.from_tensor_slices((starts, sizes)))).map(decode)

    def miss():
      end = tf.nest.map_structure(
          lambda s: tf.zeros([0] + s.shape.as_list()[1:], s.dtype), spec)
      parsed = read(missed)
      if parsers > 1:  # In order whatever the options say: it is written.
        parsed = parsed.map(parse, num_parallel_calls=parsers,
                            deterministic=True)
      else:
        parsed = parsed.map(parse)
      blocks = parsed.concatenate(tf.data.Dataset.from_tensors(end))
      return tf.data.Dataset.zip((_every(number), _ordinals(), blocks)).map(
          written).filter(nonempty)

    if not any_miss:
      return hit()
    if not any_hit:
      return miss()
    return tf.cond(tf.size(missed) > 0, miss, hit)

  return one_file


def _ordinals():
  """0, 1, 2... (zipped with a finite dataset). Not `Dataset.counter`: a
  scan, whose function is instantiated again for every file."""
  return tf.data.Dataset.range(np.iinfo(np.int64).max)


def _every(value):
  """`value`, as every element (zipped with a finite dataset)."""
  return tf.data.Dataset.from_tensors(value).repeat()


def _tables(entries, columns):
  """Per file: its entry's path (a miss's: os.devnull) and, a row per
  block, where each column's bytes start in it and how many they are (a
  block's columns one after the other): the files' elements' parts."""
  row_bytes = np.array([kept_entry.row_bytes([column])
                        for column in columns], np.int64)
  paths, count, starts, sizes = [], [], [], []
  for entry in entries:
    blocks = entry.manifest['blocks'] if entry is not None else []
    rows = np.array([block_rows for block_rows, _ in blocks], np.int64)
    paths.append(entry.blocks_path if entry is not None else os.devnull)
    count.append(len(rows))
    sizes.append(rows[:, None] * row_bytes)
    ends = np.cumsum(sizes[-1].reshape(-1)).reshape(sizes[-1].shape)
    starts.append(ends - sizes[-1])
  count = np.array(count, np.int64)
  return (tf.constant(paths),) + tuple(
      tf.RaggedTensor.from_row_lengths(np.concatenate(table), count,
                                       validate=False)
      for table in (starts, sizes))


def _decode(spec, content, starts, sizes):
  """The block (of `spec`) whose columns lie at `starts`, `sizes` bytes
  each, in an entry's bytes `content`."""
  flat = tf.nest.flatten(spec)
  pieces = tf.unstack(tf.strings.substr(content, starts, sizes),
                      num=len(flat))
  arrays = [tf.reshape(tf.io.decode_raw(piece, s.dtype,
                                        little_endian=_LITTLE),
                       [-1] + s.shape.as_list()[1:])
            for piece, s in zip(pieces, flat)]
  return tf.nest.pack_sequence_as(spec, arrays)


_LITTLE = sys.byteorder == 'little'  # The key names the byte order.


def block_spec(config: Dict[str, Any], names: Dict[str, str],
               label_key: Optional[str]):
  """The element spec of a block parsed with `config` (dense features)."""
  features = {names[f]: tf.TensorSpec([None] + list(c.shape), c.dtype)
              for f, c in config.items()}
  if label_key is None:
    return features
  return features, features.pop(label_key)


def _columns(spec, label_key: Optional[str]) -> List[List[Any]]:
  """[name, dtype str, row shape] of each of the flattened element's
  tensors, in order: an entry's columns, in the order a block's bytes
  hold them."""
  if isinstance(spec, tuple):
    names = sorted(spec[0]) + [label_key]
  else:
    names = sorted(spec)
  return [[name, np.dtype(s.dtype.as_numpy_dtype).str, s.shape.as_list()[1:]]
          for name, s in zip(names, tf.nest.flatten(spec))]
