"""Loading the user's run_fn: each mistake gets its own message."""

import os

import pytest

from conftest import TESTDATA, load_run_fn
from message_parts import assert_four_parts
from generic_trainer.usercode import module_loader
from generic_trainer.errors import InvalidArgumentError, UserModuleError


def _file(name):
  return {'module_file': os.path.join(TESTDATA, name + '.py')}


def test_module_file_returns_run_fn():
  """A module file's top-level run_fn is returned."""
  fn = load_run_fn(_file('exports_nothing'))
  assert fn.__name__ == 'run_fn'


def test_missing_module_file():
  """A module file that does not exist says so and names the path."""
  with pytest.raises(UserModuleError, match=r"The module file does not exist"
                     r".*module_file='/no/such/module.py'"):
    load_run_fn({'module_file': '/no/such/module.py'})


def test_syntax_error_names_the_line(tmp_path):
  """A syntax error names the file and the line."""
  path = tmp_path / 'broken.py'
  path.write_text('def run_fn(fn_args):\n  return (\n')
  with pytest.raises(UserModuleError, match=r'has a syntax error at line 2'):
    load_run_fn({'module_file': str(path)})


def test_import_error_inside_module_keeps_traceback():
  """An import error inside the module names the missing package."""
  with pytest.raises(UserModuleError, match=(
      r"raised ModuleNotFoundError: No module named "
      r"'no_such_package_for_generic_trainer'")) as info:
    load_run_fn(_file('import_error'))
  assert 'import_error.py' in str(info.value)


def test_no_run_fn_lists_what_module_defines():
  """A module without run_fn lists its public names."""
  with pytest.raises(UserModuleError, match=(
      r'has no top-level `run_fn` and no TrainSpec. It defines: trainer_fn')):
    load_run_fn(_file('trainer_fn_only'))


def test_trainer_fn_module_explains_migration():
  """A tf.estimator trainer_fn module is told how to move to a TrainSpec or
  a run_fn."""
  with pytest.raises(UserModuleError, match=(
      r'defines `trainer_fn`, the tf.estimator API that TF 2.16 and TFX '
      r'removed. Replace it with a TrainSpec: a canned one '
      r'\(generic_trainer.canned: LinearClassifierSpec, DNNClassifierSpec, '
      r'DNNLinearCombinedClassifierSpec and their Regressor twins\) or your '
      r'own with a head \(generic_trainer.heads\). Or add a '
      r'`run_fn\(fn_args\)`')):
    load_run_fn(_file('trainer_fn_only'))


_TAXI_ADVICE = (  # (?s): every `.` matches newlines too.
    r'(?s)cannot run: This module uses tf.estimator \(line 45: '
    r'`tf.estimator.DNNLinearCombinedClassifier`; line 56: '
    r'`tf.estimator.RunConfig`\), which TF 2.16 and TFX removed; it cannot be '
    r'imported, so it was read, not run. It builds a '
    r'tf.estimator.DNNLinearCombinedClassifier \(line 45\): the canned spec '
    r'DNNLinearCombinedClassifierSpec replaces it \(the same kind of model, '
    r'Keras preprocessing layers in place of the feature columns\). Keep '
    r'`preprocessing_fn` for Transform and replace `trainer_fn` and the '
    r'Estimator code with these lines, read from the module:\n\n'
    r'from generic_trainer.canned import Categorical, '
    r'DNNLinearCombinedClassifierSpec, Numeric\n\n'
    r'class Spec\(DNNLinearCombinedClassifierSpec\):\n'
    r".*  dnn_feature_keys = \['trip_miles_xf', 'fare_xf', "
    r"'trip_seconds_xf'\].*'trip_start_hour_xf': Categorical\(num_buckets=24\)"
    r'.*  dnn_hidden_units = \[100, 70, 50, 25\]')


@pytest.mark.parametrize('check', ['construction', 'load'])
def test_estimator_module_is_told_which_canned_spec_replaces_it(check):
  """The refusal of a trainer_fn module names the canned spec for the
  Estimator its source builds, with the lines to write: when the
  component is built (read without running it) and when it is loaded."""
  path = _file('taxi_estimator_module')['module_file']
  with pytest.raises(UserModuleError, match=_TAXI_ADVICE):
    if check == 'construction':
      module_loader.check_module_source(path)
    else:
      load_run_fn({'module_file': path})


@pytest.mark.parametrize('estimator, spec', [
    ('DNNClassifier', 'DNNClassifierSpec'),
    ('LinearRegressor', 'LinearRegressorSpec'),
    ('DNNLinearCombinedRegressor', 'DNNLinearCombinedRegressorSpec'),
    ('DNNEstimator', 'DNNSpec'),
])
def test_each_canned_estimator_has_its_spec(tmp_path, estimator, spec):
  """Each canned Estimator maps to its canned spec."""
  path = tmp_path / 'm.py'
  path.write_text(f'def trainer_fn(a, s):\n  return tf.estimator.{estimator}('
                  ')\n')
  with pytest.raises(UserModuleError, match=(
      rf'(?s)It builds a tf.estimator.{estimator} \(line 2\): the canned '
      rf'spec {spec} '
      rf'replaces it.*class Spec\({spec}\)')):
    module_loader.check_module_source(str(path))


def test_wrong_signature():
  """A run_fn that cannot take one argument is refused before training."""
  with pytest.raises(UserModuleError, match=(
      r'must accept exactly one argument, fn_args. Received: '
      r'run_fn\(fn_args, schema\)')):
    load_run_fn(_file('wrong_signature'))


