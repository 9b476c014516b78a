"""The published model, never lost: a failed run into the same folder
keeps the model an earlier run published, byte for byte; a good run
replaces it; a kill between the two renames puts the earlier one back."""

import hashlib
import os

import pytest

from command_line import main as _main
from command_line import module_file as _module
from conftest import REPO, TESTDATA

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _digest(folder) -> str:
  """A hash of every file's path and bytes under `folder`."""
  digest = hashlib.sha256()
  for root, _, files in sorted(os.walk(folder)):
    for name in sorted(files):
      path = os.path.join(root, name)
      digest.update(os.path.relpath(path, folder).encode())
      with open(path, 'rb') as f:
        digest.update(f.read())
  return digest.hexdigest()


@pytest.fixture
def published(tmp_path, penguin_csvs):
  """An output folder holding the model a good run published: (dir, hash)."""
  out = tmp_path / 'out'
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--output-dir', str(out), '--steps', '5') == 0
  return out, _digest(out / 'model')


# A failed run never destroys a good model.
@pytest.mark.parametrize('case', ['module', 'data', 'export', 'spec'])
def test_a_failed_run_leaves_the_earlier_model_as_it_was(
    published, tmp_path, penguin_csvs, capsys, case):
  """Whatever fails in a second run into the same folder, the model the
  first published is still there, byte for byte, and the message says so."""
  out, digest = published
  capsys.readouterr()
  bad_csv = tmp_path / 'short.csv'
  bad_csv.write_text('species,bill_length_mm\n0,39.1\n1\n')
  argv = {
      'module': ['--module-file', _module(tmp_path, 'raises_at_import', '''
          raise RuntimeError('boom')

          def run_fn(fn_args):
            pass
          ''')],
      'data': ['--module-file', SPEC_MODULE, '--train-data', str(bad_csv)],
      'export': ['--module-file', os.path.join(TESTDATA,
                                               'nan_prediction.py')],
      'spec': ['--module-file', _module(tmp_path, 'wrong_label', '''
          from spec_fixtures import PenguinSpec

          class WrongLabel(PenguinSpec):
            label_key = 'weight_class'
          ''')],
  }[case]
  if '--train-data' not in argv:
    argv += ['--train-data', penguin_csvs[0]]
  assert _main(*argv, '--output-dir', str(out), '--steps', '5') == 1
  err = capsys.readouterr().err
  assert _digest(out / 'model') == digest
  assert err.endswith(f'generic-trainer: the model an earlier run published '
                      f'in {out}/model is unchanged.\n'), err[-500:]


def test_a_good_run_replaces_the_model_and_nothing_is_left_aside(
    published, penguin_csvs):
  """The next good run's model takes the place of the earlier one."""
  out, digest = published
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--output-dir', str(out), '--steps', '10') == 0
  assert _digest(out / 'model') != digest
  assert sorted(os.listdir(out)) == ['.generic-trainer',
                                     '.generic-trainer.lock', '.models',
                                     'data', 'model',
                                     'run', 'schema']


def test_a_kill_between_the_two_renames_puts_the_earlier_model_back(
    tmp_path):
  """If a run dies after moving the old model aside and before putting the
  new one in place, the next use of the folder restores the old one."""
  from generic_trainer.command.layout import Layout  # pylint: disable=g-import-not-at-top
  layout = Layout(str(tmp_path / 'out'))
  layout.clear()
  os.makedirs(layout.previous_model)
  open(os.path.join(layout.previous_model, 'saved_model.pb'), 'w').close()
  layout.clear()
  assert os.listdir(layout.model) == ['saved_model.pb']
  assert not os.path.exists(layout.previous_model)
