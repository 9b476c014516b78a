"""Synthetic tabular data sets, stored the way ExampleGen stores examples.

`write(root, train_rows, eval_rows, table=...)` writes gzip TFRecords of
tf.Example to `root/Split-train/` and `root/Split-eval/` (several shards
each) and a `schema.pbtxt` as SchemaGen writes it (one value per feature,
dense). Two kinds of table (`table_spec`): 'narrow', 12 float features; 'wide',
200 features (120 floats, 40 int and 40 string categoricals), where parsing
dominates ('wide-N': N features in the same proportions, for smoke runs). The label depends on the features, so a model learns it.
Written once per (rows, seed, table): a second call with the same arguments
reuses the files.
"""

import json
import os
from typing import Dict, List, NamedTuple


class Table(NamedTuple):
  """The features of a table: float, int categorical and string
  categorical ones (`VOCABULARY` values each)."""
  floats: int
  ints: int = 0
  strings: int = 0


def table_spec(name: str) -> Table:
  """The features of the table `name`: 'narrow', 'wide' or 'wide-N'."""
  if name == 'narrow':
    return Table(12)
  kind, _, count = name.partition('-')
  if kind != 'wide' or not (count or '200').isdigit():
    raise ValueError(f"A table is 'narrow', 'wide' or 'wide-N'. Received: "
                     f'{name!r}.')
  count = int(count or 200)
  return Table(count - 2 * (count // 5), count // 5, count // 5)


VOCABULARY = 50
NUM_FEATURES = 12
LABEL_KEY = 'label'
_CHUNK = 65536


def feature_keys(table: str = 'narrow') -> Dict[str, List[str]]:
  """{'float': [...], 'int': [...], 'string': [...]}: the feature names of
  `table` by kind ('f00'... for the narrow table's floats)."""
  t = table_spec(table)
  if table == 'narrow':
    return {'float': [f'f{i:02d}' for i in range(t.floats)], 'int': [],
            'string': []}
  return {'float': [f'f{i:03d}' for i in range(t.floats)],
          'int': [f'i{i:03d}' for i in range(t.ints)],
          'string': [f's{i:03d}' for i in range(t.strings)]}


FEATURE_KEYS = feature_keys()['float']


def parsed_row_bytes(table: str = 'narrow') -> int:
  """Memory of a parsed row, label included: 4 bytes a float, 8 an int,
  24 a string (a `tstring` holds these short values inline)."""
  t = table_spec(table)
  return 4 * t.floats + 8 * (t.ints + 1) + 24 * t.strings


def table_of(root: str) -> str:
  """The table a data set written by `write` holds."""
  with open(os.path.join(root, 'stamp.json')) as f:
    return json.load(f).get('table', 'narrow')


# Where the data sets are written once and reused.
DATA_DIR = os.path.join(os.path.expanduser('~'), '.cache',
                        'tfx-generic-trainer', 'benchmark')
MAIN_EVAL_ROWS = 10_000


def main_set(data_dir: str, rows: int) -> Dict[str, str]:
  """The `main` data set with `rows` train rows (the narrow table,
  `MAIN_EVAL_ROWS` eval rows), in the folder `benchmarks.run` gives it:
  written once under `data_dir`, then reused."""
  return write(os.path.join(data_dir, f'rows-{rows}-{MAIN_EVAL_ROWS}'), rows,
               MAIN_EVAL_ROWS, table='narrow')


def parser_config(root: str):
  """(config, names) of a data set's schema, as the TrainSpec parses it."""
  # Inside: TensorFlow loads only for the benchmarks that parse here.
  from generic_trainer.data import input_pipeline  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import schema_file  # pylint: disable=g-import-not-at-top
  return input_pipeline.parser_config(
      schema_file.read(os.path.join(root, 'schema.pbtxt')))


def write(root: str, train_rows: int, eval_rows: int, seed: int = 0,
          shards: int = 4, table: str = 'narrow') -> Dict[str, str]:
  """Writes (or reuses) the data set; returns the paths of its parts."""
  paths = {'root': root, 'schema': os.path.join(root, 'schema.pbtxt'),
           'train': os.path.join(root, 'Split-train'),
           'eval': os.path.join(root, 'Split-eval')}
  stamp = os.path.join(root, 'stamp.json')
  keys = feature_keys(table)
  wanted = {'train_rows': train_rows, 'eval_rows': eval_rows, 'seed': seed,
            'shards': shards, 'features': sum(map(len, keys.values()))}
  if table != 'narrow':
    wanted['table'] = table
  if os.path.exists(stamp):
    with open(stamp) as f:
      if json.load(f) == wanted:
        return paths
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  weights = {kind: rng.normal(size=(len(names), VOCABULARY if kind != 'float'
                                    else 1))
             for kind, names in keys.items()}
  for split, rows in (('train', train_rows), ('eval', eval_rows)):
    os.makedirs(paths[split], exist_ok=True)
    for name in os.listdir(paths[split]):
      os.remove(os.path.join(paths[split], name))
    _write_split(paths[split], rows, max(1, min(shards, rows)), rng, weights,
                 keys)
  _write_schema(paths['schema'], keys)
  with open(stamp, 'w') as f:
    json.dump(wanted, f)
  return paths


def _write_split(split_dir, rows, shards, rng, weights, keys):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  bounds = [rows * i // shards for i in range(shards + 1)]
  for shard in range(shards):
    path = os.path.join(split_dir,
                        f'data_tfrecord-{shard:05d}-of-{shards:05d}.gz')
    with tf.io.TFRecordWriter(path, options='GZIP') as writer:
      for start in range(bounds[shard], bounds[shard + 1], _CHUNK):
        count = min(_CHUNK, bounds[shard + 1] - start)
        for record in _examples(count, rng, weights, keys):
          writer.write(record)


def _examples(count, rng, weights, keys):
  """`count` serialized tf.Examples, encoded in C++ by tfx_bsl."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  from tfx_bsl.coders import example_coder  # pylint: disable=g-import-not-at-top
  x = rng.normal(size=(count, len(keys['float']))).astype(np.float32)
  score = x @ weights['float'][:, 0] + 0.5 * np.sin(3 * x[:, 0])
  values = [x[:, i] for i in range(x.shape[1])]
  for kind in ('int', 'string'):
    if keys[kind]:
      codes = rng.integers(0, VOCABULARY, size=(count, len(keys[kind])))
      score += np.take_along_axis(weights[kind].T, codes, 0).sum(1) / 4
      for i, name in enumerate(keys[kind]):
        column = codes[:, i].astype(np.int64)
        values.append(column if kind == 'int' else np.char.add(
            f'{name}_', column.astype(str)).astype(np.bytes_))
  score += rng.normal(scale=0.3, size=count)
  values.append((score > 0).astype(np.int64))
  offsets = pa.array(np.arange(count + 1, dtype=np.int32))
  columns = [pa.ListArray.from_arrays(offsets, pa.array(v)) for v in values]
  names = keys['float'] + keys['int'] + keys['string'] + [LABEL_KEY]
  batch = pa.RecordBatch.from_arrays(columns, names)
  return example_coder.RecordBatchToExamples(batch)


def _write_schema(path, keys):
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  schema = schema_pb2.Schema()
  types = {'float': schema_pb2.FLOAT, 'int': schema_pb2.INT,
           'string': schema_pb2.BYTES}
  for kind, names in list(keys.items()) + [('int', [LABEL_KEY])]:
    for name in names:
      feature = schema.feature.add(name=name, type=types[kind])
      feature.shape.dim.add(size=1)
      feature.presence.min_fraction = 1.0
  with open(path, 'w') as f:
    f.write(text_format.MessageToString(schema))
