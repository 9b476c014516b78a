"""Every canned spec and head export serves its clients without a label:
each passes the serving check on requests with no label and no weight, and
its warmup file holds those requests. Each trains a few steps with the
Estimator (slow: about 2 s each)."""

import csv

import pytest

from generic_trainer import Estimator, heads
from generic_trainer.canned import (DNNClassifierSpec,  # pylint: disable=g-multiple-import
                                    DNNLinearCombinedClassifierSpec,
                                    DNNLinearCombinedRegressorSpec,
                                    DNNRegressorSpec, DNNSpec,
                                    LinearClassifierSpec, LinearRegressorSpec)
from generic_trainer.export_checks import serving_check
from generic_trainer.data import not_served
from test_heads import SPECIES, named_penguin_csvs  # pylint: disable=unused-import

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def weighted_csvs(named_penguin_csvs, tmp_path_factory):  # pylint: disable=redefined-outer-name
  """The named penguins with a weight column `w`."""
  root = tmp_path_factory.mktemp('weighted')
  paths = []
  for source in named_penguin_csvs:
    with open(source) as f:
      rows = list(csv.DictReader(f))
    path = root / source.rsplit('/', 1)[-1]
    with open(path, 'w', newline='') as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]) + ['w'])
      writer.writeheader()
      writer.writerows(dict(r, w=1.0 + (i % 2)) for i, r in enumerate(rows))
    paths.append(str(path))
  return tuple(paths)


def _spec(base, **members):
  members.setdefault('checkpoint', None)
  members.setdefault('batch_size', 32)
  return type(base.__name__.replace('Spec', ''), (base,), members)


_CLASSIFY = dict(label_key='species', weight_key='w')
_REGRESS = dict(label_key='body_mass_g', weight_key='w')
SPECS = {
    'linear-classifier': _spec(LinearClassifierSpec, **_CLASSIFY),
    'linear-regressor': _spec(LinearRegressorSpec, **_REGRESS),
    'dnn-classifier': _spec(DNNClassifierSpec, hidden_units=[8], **_CLASSIFY),
    'dnn-regressor': _spec(DNNRegressorSpec, hidden_units=[8], **_REGRESS),
    'wide-deep-classifier': _spec(DNNLinearCombinedClassifierSpec,
                                  dnn_hidden_units=[8], **_CLASSIFY),
    'wide-deep-regressor': _spec(DNNLinearCombinedRegressorSpec,
                                 dnn_hidden_units=[8], **_REGRESS),
    'binary-head': _spec(DNNSpec, label_key='sex', hidden_units=[8],
                         head=heads.BinaryClassHead(
                             label_vocabulary=['female', 'male'],
                             weight_key='w')),
    'two-heads': _spec(DNNSpec, label_key=['species', 'body_mass_g'],
                       hidden_units=[8], head={
                           'species': heads.MultiClassHead(
                               label_vocabulary=SPECIES),
                           'body_mass_g': heads.RegressionHead()}),
}


@pytest.mark.parametrize('name', sorted(SPECS))
def test_canned_and_head_exports_serve_without_labels(tmp_path, weighted_csvs,
                                                      name):
  """The export leaves labels and weights out of every signature, declares
  them, passes the serving check on label-less requests of each API, and
  its warmup file parses with the serving protos."""
  spec = SPECS[name]
  train_csv, eval_csv = weighted_csvs
  est = Estimator(spec, str(tmp_path))
  est.train(train_csv, eval_data=eval_csv, steps=5)
  export = est.export()  # Validates: the serving check included.
  labels = spec.label_key if isinstance(spec.label_key, list) else [
      spec.label_key]
  declared = not_served.declared(export)
  assert set(labels) <= set(declared)
  logs = serving_check.read_warmup_requests(export)
  signatures = {}
  for log in logs:
    kind = log.WhichOneof('log_type')
    request = getattr(log, kind).request
    signatures[request.model_spec.signature_name] = kind
    examples = (list(request.input.example_list.examples)
                if kind != 'predict_log' else [])
    for example in examples:
      assert not set(declared) & set(example.features.feature)
  assert signatures['serving_default'] == 'predict_log'
  assert signatures['predict'] == 'predict_log'
  if 'classifier' in name or name == 'binary-head':
    assert signatures['classification'] == 'classify_log'
  if 'regressor' in name or name == 'binary-head':
    assert signatures['regression'] == 'regress_log'
  if name == 'two-heads':
    assert signatures['species/classification'] == 'classify_log'
    assert signatures['body_mass_g/regression'] == 'regress_log'
