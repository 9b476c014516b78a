"""Each decision is made in one place: read from the code with `ast`, and
shown by behaviour where it can be."""

import ast
import os

import pytest

from conftest import TESTDATA
from test_layout import MODULES


def _constants(value):
  """{module: count} of the string constant `value` in the package's code
  (docstrings and longer strings that contain it do not count)."""
  found = {}
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    count = sum(1 for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and node.value == value)
    if count:
      found[module] = count
  return found


def _calls(attribute, on=None):
  """Modules that call `<on>.<attribute>(...)` (`on` None: any object)."""
  found = set()
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
           n.func.attr == attribute and
           (on is None or getattr(n.func.value, 'id', None) == on)
           for n in ast.walk(tree)):
      found.add(module)
  return found


def test_compression_is_told_from_the_file_name_in_one_place():
  """Only data.tfrecords knows that '.gz' means GZIP."""
  assert set(_constants('.gz')) == {'generic_trainer.data.tfrecords'}
  assert set(_constants('GZIP')) == {'generic_trainer.data.tfrecords'}


@pytest.mark.parametrize('key', ['module_file', 'module_path', 'run_fn'])
def test_source_keys_are_defined_once(key):
  """The three ways to name user code are constants of `keys`."""
  assert _constants(key) == {'generic_trainer.keys': 1}


def test_one_reader_of_a_module_files_top_level_names():
  """One AST walker reads what a module file defines (module_loader)."""
  assert _calls('parse', on='ast') == {'generic_trainer.core.module_loader'}
  from generic_trainer.core import module_loader  # pylint: disable=g-import-not-at-top
  kinds = module_loader.top_level_names(os.path.join(TESTDATA,
                                                     'trainer_fn_only.py'))
  assert kinds['trainer_fn'] == 'function'


def test_fn_args_extra_fields_are_defined_once():
  """The pipeline's FnArgs and the local one share GenericTrainer's fields
  from one class."""
  import attr  # pylint: disable=g-import-not-at-top
  from generic_trainer.core.fn_args import FnArgs  # pylint: disable=g-import-not-at-top
  from generic_trainer.core.fn_args_fields import GenericFnArgsFields  # pylint: disable=g-import-not-at-top
  from generic_trainer.local.fn_args import LocalFnArgs  # pylint: disable=g-import-not-at-top
  assert issubclass(FnArgs, GenericFnArgsFields)
  assert issubclass(LocalFnArgs, GenericFnArgsFields)
  extra = [f.name for f in attr.fields(GenericFnArgsFields)]
  assert 'checkpoint_dir' in extra and 'num_examples' in extra
  for cls in (FnArgs, LocalFnArgs):
    assert [f.name for f in attr.fields(cls)][-len(extra):] == extra


def test_where_to_train_is_decided_in_one_function():
  """Only launch.dispatch calls the three ways to train."""
  assert _calls('run_in_child') == {'generic_trainer.launch.dispatch'}
  assert 'generic_trainer.launch.dispatch' in _calls('can_train_in_process')
  callers = {m for m, targets in __import__('test_layout').GRAPH.items()
             if 'generic_trainer.core.training' in targets}
  assert callers <= {'generic_trainer.launch.dispatch',
                     'generic_trainer.local.run'}


def test_estimator_trains_through_the_runners_sequence(tmp_path, penguin_csvs,
                                                      monkeypatch):
  """The notebook Estimator prepares and checks the spec with the same
  function as pipelines (loop.runner.prepare)."""
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import runner  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  prepared = []
  real = runner.prepare
  monkeypatch.setattr(runner, 'prepare',
                      lambda *a: prepared.append(a) or real(*a))
  Estimator(PenguinSpec, str(tmp_path)).train(penguin_csvs[0], steps=2)
  assert len(prepared) == 1


def test_command_shows_progress_by_logger_not_by_file(capsys):
  """The command shows the progress log's lines wherever they come from,
  and hides other INFO lines."""
  import logging  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from generic_trainer import progress  # pylint: disable=g-import-not-at-top
  from generic_trainer.local import console  # pylint: disable=g-import-not-at-top
  with console.command_lines(sys.stderr):
    progress.log().info('epoch 1 done after %.1fs', 1.0)
    logging.getLogger('absl').info('Component noise')
    logging.getLogger('absl').warning('a warning')
  err = capsys.readouterr().err
  assert err.splitlines() == ['epoch 1 done after 1.0s', 'WARNING: a warning']
