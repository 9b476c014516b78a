"""The error catalogue (docs/errors.md) and the messages it lists: every
row complete and pinned by a test that exists; every message with its four
parts (what is wrong, Expected, Received, what to do; see message_parts)."""

import os
import re

import pytest

from conftest import REPO
from message_parts import missing_parts

CATALOGUE = os.path.join(REPO, 'docs', 'errors.md')
TESTS = os.path.join(REPO, 'tests')
_COLUMNS = ['#', 'mistake', 'error', 'when',
            'what the message tells you to do', 'test']


def _rows():
  """(number, cells) of every row of the catalogue's tables."""
  rows, header = [], None
  with open(CATALOGUE) as f:
    for line in f:
      if not line.startswith('|'):
        header = None
        continue
      cells = [c.strip() for c in re.split(r'(?<!\\)\|', line.strip())[1:-1]]
      if header is None:
        header = cells
        assert header == _COLUMNS, f'a table of other columns: {line}'
      elif not set(''.join(cells)) <= set('-: '):
        rows.append((cells[0], cells))
  return rows


def _retired(cells) -> bool:
  """A row kept for its number, of a mistake that is no longer one."""
  return cells[1].startswith('(no longer an error')


def _defined_tests():
  names = set()
  for name in os.listdir(TESTS):
    if name.endswith('.py'):
      with open(os.path.join(TESTS, name)) as f:
        names.update(re.findall(r'^def (test_\w+)', f.read(), re.M))
  return names


def test_every_row_is_complete_numbered_once_and_names_an_error():
  """Six cells filled in each row; numbers unique; the error one of ours,
  or the command's exit status."""
  import generic_trainer.errors as errors  # pylint: disable=g-import-not-at-top
  import builtins  # pylint: disable=g-import-not-at-top
  ours = {n for n in dir(errors) if n.endswith('Error')}
  builtin = set(dir(builtins))  # Named as what ours refines.
  numbers = [n for n, _ in _rows()]
  assert len(numbers) > 100
  assert len(numbers) == len(set(numbers)), sorted(
      n for n in numbers if numbers.count(n) > 1)
  for number, cells in _rows():
    if _retired(cells):
      continue
    assert len(cells) == len(_COLUMNS), f'row {number}: {cells}'
    assert all(cells), f'row {number} has an empty cell: {cells}'
    named = set(re.findall(r'`(\w+Error)`', cells[2])) - builtin
    assert named <= ours, f'row {number}: {named - ours} is not ours'
    assert named or 'exit' in cells[2] or 'note' in cells[2] or (
        'that error' in cells[2]), f'row {number} names no error: {cells[2]}'


def test_every_row_is_pinned_by_a_test_that_exists():
  """Each test a row names is defined in tests/ (a bare [id] is a case of
  the row's table's parametrized test; 'same' is the row above's)."""
  defined = _defined_tests()
  for number, cells in _rows():
    if _retired(cells):
      continue
    cell = cells[-1]
    names = set(re.findall(r'\b(test_\w+)\b(?!\.py)', cell))
    files = re.findall(r'\b([\w/]+\.py)\b', cell)
    assert names or files or cell == 'same' or cell.startswith('`['), (
        f'row {number} names no test: {cell}')
    assert names <= defined, f'row {number}: {sorted(names - defined)}'
    for path in files:
      assert os.path.exists(os.path.join(TESTS, os.path.basename(path))) or (
          os.path.exists(os.path.join(REPO, 'generic_trainer', path))), (
              f'row {number}: {path}')


def _raised(call):
  """The message of the error of ours `call` raises."""
  from generic_trainer.errors import GenericTrainerError  # pylint: disable=g-import-not-at-top
  with pytest.raises(GenericTrainerError) as e:
    call()
  return str(e.value)


