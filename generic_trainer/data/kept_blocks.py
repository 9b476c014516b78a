"""The parsed blocks of files, each read back from its kept entry or parsed
and written to one as it passes (`span_cache`).

One pipeline for hits and misses, shaped as `input_pipeline.parsed_blocks`
is without kept rows: files are interleaved, `readers` at a time, and each
element is turned into a parsed block by a parallel `map`. A miss's
element is a batch of its file's records, parsed there; a hit's element is
a block of its entry, read by TensorFlow ops, no Python (the entry's file
read once, each block's columns cut out of it by one `substr` and decoded
as raw bytes). A miss's blocks then pass a sequential `map` (a
`tf.numpy_function`) that appends each to a new entry: the first epoch
writes while it trains, and no pass over the data is added. A file's
first block opens its entry (dropping an unfinished one: a pass stopped
early, read again); a 0-row block after its last one finishes it, and is
filtered out before training sees it.

Hit or miss, the blocks and their boundaries are the same, so a seeded
order is the same, and a resumed training's `skip(k)` reads on in the same
stream.
"""

import os
import sys
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
    read: A function of a vector of file names (here, none or one) to the
      dataset of their records in batches of `PARSE_ROWS`.
    parse: A batch of records to its parsed block (of `spec`).
    spec: The element spec of a parsed block.
    kept: (a `span_cache.SpanCache`, the key fields every file shares).
    label_key: The label the parser pops, or None.
    readers: Files read at a time.
    cores: Blocks parsed or decoded at a time.
    deterministic: Whether files' blocks come in a fixed order (else as
      ready). A file's own blocks always come in order.
  """
  store, shared = kept
  entries, writers = [], []
  for path in files:
    key = {**shared, **span_key.file_fields(path, compression)}
    entry = store.lookup(path, key)
    entries.append(entry)
    writers.append(None if entry is not None else store.writer(path, key))
  layout = _Layout(entries, spec, label_key)
  any_hit = any(entry is not None for entry in entries)
  any_miss = any(entry is None for entry in entries)

  def write(index, ordinal, *columns):
    """Appends a block to file `index`'s entry (a numpy function)."""
    writer = writers[int(index)]
    if writer is None:
      return _DONE
    if int(ordinal) == 0:
      writer.start(layout.columns)
    if columns[0].shape[0]:
      writer.append(columns)
    else:
      writer.finish(label_key)
    return _DONE

  one_file, block = _traced_functions(
      (span_key.fingerprint(shared), compression, any_hit, any_miss),
      read, parse, spec, any_hit, any_miss)

  @plain
  def written(index, ordinal, parsed):
    """`parsed` as it is, written on the way (a stateful numpy_function:
    tf.data runs it though nothing uses its result; it costs less a call
    than a py_function, which makes eager tensors of its arguments)."""
    tf.numpy_function(write, [index, ordinal] + tf.nest.flatten(parsed),
                      Tout=tf.int32, stateful=True)
    return parsed

  elements = tf.data.Dataset.from_tensor_slices((
      tf.range(len(files), dtype=tf.int64), layout.paths, layout.starts,
      layout.sizes, tf.ragged.constant(
          [[] if entry is not None else [path]
           for path, entry in zip(files, entries)], tf.string),
      tf.constant([int(entry is None) for entry in entries], tf.int64)
  )).interleave(
          one_file, cycle_length=readers,
          num_parallel_calls=readers if readers > 1 else None,
          deterministic=deterministic if readers > 1 else None)
  # In order when writing: a file's blocks reach its writer in order.
  blocks = elements.map(block, num_parallel_calls=cores,
                        deterministic=deterministic or any_miss)
  if not any_miss:  # Nothing to write: no writer in the graph.
    return blocks
  return blocks.map(written).filter(plain(
      lambda *parsed: tf.shape(tf.nest.flatten(parsed)[0])[0] > 0))


_TRACED = {}  # (parsing, compression, hits?, misses?): (one_file, block)


def _traced_functions(traced, read: Callable, parse: Callable, spec,
                      any_hit: bool, any_miss: bool):
  """(one_file, block): the function of the files' interleave and that of
  the blocks' map, as tf.functions traced once per process for each
  `traced` key (the parsing, the compression, whether there are hits,
  misses): a training's eval dataset calls its train dataset's, not
  traced again (~25 ms of CPU a dataset). Neither captures anything of one
  dataset: a file's element holds its part of the tables."""
  if traced in _TRACED:
    return _TRACED[traced]
  width = len(tf.nest.flatten(spec))

  def one_file(index, entry, starts, sizes, missed, ends):
    """The file's elements: ((index, its entry's bytes), (ordinal in
    the file, records, (where each column of the block starts in the
    entry's bytes, its bytes))). A miss's are its batches of records, then
    an empty batch (the end of its entry); a hit's are its entry's blocks.
    One function for all files: the half of the other kind is empty (a
    hit's `missed` holds no file and its `ends` is 0; a miss's entry is
    os.devnull, and it has no blocks). Zipped from few datasets, not
    mapped: a file's datasets are made again for every file, a function
    in them instantiated again (~5 ms of CPU)."""
    parts = []
    if any_hit:
      parts.append(tf.data.Dataset.zip((
          _every((index, tf.io.read_file(entry))), tf.data.Dataset.zip((
              _ordinals(), _every(_NO_RECORDS),
              tf.data.Dataset.from_tensor_slices((starts, sizes)))))))
    if any_miss:
      nothing = tf.zeros([width], tf.int64)
      records = read(missed).concatenate(
          tf.data.Dataset.from_tensors(_NO_RECORDS).repeat(ends))
      parts.append(tf.data.Dataset.zip((
          _every((index, tf.constant(''))), tf.data.Dataset.zip((
              _ordinals(), records, _every((nothing, nothing)))))))
    return parts[0] if len(parts) == 1 else parts[0].concatenate(parts[1])

  def block(file, element):
    """The parsed block (with its file's index and its ordinal there, to
    write it)."""
    (index, content), (ordinal, records, (starts, sizes)) = file, element
    if not any_hit:
      parsed = parse(records)
    elif not any_miss:
      return _decode(spec, content, starts, sizes)
    else:  # One of the two has no rows (a tf.cond costs ~20 ms to build).
      parsed = tf.nest.map_structure(
          lambda kept, read: tf.concat([kept, read], 0),
          _decode(spec, content, starts, sizes), parse(records))
    return index, ordinal, parsed

  _TRACED[traced] = tf.function(plain(one_file)), tf.function(plain(block))
  return _TRACED[traced]


_DONE = np.int32(0)  # What the write returns (nothing uses it).
_NO_RECORDS = np.zeros([0], object)  # A hit's records, a miss's last.


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

  def __init__(self, entries, spec, label_key: Optional[str]):
    flat = tf.nest.flatten(spec)
    self.columns = [[name, np.dtype(s.dtype.as_numpy_dtype).str,
                     s.shape.as_list()[1:]]
                    for name, s in zip(_column_names(spec, label_key), flat)]
    row_bytes = np.array([int(np.prod(shape, dtype=np.int64)) * s.dtype.size
                          for (_, _, shape), s in zip(self.columns, flat)],
                         np.int64)
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


def _column_names(spec, label_key: Optional[str]):
  """The names of the flattened element's tensors, in order."""
  if isinstance(spec, tuple):
    return sorted(spec[0]) + [label_key]
  return sorted(spec)
