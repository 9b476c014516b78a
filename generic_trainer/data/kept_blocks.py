"""The parsed blocks of files, each read back from its kept entry or parsed
and written to one as it passes (`span_cache`).

A hit is the entry's blocks, in their order; a miss is the file's blocks
as the parser makes them, each also appended to a new entry by a
sequential `map` (a `tf.py_function`) in the pipeline: the first epoch
writes while it trains, and no pass over the data is added. A 0-row block
before the file's blocks starts the entry (dropping an unfinished one: a
pass stopped early, read again) and one after them finishes it; both are
filtered out before training sees them. Hit or miss, the blocks and their
boundaries are the same, so a seeded order is the same, and a resumed
training's `skip(k)` reads on in the same stream.
"""

from typing import Callable, List, Optional

import numpy as np
import tensorflow as tf

from generic_trainer.data import span_key

_START, _BLOCK, _END = 0, 1, 2


def interleaved(files: List[str], parsed: Callable, kept, compression: str,
                label_key: Optional[str], readers: int, deterministic: bool):
  """The blocks of `files`, each file's its kept entry's or parsed and
  written to one, interleaved as `input_pipeline.parsed_blocks`
  interleaves files (`readers` at a time, a block from each in turn).

  Args:
    files: The TFRecord files, in order.
    parsed: A function of a vector of file names (here, none or one) to the
      dataset of their parsed blocks.
    kept: (a `span_cache.SpanCache`, the key fields every file shares).
    compression: The files' compression (`tfrecords.common_compression`).
    label_key: The label the parser pops, or None.
    readers: Files read at a time.
    deterministic: Whether blocks come in a fixed order (else as ready).

  One function per block kind, traced once for all files (tracing one per
  file cost ~0.1 s of CPU a file): a file's stream is its entry's blocks
  (a generator, empty on a miss) then its parsed blocks (of no file on a
  hit), framed by a 0-row start and end block that open and finish its
  entry and are filtered out. When every file hits, or every file
  misses, the other half is left out of the graph.
  """
  store, shared = kept
  entries, writers = [], []
  for path in files:
    key = {**shared, **span_key.file_fields(path, compression)}
    entry = store.lookup(path, key)
    entries.append(entry)
    writers.append(None if entry is not None else store.writer(path, key))
  spec = parsed(tf.constant(files[:1])).element_spec
  flat_spec = tf.nest.flatten(spec)
  columns = [[name, np.dtype(s.dtype.as_numpy_dtype).str,
              s.shape.as_list()[1:]]
             for name, s in zip(_column_names(spec, label_key), flat_spec)]
  empty = tf.nest.pack_sequence_as(spec, [
      tf.zeros([0] + s.shape.as_list()[1:], s.dtype) for s in flat_spec])

  def kept_blocks(index):
    entry = entries[int(index)]
    for arrays in entry.block_arrays() if entry is not None else ():
      yield tf.nest.pack_sequence_as(spec, arrays)

  def write(kind, index, data):
    writer = writers[int(index)]
    kind = int(kind)
    if writer is None:
      return 0
    if kind == _START:
      writer.start(columns)
    elif kind == _BLOCK:
      writer.append(data.numpy())
    else:
      writer.finish(label_key)
    return 0

  any_hit = any(entry is not None for entry in entries)
  any_miss = any(entry is None for entry in entries)

  # Plain graph code: autograph's conversion of these functions took
  # most of the ~0.25 s of CPU that building the dataset cost.
  @tf.autograph.experimental.do_not_convert
  def one_file(path, index, hit):
    from_entry = tf.data.Dataset.from_generator(
        kept_blocks, output_signature=spec, args=(index,))
    if not any_miss:  # Nothing to parse or write: no writer in the graph.
      return from_entry
    blocks = parsed(tf.boolean_mask(tf.reshape(path, [1]),
                                    tf.reshape(tf.logical_not(hit), [1])))
    start, end = (tf.data.Dataset.from_tensors((tf.constant(kind), empty))
                  for kind in (_START, _END))
    @tf.autograph.experimental.do_not_convert
    def through(kind, element):
      """`element` as it is; its bytes, one tensor, written on the way (a
      py_function is stateful: tf.data runs it though nothing uses it)."""
      data = tf.concat([tf.reshape(tf.bitcast(t, tf.uint8), [-1])
                        for t in tf.nest.flatten(element)], 0)
      tf.py_function(write, [kind, index, data], Tout=tf.int32)
      return element

    tags = tf.data.Dataset.from_tensors(tf.constant(_BLOCK)).repeat()
    stream = start.concatenate(tf.data.Dataset.zip((tags, blocks)))
    written = stream.concatenate(end).map(through).filter(
        tf.autograph.experimental.do_not_convert(
            lambda *element: tf.shape(tf.nest.flatten(element)[0])[0] > 0))
    return from_entry.concatenate(written) if any_hit else written

  hits = [entry is not None for entry in entries]
  return tf.data.Dataset.from_tensor_slices(
      (files, tf.range(len(files), dtype=tf.int64), hits)).interleave(
          one_file, cycle_length=readers,
          num_parallel_calls=readers if readers > 1 else None,
          deterministic=deterministic if readers > 1 else None)


def _column_names(spec, label_key: Optional[str]):
  """The names of the flattened element's tensors, in order."""
  if isinstance(spec, tuple):
    return sorted(spec[0]) + [label_key]
  return sorted(spec)
