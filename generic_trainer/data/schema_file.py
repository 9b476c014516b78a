"""Reads and writes a schema.pbtxt (a TFMD Schema in protobuf text format).

What `tfx.utils.io_utils.parse_pbtxt_file`/`write_pbtxt_file` do, without
importing TFX (whose `tfx.dsl` costs seconds at start-up): the local command
and the Estimator read schemas on their way to the first training step.
`tf.io.gfile` reads and writes local and remote (gs://...) paths alike.
"""


def read(path: str):
  """The Schema in `path`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(path, 'r') as f:
    return text_format.Parse(f.read(), schema_pb2.Schema())


def write(path: str, schema) -> str:
  """Writes `schema` to `path`, creating its folder; returns `path`."""
  import os  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  tf.io.gfile.makedirs(os.path.dirname(path) or '.')
  with tf.io.gfile.GFile(path, 'w') as f:
    f.write(text_format.MessageToString(schema))
  return path
