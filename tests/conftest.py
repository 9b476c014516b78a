"""Shared fixtures: real Examples and Schema artifacts of the penguin data."""

import csv
import glob
import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(REPO, 'tests', 'testdata')
PENGUIN_MODULE = os.path.join(REPO, 'module_files', 'penguin_keras.py')
if REPO not in sys.path:
  sys.path.insert(0, REPO)

_INT_COLUMNS = ('species', 'flipper_length_mm', 'body_mass_g')
NEEDS_ROOT_LIST = os.path.join(REPO, 'tests', 'needs-root.txt')


def needs_root():
  """{test file or `file::test`: why it needs root}, as
  tests/needs-root.txt lists them."""
  found = {}
  with open(NEEDS_ROOT_LIST, encoding='utf-8') as f:
    for line in f:
      line = line.strip()
      if line and not line.startswith('#'):
        test, _, why = line.partition(': ')
        found[test.strip()] = why.strip()
  return found


def why_root(nodeid: str, listed) -> str:
  """Why the test `nodeid` needs root (`listed`: `needs_root()`), or ''."""
  for test, why in listed.items():
    if nodeid == test or nodeid.startswith((test + '::', test + '[')):
      return why
  return ''


def pytest_configure(config):
  config.addinivalue_line(
      'markers', 'needs_root: runs as root, for the reason '
      'tests/needs-root.txt gives (scripts/suite.sh runs the rest as an '
      'ordinary user); skipped, saying why, when not root')


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  """Marks the tests tests/needs-root.txt lists `needs_root` (before `-m`
  selects), and skips them with its reason when not run as root."""
  del config
  listed = needs_root()
  for item in items:
    why = why_root(item.nodeid, listed)
    if why:
      item.add_marker(pytest.mark.needs_root)
      if os.geteuid() != 0:
        item.add_marker(pytest.mark.skip(reason=f'needs root: {why}'))


def command_env():
  """The environment of a command a test starts: this checkout importable,
  no TF_CONFIG, and no TF_USE_LEGACY_KERAS, which TensorFlow Transform's
  import sets in the test process when another test imported it first (a
  user's shell has none: the command then trains on Keras 3)."""
  env = dict(os.environ, PYTHONPATH=REPO)
  env.pop('TF_CONFIG', None)
  env.pop('TF_USE_LEGACY_KERAS', None)
  return env


def checkpoint_point(resume_dirs: str):
  """Where the last resume checkpoint in the folders that match
  `resume_dirs` was written (`latest.json`: epoch, batch, step), or None
  (none yet)."""
  for path in glob.glob(os.path.join(resume_dirs, 'latest.json')):
    with open(path) as f:  # Replaced atomically: never half-written.
      return json.load(f)
  return None


def checkpointed_epoch(resume_dirs: str):
  """The epochs finished at the last resume checkpoint, or None."""
  point = checkpoint_point(resume_dirs)
  return point['epoch'] if point else None


def _write_split(rows, path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with tf.io.TFRecordWriter(path, options='GZIP') as writer:
    for row in rows:
      feature = {}
      for name, value in row.items():
        if name in _INT_COLUMNS:
          feature[name] = tf.train.Feature(
              int64_list=tf.train.Int64List(value=[int(float(value))]))
        else:
          feature[name] = tf.train.Feature(
              float_list=tf.train.FloatList(value=[float(value)]))
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=feature)).SerializeToString())


def _schema():
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  schema = schema_pb2.Schema()
  for name in ('species', 'bill_length_mm', 'bill_depth_mm',
               'flipper_length_mm', 'body_mass_g'):
    feature = schema.feature.add(name=name)
    feature.type = schema_pb2.INT if name in _INT_COLUMNS else schema_pb2.FLOAT
    feature.presence.min_fraction = 1.0
    feature.shape.dim.add(size=1)
  return schema


def write_penguin_artifacts(root: str):
  """(examples, schema): real TFX artifacts of the penguins under `root`.

  Written as ExampleGen and SchemaGen write them: gzip TFRecords of
  tf.Example under Split-train/Split-eval, and schema.pbtxt. Reused if
  already there.
  """
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from tfx.utils import io_utils  # pylint: disable=g-import-not-at-top
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = os.path.join(root, 'examples')
  examples.split_names = '["train", "eval"]'
  schema = standard_artifacts.Schema()
  schema.uri = os.path.join(root, 'schema')
  schema_file = os.path.join(schema.uri, 'schema.pbtxt')
  if not os.path.exists(schema_file):
    with open(write_penguin_csv(os.path.join(root, 'csv'))) as f:
      rows = list(csv.DictReader(f))
    _write_split(rows[0::3] + rows[1::3],
                 os.path.join(examples.uri, 'Split-train', 'data.gz'))
    _write_split(rows[2::3], os.path.join(examples.uri, 'Split-eval',
                                          'data.gz'))
    io_utils.write_pbtxt_file(schema_file, _schema())
  return examples, schema


