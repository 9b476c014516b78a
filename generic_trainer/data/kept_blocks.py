"""The parsed blocks of files, each read back from its kept entry or parsed
and written to one as it passes (`span_cache`).

One pipeline for hits and misses, shaped as `input_pipeline.parsed_blocks`
is without kept rows: files are interleaved, `readers` at a time. Each
file is its own small dataset, chosen by a `tf.cond` once per file, so a
hit pays nothing for misses and a miss nothing for hits:

- a hit's blocks are read by TensorFlow ops, no Python: the entry's file
  read once, each block's columns cut out of it by one `substr` and
  decoded as raw bytes;
- a miss's batches of records are parsed (in parallel), then pass a
  sequential `map` (a `tf.numpy_function`) that appends each to a new
  entry: the first epoch writes while it trains, and no pass over the
  data is added. A file's first block opens its entry (dropping an
  unfinished one: a pass stopped early, read again); a 0-row block after
  its last one finishes it, and is filtered out before training sees it.

Hit or miss, the blocks and their boundaries are the same, so a seeded
order is the same, and a resumed training's `skip(k)` reads on in the same
stream.
"""

import itertools
import os
import sys
import weakref
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from generic_trainer.data import span_key
from generic_trainer.data.graph_code import plain


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
      of their records in batches of `PARSE_ROWS`.
    parse: A batch of records to its parsed block (of `spec`).
    spec: The element spec of a parsed block.
    kept: (a `span_cache.SpanCache`, the key fields every file shares).
    label_key: The label the parser pops, or None.
    readers: Files read at a time.
    cores: Batches parsed at a time, all files together: each of the
      `readers` files parses `cores // readers` at a time (one, when there
      are as many files as cores: one parse a thread does better than two
      on a 2-core machine, 0.73 s against 0.76 s for a span of 330k rows).
    deterministic: Whether files' blocks come in a fixed order (else as
      ready). A file's own blocks always come in order.
  """
  store, shared = kept
  columns = _columns(spec, label_key)
  entries, writers = [], []
  for path in files:
    key = {**shared, **span_key.file_fields(path, compression)}
    entry = store.lookup(path, key)
    entries.append(entry)
    writers.append(_NO_WRITER if entry is not None else _writing(
        store.writer(path, key, columns, label_key)))
  layout = _Layout(entries, columns)
  one_file = _traced_one_file(
      (span_key.fingerprint(shared), compression, max(1, cores // readers),
       any(entry is not None for entry in entries),
       any(entry is None for entry in entries)), read, parse, spec)
  return tf.data.Dataset.from_tensor_slices((
      tf.constant(writers, tf.int64), layout.paths, layout.starts,
      layout.sizes, tf.ragged.constant(
          [[] if entry is not None else [path]
           for path, entry in zip(files, entries)], tf.string))).interleave(
               one_file, cycle_length=readers,
               num_parallel_calls=readers if readers > 1 else None,
               deterministic=deterministic if readers > 1 else None)


# The writers of the misses being read, by number (a file's element holds
# its writer's). Weak: the store holds its writers until it is left.
_WRITERS = weakref.WeakValueDictionary()
_NUMBERS = itertools.count()
_NO_WRITER = -1  # A hit's.


def _writing(writer) -> int:
  """`writer`'s number, for `_write`."""
  number = next(_NUMBERS)
  _WRITERS[number] = writer
  return number


def _write(number, ordinal, *columns):
  """Appends a block to the entry of writer `number` (a numpy function):
  ordinal 0 opens it, a 0-row block finishes it."""
  writer = _WRITERS.get(int(number))
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

_TRACED = {}  # (parsing, compression, parsers, hits?, misses?): one_file


def _traced_one_file(traced, read: Callable, parse: Callable, spec):
  """The function of the files' interleave, a tf.function traced once per
  process for each `traced` key (the parsing, the compression, the
  batches a file parses at a time, whether there are hits, misses): a training's eval dataset calls
  its train dataset's, not traced again (~25 ms of CPU a dataset). It
  captures nothing of one dataset: a file's element holds its part of the
  tables and its writer's number."""
  if traced in _TRACED:
    return _TRACED[traced]
  _, _, parsers, any_hit, any_miss = traced
  parsers = parsers if parsers > 1 else None
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
      blocks = read(missed).map(parse, num_parallel_calls=parsers).concatenate(
          tf.data.Dataset.from_tensors(end))
      return tf.data.Dataset.zip((_every(number), _ordinals(), blocks)).map(
          written).filter(nonempty)

    if not any_miss:
      return hit()
    if not any_hit:
      return miss()
    return tf.cond(tf.size(missed) > 0, miss, hit)

  _TRACED[traced] = tf.function(plain(one_file))
  return _TRACED[traced]


def _ordinals():
  """0, 1, 2... (zipped with a finite dataset). Not `Dataset.counter`: a
  scan, whose function is instantiated again for every file."""
  return tf.data.Dataset.range(np.iinfo(np.int64).max)


def _every(value):
  """`value`, as every element (zipped with a finite dataset)."""
  return tf.data.Dataset.from_tensors(value).repeat()


class _Layout:
  """Where each block of the hits' entries lies, and each column in it: per
  file its entry's path and a table of its blocks (where each column's
  bytes start, how many they are), the files' elements' parts."""

  def __init__(self, entries, columns):
    row_bytes = np.array([int(np.prod(shape, dtype=np.int64)) *
                          np.dtype(dtype).itemsize
                          for _, dtype, shape in columns], np.int64)
    # Per block and column: where the column's bytes start in its entry,
    # and how many they are (a block's columns one after the other).
    paths, count, starts, sizes = [], [], [], []
    for entry in entries:
      rows = np.array([rows for rows, _ in entry.manifest['blocks']]
                      if entry is not None else [], np.int64)
      paths.append(entry.blocks_path if entry is not None else os.devnull)
      count.append(len(rows))
      sizes.append(rows[:, None] * row_bytes)
      ends = np.cumsum(sizes[-1].reshape(-1)).reshape(sizes[-1].shape)
      starts.append(ends - sizes[-1])
    # Per file, its blocks' rows of the tables (a ragged dimension).
    self.paths = tf.constant(paths)
    self.starts, self.sizes = (
        tf.RaggedTensor.from_row_lengths(
            np.concatenate(table), np.array(count, np.int64), validate=False)
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
  names = sorted(spec[0]) + [label_key] if isinstance(spec, tuple) else (
      sorted(spec))
  return [[name, np.dtype(s.dtype.as_numpy_dtype).str, s.shape.as_list()[1:]]
          for name, s in zip(names, tf.nest.flatten(spec))]
