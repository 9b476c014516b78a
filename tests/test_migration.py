"""Migrating a tf.estimator module: the refusal carries the module's own
settings, read from its source without importing it, and is given before
TensorFlow is imported. The inputs are TFX's own Estimator-era modules
(tests/testdata/taxi_utils_estimator.py, iris_utils_model_to_estimator.py,
run_fn_train_and_evaluate.py)."""

import ast
import os
import subprocess
import sys

import pytest

from conftest import REPO, TESTDATA, command_env, load_run_fn
from generic_trainer.migration import advice as migration
from generic_trainer.migration import estimator_uses
from generic_trainer.migration import module_source
from generic_trainer.usercode import module_loader
from generic_trainer.errors import UserModuleError


def _path(name):
  return os.path.join(TESTDATA, name + '.py')


def _advice(name):
  with open(_path(name)) as f:
    source = f.read()
  return migration.advice(source, estimator_uses.estimator_uses(source))


def _lines(message):
  """The code the message gives (between 'read from the module:' and
  'See docs/')."""
  return message.split('read from the module:\n\n', 1)[1].split(
      '\n\nSee docs/', 1)[0]


def test_taxi_module_gets_its_columns_label_units_and_batch_size():
  """TFX's taxi trainer_fn module: every column with its buckets, the
  parts' features, the label and raw label, the hidden units computed by
  trainer_fn and the batch size, in place of placeholders."""
  with pytest.raises(UserModuleError) as info:
    module_loader.check_module_source(_path('taxi_utils_estimator'))
  message = str(info.value)
  assert message.startswith(
      "The user module (module_file='" + _path('taxi_utils_estimator') +
      "') cannot run: This module uses tf.estimator (line 35: `from "
      'tensorflow import estimator as tf_estimator`; line 199: '
      '`tf_estimator.DNNLinearCombinedClassifier`;')
  assert ('It builds a tf.estimator.DNNLinearCombinedClassifier (line 199): '
          'the canned spec DNNLinearCombinedClassifierSpec replaces it') in (
              message)
  code = _lines(message)
  for line in [
      'from generic_trainer.canned import Categorical, '
      'DNNLinearCombinedClassifierSpec, Numeric',
      "  label_key = 'tips_xf'  # label_key= at line 293",
      "  raw_label_key = 'tips'  # the raw label: no serving request carries "
      'it',
      '  n_classes = 2',
      "  dnn_feature_keys = ['trip_miles_xf', 'fare_xf', 'trip_seconds_xf']",
      "      'payment_type_xf': Categorical(num_buckets=1010),",
      "      'trip_start_hour_xf': Categorical(num_buckets=24),",
      "      'trip_start_month_xf': Categorical(num_buckets=12),",
      "      'fare_xf': Numeric(normalize=False),",
      '  dnn_hidden_units = [100, 70, 48, 34]',
      '  batch_size = 40  # train_batch_size, line 318',
  ]:
    assert line in code, line
  assert "      'trip_start_month_xf',\n  ]" in code
  assert '[...]' not in code


def test_the_migrated_taxi_module_is_the_message_pasted():
  """tests/testdata/taxi_utils_migrated.py holds the message's lines as
  they are: a newcomer following it gets that module."""
  with open(_path('taxi_utils_migrated')) as f:
    migrated = f.read()
  assert migrated.split('# The lines of the message.\n', 1)[1].rstrip() == (
      _lines(_advice('taxi_utils_estimator')).rstrip())


def test_run_fn_calling_train_and_evaluate_is_refused_before_tensorflow():
  """A run_fn module importing tf.estimator gets the migration error, not
  an ImportError, and TensorFlow is not imported to say so."""
  script = (
      'import sys\n'
      'from generic_trainer.usercode import module_loader\n'
      'try:\n'
      f'  module_loader.load_entry_point("module_file", {_path("run_fn_train_and_evaluate")!r})\n'
      'except ImportError as e:\n'
      '  print(type(e).__name__, e)\n'
      'print("tensorflow imported:", "tensorflow" in sys.modules)\n')
  out = subprocess.run([sys.executable, '-c', script], cwd=REPO,
                       env=command_env(), capture_output=True, text=True,
                       timeout=120, check=True).stdout
  assert out.startswith('UserModuleError The user module (module_file=')
  assert 'tensorflow imported: False' in out
  assert ("It builds a tf.estimator.DNNClassifier (line 32): the canned spec "
          'DNNClassifierSpec replaces it') in out
  assert ('Keep `preprocessing_fn` for Transform and replace `run_fn` and '
          'the Estimator code') in out
  for line in ["  label_key = 'tips_xf'", "  raw_label_key = 'tips'",
               "      'company_xf': Categorical(num_buckets=101, "
               'embedding_dim=8),',
               '  hidden_units = [64, 32]', '  dropout = 0.1',
               '  batch_size = 128', "  optimizer_name = 'adagrad'",
               '  learning_rate = 0.1']:
    assert line in out, line