@pytest.fixture(scope='session')
def penguin_artifacts(tmp_path_factory):
  """(examples, schema) real TFX artifacts of the penguins."""
  return write_penguin_artifacts(str(tmp_path_factory.mktemp('penguins')))


@pytest.fixture
def trainer_io(penguin_artifacts, tmp_path):
  """Builds the executor's (input_dict, output_dict, exec_properties)."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples, schema = penguin_artifacts

  def build(train_steps=3, eval_steps=1, **exec_properties):
    model = standard_artifacts.Model()
    model.uri = str(tmp_path / 'model')
    model_run = standard_artifacts.ModelRun()
    model_run.uri = str(tmp_path / 'model_run')
    properties = {
        'train_args': f'{{"num_steps": {train_steps}}}',
        'eval_args': f'{{"num_steps": {eval_steps}}}',
        'custom_config': 'null',
    }
    properties.update(exec_properties)
    return ({'examples': [examples], 'schema': [schema]},
            {'model': [model], 'model_run': [model_run]}, properties)
  return build


KUBEFLOW_IMAGE = 'registry.example.com/tfx-generic-trainer:0.2.0'


@pytest.fixture(scope='session')
def compiled_kubeflow(tmp_path_factory):
  """The Kubeflow penguin pipeline compiled by KubeflowV2DagRunner.

  Returns (PipelineJob dict, path of the PipelineSpec YAML package).
  """
  if sys.version_info >= (3, 12):
    pytest.importorskip('kfp', reason='TFX 1.21 declares its kfp extra for '
                        'Python 3.10 and 3.11 only')
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  path = tmp_path_factory.mktemp('kubeflow') / 'penguin_kubeflow.yaml'
  job = penguin_pipeline_kubeflow.compile_pipeline(
      str(path), KUBEFLOW_IMAGE, 'gs://bucket/root', 'gs://bucket/serving',
      train_steps=20, eval_steps=2)
  return job, str(path)


def penguin_statistics(root):
  """A real ExampleStatistics artifact under `root`, as StatisticsGen writes it."""
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  stats = standard_artifacts.ExampleStatistics()
  stats.uri = os.path.join(str(root), 'statistics')
  stats.split_names = '["train", "eval"]'
  for split, count in (('train', 228), ('eval', 114)):
    split_dir = os.path.join(stats.uri, f'Split-{split}')
    os.makedirs(split_dir)
    proto = statistics_pb2.DatasetFeatureStatisticsList()
    proto.datasets.add(num_examples=count)
    with open(os.path.join(split_dir, 'FeatureStats.pb'), 'wb') as f:
      f.write(proto.SerializeToString())
  return stats
@pytest.fixture(scope='session')
def penguin_csvs(tmp_path_factory):
  """(train.csv, eval.csv) of the penguins, with a 0/1 `is_gentoo` column."""
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp('penguin_csv')
  with open(write_penguin_csv(str(root / 'all'))) as f:
    rows = list(csv.DictReader(f))
  for row in rows:
    row['is_gentoo'] = str(int(row['species'] == '2'))
  paths = []
  for name, part in (('train', rows[0::3] + rows[1::3]), ('eval', rows[2::3])):
    path = root / f'{name}.csv'
    with open(path, 'w', newline='') as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(part)
    paths.append(str(path))
  return tuple(paths)


def penguin_text(penguin_csvs, rows=None) -> str:
  """The train CSV of `penguin_csvs` as text, its first five columns (the
  species and four numbers), the header and `rows` rows (all if None)."""
  with open(penguin_csvs[0]) as f:
    lines = [','.join(l.rstrip('\n').split(',')[:5]) for l in f]
  return '\n'.join(lines[:rows] if rows else lines) + '\n'


@pytest.fixture(autouse=True, scope='session')
def _own_user_cache(tmp_path_factory):
  """The user's cache folder (XDG_CACHE_HOME: the command's and the
  Estimator's kept parsed rows) is the test session's own, so that no test
  writes to or reads from the real one."""
  os.environ['XDG_CACHE_HOME'] = str(tmp_path_factory.mktemp('user-cache'))


def load_run_fn(exec_properties):
  """The entry point a plan loads for `exec_properties`: the one source
  checked, then loaded (`usercode.module_loader`), as `plan.resolve`
  does."""
  from generic_trainer.keys import SOURCE_KEYS  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import module_loader  # pylint: disable=g-import-not-at-top
  key = module_loader.check_one_source(
      **{k: exec_properties.get(k) for k in SOURCE_KEYS})
  return module_loader.load_entry_point(key, exec_properties[key])
