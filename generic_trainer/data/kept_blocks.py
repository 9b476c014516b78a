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

  @plain
  def one_file(path, index, hit):
    """The file's elements: ((index, its entry's bytes), (ordinal in
    the file, records, (where each column of the block starts in the
    entry's bytes, its bytes))). A miss's are its batches of records, then
    an empty batch (the end of its entry); a hit's are its entry's blocks.
    Traced once for all files: the half of the other kind is empty. Zipped
    from few datasets, not mapped: a file's datasets are made again for
    every file, a function in them instantiated again (~5 ms of CPU)."""
    parts = []
    if any_hit:
      content = tf.io.read_file(layout.paths[index])  # A miss: os.devnull.
      first = layout.first[index]
      last = first + layout.count[index]
      blocks = (tf.range(last - first), tf.zeros([last - first, 0],
                                                 tf.string),
                (layout.starts[first:last], layout.sizes[first:last]))
      parts.append(tf.data.Dataset.zip((
          _every((index, content)),
          tf.data.Dataset.from_tensor_slices(blocks))))
    if any_miss:
      missed = tf.logical_not(hit)
      records = read(tf.boolean_mask(tf.reshape(path, [1]),
                                     tf.reshape(missed, [1]))).concatenate(
          tf.data.Dataset.from_tensors(tf.zeros([0], tf.string)).repeat(
              tf.cast(missed, tf.int64)))
      parts.append(tf.data.Dataset.zip((
          _every((index, tf.constant(''))), tf.data.Dataset.zip((
              tf.data.Dataset.counter(), records,
              _every((layout.nothing, layout.nothing)))))))
    return parts[0] if len(parts) == 1 else parts[0].concatenate(parts[1])

  @plain
  def block(file, element):
    """The parsed block (with its file's index and its ordinal there, to
    write it)."""
    (index, content), (ordinal, records, (starts, sizes)) = file, element
    if not any_hit:
      parsed = parse(records)
    elif not any_miss:
      return layout.decode(content, starts, sizes)
    else:  # One of the two has no rows (a tf.cond costs ~20 ms to build).
      parsed = tf.nest.map_structure(
          lambda kept, read: tf.concat([kept, read], 0),
          layout.decode(content, starts, sizes), parse(records))
    return index, ordinal, parsed

  @plain
  def written(index, ordinal, parsed):
    """`parsed` as it is, written on the way (a stateful numpy_function:
    tf.data runs it though nothing uses its result; it costs less a call
    than a py_function, which makes eager tensors of its arguments)."""
    tf.numpy_function(write, [index, ordinal] + tf.nest.flatten(parsed),
                      Tout=tf.int32, stateful=True)
    return parsed

  hits = [entry is not None for entry in entries]
  elements = tf.data.Dataset.from_tensor_slices(
      (files, tf.range(len(files), dtype=tf.int64), hits)).interleave(
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


_DONE = np.int32(0)  # What the write returns (nothing uses it).


def _every(value):
  """`value`, as every element (zipped with a finite dataset)."""
  return tf.data.Dataset.from_tensors(value).repeat()


class _Layout:
  """Where each block of the hits' entries lies, and each column in it, as
  constant tensors; and how a block's columns are cut out of its bytes."""

  def __init__(self, entries, spec, label_key: Optional[str]):
    self.spec = spec
    flat = tf.nest.flatten(spec)
    self.columns = [[name, np.dtype(s.dtype.as_numpy_dtype).str,
                     s.shape.as_list()[1:]]
                    for name, s in zip(_column_names(spec, label_key), flat)]
    row_bytes = np.array([int(np.prod(shape, dtype=np.int64)) * s.dtype.size
                          for (_, _, shape), s in zip(self.columns, flat)],
                         np.int64)
    # Per block and column: where the column's bytes start in its entry,
    # and how many they are (a block's columns one after the other).
    paths, first, count, starts, sizes = [], [], [], [], []
    for entry in entries:
      blocks = entry.manifest['blocks'] if entry is not None else []
      paths.append(entry.blocks_path if entry is not None else os.devnull)
      first.append(len(starts))
      count.append(len(blocks))
      offset = 0
      for rows, _ in blocks:
        sizes.append(rows * row_bytes)
        starts.append(offset + np.cumsum(sizes[-1]) - sizes[-1])
        offset += int(sizes[-1].sum())
    self.paths = tf.constant(paths)
    self.first = tf.constant(first, tf.int64)
    self.count = tf.constant(count, tf.int64)
    self.starts = tf.constant(np.array(starts, np.int64).reshape(-1, len(flat)))
    self.sizes = tf.constant(np.array(sizes, np.int64).reshape(-1, len(flat)))
    self.nothing = tf.zeros([len(flat)], tf.int64)

  def decode(self, content, starts, sizes):
    """The block whose columns lie at `starts`, `sizes` bytes each, in an
    entry's bytes `content`."""
    pieces = tf.unstack(tf.strings.substr(content, starts, sizes),
                        num=len(self.columns))
    arrays = [tf.reshape(tf.io.decode_raw(piece, s.dtype,
                                          little_endian=_LITTLE),
                         [-1] + s.shape.as_list()[1:])
              for piece, s in zip(pieces, tf.nest.flatten(self.spec))]
    return tf.nest.pack_sequence_as(self.spec, arrays)


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