def test_run_fn_not_callable(tmp_path):
  """A run_fn that is not a function is refused."""
  path = tmp_path / 'not_callable.py'
  path.write_text('run_fn = 3\n')
  with pytest.raises(UserModuleError, match=(
      r'must be a function taking fn_args. Received: run_fn that is a int')):
    load_run_fn({'module_file': str(path)})


def test_unknown_module_path():
  """A module_path that cannot be found says how to make it importable."""
  with pytest.raises(UserModuleError, match=(
      r"Cannot find the module 'no_such_module_xyz'.*install it")):
    load_run_fn({'module_path': 'no_such_module_xyz'})


def test_run_fn_path_without_module():
  """run_fn must be a dotted path."""
  with pytest.raises(InvalidArgumentError, match=r"must be a dotted path"):
    load_run_fn({'run_fn': 'run_fn'})


@pytest.mark.parametrize('properties', [
    {}, {'module_file': 'a.py', 'run_fn': 'a.run_fn'}])
def test_exactly_one_source(properties):
  """Zero or two sources are refused, naming what was given."""
  with pytest.raises(InvalidArgumentError, match=r'Exactly one of'):
    load_run_fn(properties)


def test_check_module_source_finds_missing_run_fn_statically(tmp_path):
  """The construction-time check finds a missing run_fn without importing."""
  path = tmp_path / 'helpers_only.py'
  path.write_text('import os\n\ndef build_model():\n  pass\n')
  with pytest.raises(UserModuleError, match=(
      r'has no top-level `run_fn` and no TrainSpec. It defines: build_model, '
      r'os')):
    module_loader.check_module_source(str(path))


def test_check_module_source_accepts_imported_run_fn(tmp_path):
  """A run_fn imported from elsewhere counts as defined."""
  path = tmp_path / 'reexport.py'
  path.write_text('from my_pkg.trainer import run_fn\n')
  module_loader.check_module_source(str(path))


def test_a_module_imports_the_modules_beside_it(tmp_path):
  """A module file imports a helper module of its folder (as TFX's
  packaged module does); afterwards neither the folder stays on sys.path
  nor the helper in sys.modules."""
  import sys  # pylint: disable=g-import-not-at-top
  (tmp_path / 'penguin_helper.py').write_text('EPOCHS = 3\n')
  (tmp_path / 'trainer.py').write_text(
      'import penguin_helper\n\n\ndef run_fn(fn_args):\n'
      '  return penguin_helper.EPOCHS\n')
  fn = load_run_fn({'module_file': str(tmp_path / 'trainer.py')})
  assert fn(None) == 3
  assert str(tmp_path) not in sys.path
  assert 'penguin_helper' not in sys.modules


def test_a_sibling_module_that_is_not_there_is_named_with_the_folder(
    tmp_path):
  """A module importing a module neither installed nor beside it: the
  name, the folder searched, and where to put it."""
  (tmp_path / 'trainer.py').write_text(
      'import penguin_helpers\n\n\ndef run_fn(fn_args):\n  pass\n')
  with pytest.raises(UserModuleError, match=(
      r"raised ModuleNotFoundError: No module named 'penguin_helpers': "
      r"'penguin_helpers' is neither installed nor a .py file \(or package\) "
      rf"in the module's folder, {tmp_path}\..*Install the package that "
      r"provides 'penguin_helpers', or, for a helper module of yours, put "
      rf'penguin_helpers.py in {tmp_path}\.')) as e:
    load_run_fn({'module_file': str(tmp_path / 'trainer.py')})
  assert 'trainer.py", line 1, in <module>' in str(e.value)
  assert_four_parts(str(e.value))


def test_a_module_file_that_is_a_folder_is_told_so(tmp_path):
  """A module file that is a folder is called a folder (not 'does not
  exist'), with the .py files in it."""
  (tmp_path / 'trainer').mkdir()
  (tmp_path / 'trainer' / 'model.py').write_text('def run_fn(fn_args):\n'
                                                 '  pass\n')
  folder = str(tmp_path / 'trainer')
  for check in (lambda: load_run_fn({'module_file': folder}),
                lambda: module_loader.check_module_source(folder)):
    with pytest.raises(UserModuleError, match=(
        rf"The module file '{folder}' is a folder, not a Python file. "
        r'Expected the path of a .py file. Received: a folder holding 1 .py '
        rf"file\(s\): model.py. Pass the .py file .*module_file="
        rf"'{folder}/model.py'")) as e:
      check()
    assert_four_parts(str(e.value))


def test_a_module_that_puts_its_folder_on_sys_path_keeps_it(tmp_path):
  """A module that puts its own folder on sys.path (as module_files/
  penguin_spec_jax.py does) keeps it there, and its helper in sys.modules."""
  import sys  # pylint: disable=g-import-not-at-top
  (tmp_path / 'penguin_helper_kept.py').write_text('EPOCHS = 4\n')
  (tmp_path / 'trainer.py').write_text(
      'import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\n'
      'import penguin_helper_kept\n\n\ndef run_fn(fn_args):\n'
      '  return penguin_helper_kept.EPOCHS\n')
  try:
    fn = load_run_fn({'module_file': str(tmp_path / 'trainer.py')})
    assert fn(None) == 4
    assert str(tmp_path) in sys.path
    assert 'penguin_helper_kept' in sys.modules
  finally:
    sys.path.remove(str(tmp_path))
    sys.modules.pop('penguin_helper_kept', None)
