"""What the generic-trainer command evaluates on: a held-out hash split of
the train data by default, the train data on purpose, or given files."""

import csv
import json
import os

import pytest

from command_line import main as _main
from conftest import REPO

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _records(folder):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return [r.numpy() for name in sorted(os.listdir(folder))
          for r in tf.data.TFRecordDataset(os.path.join(folder, name),
                                           'GZIP')]


def _rows(path):
  with open(path) as f:
    return len(list(csv.DictReader(f)))


def test_the_hash_split_is_deterministic_and_holds_out_a_third(tmp_path,
                                                                penguin_csvs):
  """The same rows go to eval on every run; about a third; none on both
  sides; every row on one."""
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import holdout  # pylint: disable=g-import-not-at-top
  files = local_files.to_split(penguin_csvs[0], str(tmp_path / 'all'))
  first = holdout.split(files, str(tmp_path / 'a' / 'train'),
                        str(tmp_path / 'a' / 'eval'))
  again = holdout.split(files, str(tmp_path / 'b' / 'train'),
                        str(tmp_path / 'b' / 'eval'))
  assert (first.train_rows, first.eval_rows) == (again.train_rows,
                                                 again.eval_rows)
  held = _records(tmp_path / 'a' / 'eval')
  assert held == _records(tmp_path / 'b' / 'eval')
  kept = _records(tmp_path / 'a' / 'train')
  assert sorted(held + kept) == sorted(_records(tmp_path / 'all'))
  assert 0.25 < len(held) / (len(held) + len(kept)) < 0.42
  assert first.eval_rows == len(held)


def test_without_eval_data_the_command_holds_out_a_third(tmp_path,
                                                         penguin_csvs,
                                                         capsys):
  """No --eval-data: a held-out third, said before training and in the
  summary, and recorded in train_result.json."""
  out = tmp_path / 'out'
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--output-dir', str(out), '--steps', '10') == 0
  printed = capsys.readouterr().out
  assert ('Eval data: a third of the train data, held out from training (a '
          "hash split of the rows, as CsvExampleGen's default 2:1; the same "
          'rows every run).') in printed
  with open(out / 'run' / 'train_result.json') as f:
    evaluation = json.load(f)['evaluation']
  total = _rows(penguin_csvs[0])
  assert evaluation['data'] == 'held_out'
  assert evaluation['train_rows'] + evaluation['eval_rows'] == total
  assert (f"  eval on a held-out third of the train data (hash split, as "
          f"CsvExampleGen's default 2:1): {evaluation['eval_rows']} of "
          f'{total} rows\n') in printed
  held = _records(out / 'data' / 'Split-eval')
  kept = _records(out / 'data' / 'Split-train')
  assert len(held) == evaluation['eval_rows'] and not set(held) & set(kept)
  assert sorted(os.listdir(out / 'data')) == ['Split-eval', 'Split-train']


def test_eval_data_train_evaluates_on_the_train_data_and_says_so(
    tmp_path, penguin_csvs, capsys):
  """--eval-data train: today's behaviour, on purpose, with a warning that
  the figures are training-set figures."""
  out = tmp_path / 'out'
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--eval-data', 'train', '--output-dir', str(out),
               '--steps', '10') == 0
  printed = capsys.readouterr().out
  assert ('Eval data: the train data itself (--eval-data train). The eval '
          'figures will be training-set figures') in printed
  assert ('  eval on the train data itself (--eval-data train): '
          'training-set figures, not a measure of how the model does on new '
          'data\n') in printed
  with open(out / 'run' / 'train_result.json') as f:
    assert json.load(f)['evaluation']['data'] == 'train'
  assert _records(out / 'data' / 'Split-eval') == _records(
      out / 'data' / 'Split-train')


def test_eval_data_train_with_files_is_refused(tmp_path, penguin_csvs,
                                              capsys):
  """`--eval-data train` takes no other --eval-data: exit 2."""
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--eval-data', 'train', '--eval-data', penguin_csvs[1],
               '--output-dir', str(tmp_path / 'out')) == 2
  assert ('--eval-data train means the train data itself and takes no other '
          '--eval-data. Expected either `--eval-data train` alone or eval '
          "files. Received: --eval-data=['train', ") in capsys.readouterr().err


def test_too_few_rows_to_hold_out_are_named(tmp_path, penguin_csvs, capsys):
  """One row cannot be split: exit 1, saying what to pass instead."""
  with open(penguin_csvs[0]) as f:
    head = [next(f), next(f)]
  one = tmp_path / 'one.csv'
  one.write_text(''.join(head))
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(one),
               '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert 'InputArtifactError: The held-out split of the train data left ' in err
  assert ('too few rows to hold a third out. Expected at least one row on '
          'each side') in err
  assert 'Pass --eval-data FILES' in err


@pytest.mark.parametrize('flag_values, expected', [
    ([], 'held_out'), (['train'], 'train')])
def test_the_eval_choice_is_part_of_the_resume_key(tmp_path, penguin_csvs,
                                                   flag_values, expected):
  """A held-out run and a --eval-data train run never resume each other."""
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import run as command_run  # pylint: disable=g-import-not-at-top
  argv = ['--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
          '--output-dir', str(tmp_path / 'out')]
  plain = cli_args.parse(argv, started=0.0)
  chosen = cli_args.parse(
      argv + [x for v in flag_values for x in ('--eval-data', v)],
      started=0.0)
  assert chosen.eval_on_train == (expected == 'train')
  assert (command_run.resume_key(plain) == command_run.resume_key(chosen)) == (
      expected == 'held_out')
