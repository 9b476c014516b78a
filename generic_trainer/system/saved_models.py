"""SavedModels read once: a folder loaded (`tf.saved_model.load`) or its
`saved_model.pb` parsed once per process while it is unchanged.

The base model is read by the warm start (its weights) and by the
publication gate (its signatures, and whether it is a TF1 model); an
export by the validation, the serving check and the gate. Each reads
through here, so that one attempt loads the base model once and parses
each `saved_model.pb` once. An entry is keyed by the folder and the state
of its `saved_model.pb` (size and modification time, and the inode where
the folder is local): a folder replaced between two reads is read again.
The last `KEEP` of each kind are kept (a loaded SavedModel holds its
weights in memory).
"""

import collections
import os
from typing import Any, Tuple

import tensorflow as tf
from tensorflow.python.saved_model import loader_impl

from generic_trainer.keys import SAVED_MODEL_FILE

KEEP = 2
_loaded = collections.OrderedDict()
_parsed = collections.OrderedDict()
# What reads a folder when it is not kept (TensorFlow's own load parses
# the saved_model.pb again: that one is not ours to share).
_load = tf.saved_model.load
_parse = loader_impl.parse_saved_model


def _state(folder: str) -> Tuple[Any, ...]:
  """What identifies `folder`'s SavedModel as it is now."""
  path = os.path.join(folder, SAVED_MODEL_FILE)
  if '://' in folder:
    info = tf.io.gfile.stat(path)
    return folder, info.length, info.mtime_nsec
  info = os.stat(path)
  return os.path.realpath(folder), info.st_ino, info.st_size, info.st_mtime_ns


def _cached(cache, folder: str, read):
  try:
    key = _state(folder)
  except (OSError, tf.errors.OpError):
    return read(folder)  # No saved_model.pb: the reader says what is wrong.
  if key in cache:
    cache.move_to_end(key)
    return cache[key]
  value = read(folder)
  cache[key] = value
  while len(cache) > KEEP:
    cache.popitem(last=False)
  return value


def load(folder: str):
  """`tf.saved_model.load(folder)`, once while the folder is unchanged."""
  return _cached(_loaded, folder, _load)


def parse(folder: str):
  """The `SavedModel` proto of `folder`'s saved_model.pb, once while it is
  unchanged."""
  return _cached(_parsed, folder, _parse)
