"""Calls an export as TF Serving's clients call it, before it is published.

For every signature of the export (but `transform_features`, TFMA's
preprocessing function, which reads the label by design), the check builds
the request a client sends with the `tensorflow-serving-api` protos, from
eval examples with the labels and weights removed (`data.not_served`):
  - a signature whose method name is `tensorflow/serving/classify` gets a
    ClassificationRequest (tf.Examples in `input.example_list`), resolved as
    the model server's classifier does: one string input, `classes` (strings,
    [batch, n]) and/or `scores` (float32, [batch, n]);
  - `tensorflow/serving/regress` gets a RegressionRequest: one string input,
    one output `outputs` (float32, [batch] or [batch, 1]);
  - any other gets a PredictRequest: the serialized examples when it takes
    one string input, otherwise each input by name from the examples'
    features, as TensorProtos; every output per example, named.
(`serving_apis` holds what each API checks.) Each request runs in this
process through the loaded signature, once for the batch and once for a
single example (a squeeze that drops the batch dimension shows there), and
the answers are checked for shape, dtype and finite values. A mistake raises `ServingCheckError` saying what is wrong,
what a client expected, what the export gave and what to do.

The requests that passed are written to
`assets.extra/tf_serving_warmup_requests` (PredictionLogs, at most 100), so
a model server warms the model up before its first client.

Measured on the penguin canned export (4 signatures, 4 examples): see
docs/guides/serving-checks.md.
"""

import os
import time
from typing import Any, Dict, List, Sequence
import json

from generic_trainer.export_checks import serving_apis
from generic_trainer.system import saved_models
from generic_trainer.data import tfrecords
from generic_trainer.errors import ServingCheckError
import tensorflow as tf
import numpy as np
from tensorflow_serving.apis import prediction_log_pb2

# Not called by serving clients: TFMA's preprocessing function, fed the raw
# examples with their label.
NOT_CLIENT_SIGNATURES = ('transform_features',)
WARMUP_FILE = os.path.join('assets.extra', 'tf_serving_warmup_requests')
MAX_WARMUP_REQUESTS = 100


class Requests:
  """What the requests are built from.

  Attributes:
    examples: Serialized tf.Examples without labels and weights, as a
      client sends them to a signature that parses tf.Example.
    features: {name: numpy array [batch, ...]} of those examples' features
      (and, with Transform, of their transformed features), for signatures
      that take features by name.
    not_served: {feature: why} of the labels and weights left out.
    transformed_only: Names only Transform's output has (not raw features).
  """

  def __init__(self, examples: List[bytes], features: Dict[str, Any],
               not_served: Dict[str, str],
               transformed_only: Sequence[str] = ()):
    self.examples = examples
    self.features = features
    self.not_served = dict(not_served)
    self.transformed_only = set(transformed_only)


def without(serialized: List[bytes], names) -> List[bytes]:
  """The tf.Examples with the features `names` removed."""
  out = []
  for record in serialized:
    example = tf.train.Example.FromString(record)
    for name in names:
      if name in example.features.feature:
        del example.features.feature[name]
    out.append(example.SerializeToString())
  return out


def features_of(serialized: List[bytes]) -> Dict[str, Any]:
  """{feature: numpy array [batch, width]} of the features every example
  has with the same width (what a client can send as a dense tensor)."""
  columns = {}
  for record in serialized:
    example = tf.train.Example.FromString(record)
    for name, feature in example.features.feature.items():
      kind = feature.WhichOneof('kind')
      columns.setdefault(name, []).append(
          (kind, list(getattr(feature, kind).value) if kind else []))
  dense = {}
  for name, rows in columns.items():
    widths = {len(v) for _, v in rows}
    if len(rows) != len(serialized) or len(widths) != 1 or not rows[0][1]:
      continue
    dtype = {'float_list': np.float32, 'int64_list': np.int64,
             'bytes_list': object}[rows[0][0]]
    dense[name] = np.array([v for _, v in rows], dtype=dtype)
  return dense


def check(serving_dir: str, loaded, requests: Requests,
          write_warmup: bool = True) -> Dict[str, Any]:
  """Serves `requests` to every client signature of the export in
  `serving_dir` (`loaded`, as tf.saved_model.load gave it); returns what
  was checked.

  Raises:
    ServingCheckError: a signature would fail its clients.
  """
  started = time.monotonic()
  saved_model = saved_models.parse(serving_dir)
  meta = next((m for m in saved_model.meta_graphs
               if 'serve' in m.meta_info_def.tags),
              saved_model.meta_graphs[0])
  functions = dict(loaded.signatures)
  checked, logs = {}, []
  for name in sorted(meta.signature_def):
    if name in NOT_CLIENT_SIGNATURES or name.startswith('__'):
      continue
    signature = meta.signature_def[name]
    api = serving_apis.api(name, signature)
    server = serving_apis.SERVERS[api]
    batches = [requests.examples, requests.examples[:1]]
    for examples in batches:
      request = server.request(name, signature, examples, requests)
      server.serve(name, signature, functions[name], request, len(examples),
                   requests)
      logs.append(server.log(request))
    checked[name] = {'api': serving_apis.API[api], 'requests': len(batches),
                     'inputs': sorted(signature.inputs),
                     'outputs': sorted(signature.outputs)}
  if not checked:
    raise ServingCheckError(
        f'The export in {serving_dir} has no signature a serving client can '
        f'call (it has {sorted(meta.signature_def)}). Expected at least '
        "'serving_default'. Received: "
        f'{sorted(meta.signature_def) or "no signature"}. Export the model '
        "with a 'serving_default' signature.")
  warmup = 0
  if write_warmup:
    warmup = write_warmup_requests(serving_dir, logs)
  return {'signatures': checked,
          'not_served': sorted(requests.not_served),
          'examples_per_request': len(requests.examples),
          'warmup_requests': warmup,
          'seconds': round(time.monotonic() - started, 3)}


def write_warmup_requests(serving_dir: str, logs) -> int:
  """Writes up to MAX_WARMUP_REQUESTS PredictionLogs; returns how many."""
  path = os.path.join(serving_dir, WARMUP_FILE)
  tf.io.gfile.makedirs(os.path.dirname(path))
  logs = logs[:MAX_WARMUP_REQUESTS]
  with tfrecords.writer(path) as writer:
    for log in logs:
      writer.write(log.SerializeToString())
  return len(logs)


def read_warmup_requests(serving_dir: str) -> List[Any]:
  """The PredictionLogs of the export's warmup file."""
  path = os.path.join(serving_dir, WARMUP_FILE)
  return [prediction_log_pb2.PredictionLog.FromString(r)
          for r in tfrecords.records(path)]


def custom_properties(report: Dict[str, Any]) -> Dict[str, Any]:
  """What the check recorded, as ML Metadata custom properties."""
  serving = report.get('serving') or {}
  signatures = serving.get('signatures', {})
  return {
      'serving_check': json.dumps(
          {name: s['api'] for name, s in sorted(signatures.items())},
          sort_keys=True),
      'serving_requests_checked': sum(s['requests']
                                      for s in signatures.values()),
      'serving_not_served': ','.join(serving.get('not_served', [])),
      'serving_warmup_requests': int(serving.get('warmup_requests', 0)),
      'export_examples_checked': int(report.get('examples_checked', 0)),
  }


def attach(artifacts, report: Dict[str, Any]) -> None:
  """Sets `custom_properties(report)` on each artifact (the Model)."""
  for name, value in custom_properties(report).items():
    for artifact in artifacts:
      if isinstance(value, int):
        artifact.set_int_custom_property(name, value)
      else:
        artifact.set_string_custom_property(name, value)
