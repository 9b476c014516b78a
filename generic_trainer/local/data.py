"""Local CSV or TFRecord files as split folders, an Examples artifact, a schema.

Used by the Estimator and the local command so that a TrainSpec or a
`run_fn` trained outside a pipeline reads its data as a pipeline does. Each
split gets a folder as ExampleGen writes it: CSV files are converted once to
gzip TFRecords of tf.Example, TFRecord files are linked. A schema is inferred
(int, float or bytes per column; one value per example) unless one is given.
"""

import csv
import glob
import os
from typing import List, Optional

from generic_trainer.data import tfrecords
from generic_trainer.errors import InputArtifactError


def resolve_files(data) -> List[str]:
  """Files matching a path, a glob, or a list of them."""
  patterns = [data] if isinstance(data, str) else list(data)
  files = sorted(f for p in patterns for f in (glob.glob(p) if any(
      c in p for c in '*?[') else [p]) if os.path.isfile(f))
  if not files:
    raise InputArtifactError(
        f'No data files found for {data!r}. Expected CSV files (*.csv) or '
        'TFRecord files of tf.Example (*.tfrecord, *.gz).')
  return files


def to_split(data, split_dir: str) -> List[str]:
  """Makes `split_dir` a split folder of the data; returns its TFRecord files.

  CSV files become one gzip TFRecord file, `data.gz`; TFRecord files are
  linked. What the folder held before is removed.
  """
  files = resolve_files(data)
  if any(f.endswith('.csv') for f in files) and not all(
      f.endswith('.csv') for f in files):
    raise InputArtifactError(
        f'Mixed CSV and non-CSV files in {files}; pass one kind at a time.')
  inside = [f for f in files if _is_within(f, split_dir)]
  if inside:
    raise InputArtifactError(
        f'The data files {inside} lie in {split_dir}, the folder they would '
        'be written to. Move them elsewhere first.')
  if files[0].endswith('.csv'):
    _clear(split_dir)
    out = os.path.join(split_dir, 'data.gz')
    _csv_to_tfrecord(files, out)
    return [out]
  check_tfrecords(files)
  return link_split(files, split_dir)


def check_tfrecords(files: List[str]) -> None:
  """Reads the first record of each file, so a wrong file fails early."""
  from generic_trainer.errors import summarize  # pylint: disable=g-import-not-at-top
  for path in files:
    error = tfrecords.first_record_error(path)
    if error is not None:
      raise InputArtifactError(
          f'{path} is not a readable {tfrecords.describe(path)} file: '
          f'{summarize(error)}. Expected TFRecord files of '
          'tf.Example (gzip when the name ends in .gz) or CSV files (named '
          '*.csv). Check the file, or convert it.') from error


def link_split(files: List[str], split_dir: str) -> List[str]:
  """Links `files` into `split_dir` (which it clears); returns the links.

  Names are kept (the `.gz` suffix says the files are gzip), prefixed with a
  number when two files share a name.
  """
  _clear(split_dir)
  names = [os.path.basename(f) for f in files]
  if len(set(names)) < len(names):
    names = [f'{i:05d}-{name}' for i, name in enumerate(names)]
  links = [os.path.join(split_dir, name) for name in names]
  for source, link in zip(files, links):
    os.symlink(os.path.realpath(source), link)
  return links


def _clear(folder: str) -> None:
  import shutil  # pylint: disable=g-import-not-at-top
  if os.path.lexists(folder):
    shutil.rmtree(folder)
  os.makedirs(folder)


def _is_within(path: str, folder: str) -> bool:
  path, folder = os.path.realpath(path), os.path.realpath(folder)
  return os.path.commonpath([path, folder]) == folder


def _csv_to_tfrecord(files: List[str], out: str) -> None:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rows = []
  for path in files:
    with open(path, newline='') as f:
      rows.extend(csv.DictReader(f))
  if not rows:
    raise InputArtifactError(f'The CSV file(s) {files} have no rows.')
  kinds = {c: _column_kind([r[c] for r in rows]) for c in rows[0]}
  with tf.io.TFRecordWriter(out, options=tfrecords.compression(out)) as writer:
    for row in rows:
      feature = {}
      for name, kind in kinds.items():
        value = row[name]
        if value in ('', 'NA'):
          continue
        if kind == 'int':
          feature[name] = tf.train.Feature(
              int64_list=tf.train.Int64List(value=[int(value)]))
        elif kind == 'float':
          feature[name] = tf.train.Feature(
              float_list=tf.train.FloatList(value=[float(value)]))
        else:
          feature[name] = tf.train.Feature(
              bytes_list=tf.train.BytesList(value=[value.encode()]))
      writer.write(tf.train.Example(features=tf.train.Features(
          feature=feature)).SerializeToString())


def _column_kind(values) -> str:
  present = [v for v in values if v not in ('', 'NA')]
  for kind, parse in (('int', int), ('float', float)):
    try:
      for v in present:
        parse(v)
      return kind
    except ValueError:
      continue
  return 'bytes'


def infer_schema(files: List[str], limit: int = 1000):
  """A Schema from the first `limit` tf.Examples of `files`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  kinds, counts, present, seen = {}, {}, {}, 0
  for path in files:
    for record in tf.data.TFRecordDataset(
        path, tfrecords.compression(path)).take(limit - seen):
      example = tf.train.Example.FromString(record.numpy())
      for name, feature in example.features.feature.items():
        kind = feature.WhichOneof('kind')
        kinds[name] = kind
        counts.setdefault(name, set()).add(len(getattr(feature, kind).value))
        present[name] = present.get(name, 0) + 1
      seen += 1
    if seen >= limit:
      break
  if not seen:
    raise InputArtifactError(f'No tf.Example records in {files}.')
  types = {'int64_list': schema_pb2.INT, 'float_list': schema_pb2.FLOAT,
           'bytes_list': schema_pb2.BYTES}
  schema = schema_pb2.Schema()
  for name in sorted(kinds):
    feature = schema.feature.add(name=name, type=types[kinds[name]])
    if counts[name] == {1} and present[name] == seen:
      feature.shape.dim.add(size=1)
      feature.presence.min_fraction = 1.0
  return schema


def examples_artifact(root: str, splits: dict):
  """An Examples artifact over the split folders written by `to_split`."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  artifact = standard_artifacts.Examples()
  artifact.uri = root
  artifact.split_names = '[' + ', '.join(f'"{s}"' for s in splits) + ']'
  artifact.set_string_custom_property('payload_format', 'FORMAT_TF_EXAMPLE')
  return artifact


def write_schema(schema, path: str, given: Optional[str] = None) -> str:
  """`given` if there is one, else `schema` written to `path`; the path."""
  from generic_trainer.data import schema_file  # pylint: disable=g-import-not-at-top
  if given:
    return given
  return schema_file.write(path, schema)