def test_model_to_estimator_module_gets_build_model_lines():
  """A module wrapping a Keras model with model_to_estimator gets a
  TrainSpec whose build_model calls its model function, with the
  optimizer and loss of the model's compile()."""
  with pytest.raises(UserModuleError) as info:
    load_run_fn(
        {'module_file': _path('iris_utils_model_to_estimator')})
  message = str(info.value)
  assert ('It wraps a Keras model with model_to_estimator (line 106): train '
          'the Keras model itself with a TrainSpec') in message
  assert _lines(message) == (
      'import keras\nfrom generic_trainer import TrainSpec\n\n'
      'class Spec(TrainSpec):\n'
      "  label_key = 'variety'  # popped from the features at line 44\n"
      '  batch_size = 20  # _TRAIN_BATCH_SIZE, line 31\n\n'
      '  def build_model(self):\n'
      '    return _keras_model_builder()  # the Keras model '
      'model_to_estimator wrapped (line 65); its inputs named after the '
      'features\n\n'
      '  def build_optimizer(self):\n'
      '    return keras.optimizers.Adam(learning_rate=0.001)  # its '
      'compile(), line 77\n\n'
      '  def build_loss(self):\n'
      "    return keras.losses.get('sparse_categorical_crossentropy')  # its "
      'compile(), line 77')


_COLUMNS_MODULE = '''
import tensorflow as tf

_LABEL_KEY = 'clicked'
_BOUNDARIES = [18, 25, 30, 40, 50, 65]


def _columns():
  age = tf.feature_column.numeric_column('age')
  buckets = tf.feature_column.bucketized_column(age, boundaries=_BOUNDARIES)
  country = tf.feature_column.categorical_column_with_vocabulary_list(
      'country', ['fr', 'de', 'us'], num_oov_buckets=3)
  url = tf.feature_column.categorical_column_with_hash_bucket('url', 5000)
  cross = tf.feature_column.crossed_column([buckets, country], 200)
  return [buckets, country, url, cross]


def trainer_fn(trainer_fn_args, schema):
  return {'estimator': tf.estimator.LinearClassifier(
      feature_columns=_columns(), weight_column='w', n_classes=3,
      optimizer='Ftrl')}
'''


def test_vocabularies_boundaries_hash_buckets_and_crosses_are_written(
    tmp_path):
  """Each kind of feature column becomes its canned column; crosses become
  Crossed; the weight column, classes and optimizer are carried."""
  path = tmp_path / 'clicks.py'
  path.write_text(_COLUMNS_MODULE)
  with pytest.raises(UserModuleError) as info:
    module_loader.check_module_source(str(path))
  code = _lines(str(info.value))
  for line in [
      'from generic_trainer.canned import Bucketized, Categorical, Crossed, '
      'LinearClassifierSpec',
      "  label_key = 'clicked'  # _LABEL_KEY, line 4",
      "  weight_key = 'w'  # weight_column", '  n_classes = 3',
      "  feature_keys = ['age', 'country', 'url']",
      "      'age': Bucketized(boundaries=[18, 25, 30, 40, 50, 65]),",
      "      'country': Categorical(vocabulary=['fr', 'de', 'us'], "
      'num_oov=3),',
      "      'url': Categorical(top_k=5000),",
      "  crosses = [Crossed(('age', 'country'), num_bins=200)]",
      "  optimizer_name = 'ftrl'  # optimizer",
  ]:
    assert line in code, line


def test_a_value_computed_at_run_time_names_the_line_to_copy(tmp_path):
  """Hidden units read from fn_args cannot be known from the source: the
  message names the line that computes them."""
  path = tmp_path / 'm.py'
  path.write_text(
      'import tensorflow as tf\n\n\ndef trainer_fn(args, schema):\n'
      '  units = args.custom_config["units"]\n'
      '  return {"estimator": tf.estimator.DNNRegressor(\n'
      '      feature_columns=[tf.feature_column.numeric_column("x")],\n'
      '      hidden_units=units)}\n')
  with pytest.raises(UserModuleError, match=(
      r'  hidden_units = \.\.\.  # line 5 computes it '
      r'\(args.custom_config\["units"\]\): copy its value')):
    module_loader.check_module_source(str(path))


