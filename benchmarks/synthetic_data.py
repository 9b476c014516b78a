"""A synthetic tabular data set, stored the way ExampleGen stores examples.

`write(root, train_rows, eval_rows)` writes gzip TFRecords of tf.Example to
`root/Split-train/` and `root/Split-eval/` (several shards each) and a
`schema.pbtxt` as SchemaGen writes it (one value per feature, dense). The
label depends on the features, so a model learns it. Written once per
(rows, seed): a second call with the same arguments reuses the files.
"""

import json
import os
from typing import Dict

NUM_FEATURES = 12
FEATURE_KEYS = [f'f{i:02d}' for i in range(NUM_FEATURES)]
LABEL_KEY = 'label'
_CHUNK = 65536


def write(root: str, train_rows: int, eval_rows: int, seed: int = 0,
          shards: int = 4) -> Dict[str, str]:
  """Writes (or reuses) the data set; returns the paths of its parts."""
  paths = {'root': root, 'schema': os.path.join(root, 'schema.pbtxt'),
           'train': os.path.join(root, 'Split-train'),
           'eval': os.path.join(root, 'Split-eval')}
  stamp = os.path.join(root, 'stamp.json')
  wanted = {'train_rows': train_rows, 'eval_rows': eval_rows, 'seed': seed,
            'shards': shards, 'features': NUM_FEATURES}
  if os.path.exists(stamp):
    with open(stamp) as f:
      if json.load(f) == wanted:
        return paths
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  weights = rng.normal(size=NUM_FEATURES)
  for split, rows in (('train', train_rows), ('eval', eval_rows)):
    os.makedirs(paths[split], exist_ok=True)
    for name in os.listdir(paths[split]):
      os.remove(os.path.join(paths[split], name))
    _write_split(paths[split], rows, max(1, min(shards, rows)), rng, weights)
  _write_schema(paths['schema'])
  with open(stamp, 'w') as f:
    json.dump(wanted, f)
  return paths


def _write_split(split_dir, rows, shards, rng, weights):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  bounds = [rows * i // shards for i in range(shards + 1)]
  for shard in range(shards):
    path = os.path.join(split_dir,
                        f'data_tfrecord-{shard:05d}-of-{shards:05d}.gz')
    with tf.io.TFRecordWriter(path, options='GZIP') as writer:
      for start in range(bounds[shard], bounds[shard + 1], _CHUNK):
        count = min(_CHUNK, bounds[shard + 1] - start)
        for record in _examples(count, rng, weights):
          writer.write(record)


def _examples(count, rng, weights):
  """`count` serialized tf.Examples, encoded in C++ by tfx_bsl."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  from tfx_bsl.coders import example_coder  # pylint: disable=g-import-not-at-top
  x = rng.normal(size=(count, NUM_FEATURES)).astype(np.float32)
  score = x @ weights + 0.5 * np.sin(3 * x[:, 0]) + rng.normal(
      scale=0.3, size=count)
  label = (score > 0).astype(np.int64)
  offsets = pa.array(np.arange(count + 1, dtype=np.int32))
  columns = [pa.ListArray.from_arrays(offsets, pa.array(x[:, i]))
             for i in range(NUM_FEATURES)]
  columns.append(pa.ListArray.from_arrays(offsets, pa.array(label)))
  batch = pa.RecordBatch.from_arrays(columns, FEATURE_KEYS + [LABEL_KEY])
  return example_coder.RecordBatchToExamples(batch)


def _write_schema(path):
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  schema = schema_pb2.Schema()
  for name in FEATURE_KEYS + [LABEL_KEY]:
    feature = schema.feature.add(
        name=name,
        type=schema_pb2.INT if name == LABEL_KEY else schema_pb2.FLOAT)
    feature.shape.dim.add(size=1)
    feature.presence.min_fraction = 1.0
  with open(path, 'w') as f:
    f.write(text_format.MessageToString(schema))
