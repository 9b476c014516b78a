"""Reads and writes a schema.pbtxt (a TFMD Schema in protobuf text format).

What `tfx.utils.io_utils.parse_pbtxt_file`/`write_pbtxt_file` do, without
importing TFX (whose `tfx.dsl` costs seconds at start-up): the local command
and the Estimator read schemas on their way to the first training step.
`tf.io.gfile` reads and writes local and remote (gs://...) paths alike.
"""
import os

import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from generic_trainer.errors import InputArtifactError
from generic_trainer.system import atomic_files


def read(path: str):
  """The Schema in `path`.

  Raises:
    InputArtifactError: the file is not a Schema in text format; the message
      names the file and the line.
  """
  with tf.io.gfile.GFile(path, 'r') as f:
    text = f.read()
  try:
    return text_format.Parse(text, schema_pb2.Schema())
  except text_format.ParseError as e:
    raise InputArtifactError(
        f'The schema file {path} does not parse, at line {e.GetLine()}, '
        f'column {e.GetColumn()}: {str(e).split(" : ", 1)[-1].rstrip(".")}. '
        'Expected a TFMD Schema in protobuf text format, as SchemaGen '
        'writes it (feature { name: "..." type: FLOAT ... }). Received: text '
        'that is not one, at that line. Fix that line, '
        'or leave the schema out to infer one (generic-trainer).') from e


def write(path: str, schema) -> str:
  """Writes `schema` to `path`, creating its folder; returns `path`."""
  tf.io.gfile.makedirs(os.path.dirname(path) or '.')
  return atomic_files.write_text(path, text_format.MessageToString(schema))