def test_an_importable_estimator_module_is_refused_before_import(
    tmp_path, monkeypatch):
  """module_path naming a module that imports tensorflow_estimator gets
  the migration error, not the ImportError of importing it."""
  (tmp_path / 'old_trainer.py').write_text(
      'import tensorflow_estimator as tfe\n\n\ndef run_fn(fn_args):\n'
      '  tfe.estimator.train_and_evaluate(None, None, None)\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  with pytest.raises(UserModuleError, match=(
      r"The user module \(module_path='old_trainer'\) cannot run: This "
      r'module uses tf.estimator \(line 1: `import tensorflow_estimator as '
      r'tfe`; line 5: `tfe.estimator.train_and_evaluate`\), which TF 2.16 '
      r'and TFX removed.*Replace it with a TrainSpec')):
    load_run_fn({'module_path': 'old_trainer'})


def test_a_module_without_tf_estimator_is_not_flagged():
  """The Keras taxi module of this project uses no tf.estimator."""
  with open(os.path.join(REPO, 'module_files', 'taxi_wide_deep.py')) as f:
    assert estimator_uses.estimator_uses(f.read()) == []


@pytest.mark.slow
def test_the_migrated_taxi_module_trains_serves_and_is_blessed(tmp_path):
  """The migrated taxi module trains through GenericTrainer with Transform,
  serves every signature from label-less tf.Examples (the serving check
  recorded on the Model in ML Metadata, its requests in the warmup file),
  and Evaluator blesses it."""
  from pipelines import taxi_pipeline_local  # pylint: disable=g-import-not-at-top
  from generic_trainer.export_checks import serving_check  # pylint: disable=g-import-not-at-top
  result = taxi_pipeline_local.run(
      str(tmp_path), _path('taxi_utils_migrated'), rows=2000,
      train_steps=200, eval_steps=5, auc_threshold=0.6)
  assert result['blessed'] and result['pushed_model'], result
  assert result['metrics']['auc'] >= 0.6, result['metrics']
  logs = serving_check.read_warmup_requests(result['pushed_model'])
  served = {getattr(l, l.WhichOneof('log_type')).request.model_spec
            .signature_name for l in logs}
  assert served == {'serving_default', 'predict', 'classification',
                    'regression'}
  for log in logs:
    if log.HasField('classify_log'):
      example = log.classify_log.request.input.example_list.examples[0]
      assert 'tips' not in example.features.feature
  from ml_metadata.metadata_store import metadata_store  # pylint: disable=g-import-not-at-top
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = result['metadata_path']
  (model,) = metadata_store.MetadataStore(config).get_artifacts_by_type(
      'Model')
  properties = model.custom_properties
  assert properties['serving_not_served'].string_value == 'tips,tips_xf'
  assert properties['serving_requests_checked'].int_value == 8
  assert '"classification": "Classify"' in (
      properties['serving_check'].string_value)


def test_the_migration_reader_never_crashes_on_a_module():
  """TFX's Estimator-era template (a run_fn calling train_and_evaluate,
  columns from another module) gets its advice; so does every function of
  it alone, each read without the rest: the reader says what it could
  read, it never raises."""
  from generic_trainer.migration import advice  # pylint: disable=g-import-not-at-top
  path = os.path.join(TESTDATA, 'tfx_template_estimator_model.py')
  source = open(path).read()
  text = advice.advice(source, [(6, 'from tensorflow import estimator')])
  assert 'DNNLinearCombinedClassifierSpec' in text
  assert 'dnn_hidden_units = [100, 70, 48, 34]' in text
  tree = ast.parse(source)
  for node in tree.body:  # Each part alone: names it cannot follow.
    advice.advice(ast.get_source_segment(source, node) or '')
  odd = ('from tensorflow import estimator as e\nimport m\n'
         'def f():\n  for a, b in m.pairs():\n    x = a\n'
         '  (c, d) = m.two()\n  while m.more():\n    pass\n'
         '  return e.DNNClassifier(hidden_units=[x, c], '
         'feature_columns=[y for y in 3])\n')
  assert 'DNNClassifierSpec' in advice.advice(odd)
