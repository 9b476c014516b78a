"""A SignatureDef's TensorInfo (a signature's input or output, as the
SavedModel's MetaGraphDef stores it) as a message says it: 'float32[None, 3]'.
"""

from typing import Optional


def dtype(info) -> str:
  """'float32', 'string': the tensor's dtype name."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.dtypes.as_dtype(info.dtype).name


def shape(info) -> str:
  """'[None, 3]', or '<unknown>' for an unknown rank."""
  if info.tensor_shape.unknown_rank:
    return '<unknown>'
  return str([d.size if d.size >= 0 else None for d in info.tensor_shape.dim])


def rank(info) -> Optional[int]:
  """The number of dimensions, or None when unknown."""
  return None if info.tensor_shape.unknown_rank else len(
      info.tensor_shape.dim)


def describe(info) -> str:
  """'float32[None, 3]': dtype and shape."""
  return f'{dtype(info)}{shape(info)}'