def _cases(tmp_path):
  """{name: a call that raises one of our errors}: a representative set,
  across the package's layers."""
  from generic_trainer.plan import settings  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import module_loader  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import csv_data  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import spec_checks  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import datasets  # pylint: disable=g-import-not-at-top
  from generic_trainer.trainspec import member_checks  # pylint: disable=g-import-not-at-top
  from generic_trainer import heads  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import train_result  # pylint: disable=g-import-not-at-top
  csv = tmp_path / 'train.csv'
  csv.write_text('a,b\n1,2\n3,4\n')
  module = tmp_path / 'mod.py'
  module.write_text('x = 1\n')
  broken = tmp_path / 'broken.py'
  broken.write_text('def run_fn(fn_args)\n  pass\n')
  (tmp_path / 'run').mkdir()
  (tmp_path / 'run' / 'train_result.json').write_text('[1]')
  base = ['--module-file', str(module), '--train-data', str(csv),
          '--output-dir', str(tmp_path / 'out')]

  class Spec:
    epochs, batch_size, cache = 2, 8, 'memory'

  def cli(*extra):
    return lambda: cli_args.parse(base + list(extra), 0.0)

  def csv_text(text):
    path = tmp_path / 'x.csv'
    path.write_text(text)
    return lambda: csv_data.infer_kinds([csv_data.read(str(path))])

  return {
      'one-source': lambda: module_loader.check_one_source(module_file=None,
                                                  module_path=None,
                                                  run_fn=None),
      'run-fn-path': lambda: module_loader.check_run_fn_path('run_fn'),
      'keras-version': lambda: settings.check_keras_version('keras2'),
      'backend': lambda: settings.check_backend('torch'),
      'flag': lambda: settings.check_flag('allow_signature_change', 'yes'),
      'num-steps': lambda: settings.steps(-1, "'train_args.num_steps'",
                                          'num_steps=-1'),
      'custom-config': lambda: settings.check_custom_config([1]),
      'max-restarts': lambda: settings.check_max_restarts(-1),
      'num-workers': lambda: settings.check_settings(num_workers=0),
      'strategy': lambda: settings.check_settings(strategy='tpu'),
      'module-missing': lambda: module_loader.check_module_source(
          str(tmp_path / 'nope.py')),
      'module-syntax': lambda: module_loader.check_module_source(str(broken)),
      'no-entry-point': lambda: module_loader.load_from_file(str(module)),
      'cli-steps': cli('--steps', 'ten'),
      'cli-hparams': cli('--hparams', '[1]'),
      'cli-keras': cli('--keras-version', '2'),
      'cli-backend': cli('--backend', 'torch'),
      'cli-progress': cli('--progress', 'fancy'),
      'cli-delimiter': cli('--csv-delimiter', '::'),
      'cli-schema': cli('--schema', str(tmp_path / 'nope.pbtxt')),
      'no-data': lambda: local_files.resolve_files(str(tmp_path / 'no*.csv')),
      'mixed-data': lambda: local_files.to_split(
          [str(csv), str(module)], str(tmp_path / 'Split-x')),
      'csv-empty': csv_text(''),
      'csv-header-only': csv_text('a,b\n'),
      'csv-doubled-column': csv_text('a,a\n1,2\n'),
      'csv-row-length': csv_text('a,b\n1,2\n3\n'),
      'csv-stray-word': csv_text('a\n' + '1\n' * 20 + 'twelve\n'),
      'csv-decimal-comma': csv_text('a;b\n1;2,5\n'),
      'csv-columns': lambda: csv_data.check_against(
          csv_data.read(str(csv)), {'a': 'int', 'c': 'int'}, 'the schema'),
      'train-result': lambda: train_result.read(str(tmp_path / 'run')),
      'schedule-epochs': lambda: datasets.schedule(Spec(), 1, None),
      'schedule-divide': lambda: datasets.schedule(Spec(), 5, None),
      'cache': lambda: spec_checks.check_cache(Spec()),
      'head-classes': lambda: heads.MultiClassHead(1),
      'handlers': lambda: member_checks.handlers(Spec(), [len]),
      'metrics': lambda: member_checks.metrics(Spec(), 'accuracy'),
  }


_NAMES = sorted(
    ['one-source', 'run-fn-path', 'keras-version', 'backend', 'flag',
     'num-steps', 'custom-config', 'max-restarts', 'num-workers', 'strategy',
     'module-missing', 'module-syntax', 'no-entry-point', 'cli-steps',
     'cli-hparams', 'cli-keras', 'cli-backend', 'cli-progress',
     'cli-delimiter', 'cli-schema', 'no-data', 'mixed-data', 'csv-empty',
     'csv-header-only', 'csv-doubled-column', 'csv-row-length',
     'csv-stray-word', 'csv-decimal-comma', 'csv-columns', 'train-result',
     'schedule-epochs', 'schedule-divide', 'cache', 'head-classes',
     'handlers', 'metrics'])


@pytest.mark.parametrize('name', _NAMES)
def test_messages_have_the_four_parts(tmp_path, name):
  """A representative set of our errors, across arguments, modules, data,
  specs and heads: each says what is wrong, what was expected, what was
  received, and what to do."""
  message = _raised(_cases(tmp_path)[name])
  assert not missing_parts(message), (missing_parts(message), message)
