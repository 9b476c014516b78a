"""The parsed blocks of one file, read back from a kept entry or parsed and
written to one as they pass (`span_cache`).

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

from typing import Any, Dict, Optional

import tensorflow as tf

from generic_trainer.data import span_key

_START, _BLOCK, _END = 0, 1, 2


def interleaved(files, parsed, kept, compression: str,
                label_key: Optional[str], readers: int, deterministic: bool):
  """The blocks of `files`, each file's its kept entry's or `parsed(file)`
  written to one, interleaved as `input_pipeline.parsed_blocks`
  interleaves files (`readers` at a time, a block from each in turn).
  `kept`: (a `span_cache.SpanCache`, the key fields every file shares)."""
  store, shared = kept
  each = [file_blocks(parsed(f), f, store,
                      {**shared, **span_key.file_fields(f, compression)},
                      label_key) for f in files]
  nested = tf.data.Dataset.from_tensors(each[0])
  for dataset in each[1:]:
    nested = nested.concatenate(tf.data.Dataset.from_tensors(dataset))
  return nested.interleave(
      lambda dataset: dataset, cycle_length=readers,
      num_parallel_calls=readers if readers > 1 else None,
      deterministic=deterministic if readers > 1 else None)


def file_blocks(parsed, path: str, store, key: Dict[str, Any],
                label_key: Optional[str]):
  """The parsed blocks of the TFRecord file `path`: the entry of `store`
  (a `span_cache.SpanCache`) for `key` when it has a whole one, else
  `parsed` (the file's blocks as the parser makes them), each written to a
  new entry on its way."""
  spec = parsed.element_spec
  entry = store.lookup(path, key)
  if entry is not None:
    return _entry_blocks(entry, spec)
  return _written(parsed, store.writer(path, key), spec, label_key)


def _entry_blocks(entry, spec):
  """The entry's blocks as tensors of `spec`'s structure."""

  def blocks():
    for arrays in entry.block_arrays():
      yield tf.nest.pack_sequence_as(spec, arrays)

  return tf.data.Dataset.from_generator(blocks, output_signature=spec)


def _written(parsed, writer, spec, label_key: Optional[str]):
  """`parsed`, each block appended to `writer`'s entry on its way."""
  flat_spec = tf.nest.flatten(spec)
  names = _column_names(spec, label_key)
  empty = tf.data.Dataset.from_tensors(tf.nest.pack_sequence_as(
      spec, [tf.zeros([0] + s.shape.as_list()[1:], s.dtype)
             for s in flat_spec]))

  def tagged(kind):
    return lambda *element: (tf.constant(kind), element)

  def write(kind, *tensors):
    kind = int(kind)
    if kind == _START:
      writer.start()
    elif kind == _BLOCK:
      writer.append(names, [t.numpy() for t in tensors])
    else:
      writer.finish(label_key)
    return 0

  def through(kind, element):
    done = tf.py_function(write, [kind] + tf.nest.flatten(element),
                          Tout=tf.int32)
    with tf.control_dependencies([done]):
      return kind, tf.nest.map_structure(tf.identity, element)

  stream = empty.map(tagged(_START)).concatenate(
      parsed.map(tagged(_BLOCK))).concatenate(empty.map(tagged(_END)))
  stream = stream.map(through).filter(lambda kind, _: kind == _BLOCK)
  return stream.map(lambda _, element: element if len(element) > 1 else
                    element[0])


def _column_names(spec, label_key: Optional[str]):
  """The names of the flattened element's tensors, in order."""
  if isinstance(spec, tuple):
    return sorted(spec[0]) + [label_key]
  return sorted(spec)


def numeric(spec) -> bool:
  """Whether every tensor of an element is a number (entries keep no
  strings)."""
  return all(s.dtype.is_floating or s.dtype.is_integer or s.dtype.is_bool
             for s in tf.nest.flatten(spec))
