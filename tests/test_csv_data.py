"""CSV data (`data.csv_data`): converted to the same TFRecords run after
run, and what its blanks and an empty file are named before training."""

import gzip
import os
import shutil

import pytest

from message_parts import assert_four_parts


def _main(*argv):
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  return cli.main(list(argv))


def _error_line(err: str) -> str:
  return [l for l in err.splitlines() if l.startswith('generic-trainer: ')][0]


def _csv(path, text):
  path.write_text(text)
  return str(path)


def test_the_same_csv_converts_to_the_same_file_run_after_run(tmp_path):
  """Converted twice (the folder cleared between, as a run does), the same
  CSV gives the same data.gz, byte for byte and with the same time, and so
  do the held-out split's files: a retrain finds its kept rows."""
  from generic_trainer.command import holdout  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  rows = ''.join(f'{i},{i * 0.5},{"xyz"[i % 3]},{i % 2}\n' for i in range(60))
  source = _csv(tmp_path / 'rows.csv', 'a,b,c,label\n' + rows)
  seen = []
  for _ in range(2):
    data = tmp_path / 'data'
    shutil.rmtree(data, ignore_errors=True)
    (whole,) = local_files.to_split(source, str(data / 'whole'))
    parts = holdout.split([whole], str(data / 'Split-train'),
                          str(data / 'Split-eval'))
    seen.append([(open(p, 'rb').read(), os.stat(p).st_mtime_ns)
                 for p in [whole] + parts.train_files + parts.eval_files])
  assert seen[0] == seen[1]
  assert gzip.decompress(seen[0][0][0])  # A gzip file, read whole.


def test_blanks_in_a_run_fns_csv_data_are_named_before_its_code_runs(
    tmp_path, capsys):
  """A run_fn trained on CSV data with blanks: every column with blanks,
  how many cells, and what to do, before the module's code runs (not an
  AttributeError about VarLenFeature from inside it)."""
  module = tmp_path / 'module.py'
  module.write_text('def run_fn(fn_args):\n  raise AssertionError("ran")\n')
  rows = ['a,b,c,label'] + [f'{i},{i},{i},{i % 2}' for i in range(30)]
  rows[3], rows[5], rows[7] = '2,,2,0', '4,,,0', '6,6,NA,0'
  data = _csv(tmp_path / 'rows.csv', '\n'.join(rows) + '\n')
  assert _main('--module-file', str(module), '--train-data', data,
               '--output-dir', str(tmp_path / 'out')) == 1
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(
      f'generic-trainer: InputArtifactError: {data}: 2 columns have missing '
      "values (4 cells: 'b' 2 (line 4, 6); 'c' 2 (line 6, 8))")
  assert 'VarLenFeature' in message and '--schema' in message
  assert 'a default' in message
  assert_four_parts(message)


def test_every_column_with_missing_values_is_named_at_once(tmp_path):
  """A TrainSpec's required columns: all those with blanks in one message,
  not the first alone."""
  from generic_trainer.data import csv_data  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  table = csv_data.read(_csv(tmp_path / 'x.csv', 'a,b,c\n1,,3\n,2,\n4,5,6\n'))
  with pytest.raises(InputArtifactError) as e:
    csv_data.check_required([table], {'*': 'the model reads it'})
  message = str(e.value)
  assert "3 columns have missing values (3 cells: 'a' 1 (line 3); 'b' 1 " \
         "(line 2); 'c' 1 (line 3))" in message
  assert_four_parts(message)


def test_an_empty_csv_says_what_its_first_line_must_hold(tmp_path):
  """An empty CSV file: what the first line must be (the column names,
  separated by the delimiter), what it got, and what to do."""
  from generic_trainer.data import csv_data  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  for text in ('', '\n\n', ' , \n1,2\n'):
    path = _csv(tmp_path / 'e.csv', text)
    with pytest.raises(InputArtifactError) as e:
      csv_data.read(path)
    message = str(e.value)
    assert 'Expected the first line to name the columns' in message, message
    assert_four_parts(message)
