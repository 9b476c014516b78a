"""CSV data (`data.csv_data`, `data.csv_dialect`): converted to the same
TFRecords run after run; a byte-order mark or another delimiter read as
meant or named; missing values read as missing, or refused where the model
or the label needs them; rows of the wrong length, an empty file and eval
data unlike the train data named by file and line, before training."""

import csv
import gzip
import os
import shutil
import subprocess
import sys

import pytest

from command_line import error_line as _error_line
from command_line import main as _main
from command_line import module_file
from conftest import REPO
from conftest import penguin_text as _penguin_text
from message_parts import assert_four_parts

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


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


# CSV data is read as meant, or refused naming what was found.
_PENGUIN_HEADER = ('species,bill_length_mm,bill_depth_mm,flipper_length_mm,'
                   'body_mass_g')


def test_csv_separated_by_semicolons_is_refused_naming_the_delimiter(
    tmp_path, penguin_csvs, capsys):
  """A ';'-separated file would be one column named after every header:
  refused before training, naming ';' and how to read it."""
  path = tmp_path / 'train.csv'
  path.write_text(_penguin_text(penguin_csvs, rows=30).replace(',', ';'))
  out = tmp_path / 'out'
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(path),
               '--output-dir', str(out)) == 1
  err = capsys.readouterr().err
  message = _error_line(err)[len('generic-trainer: InputArtifactError: '):]
  assert message == (
      f"{path} is separated by ';', not by commas: its first 20 line(s) "
      "split evenly into 5 columns at ';' (species, bill_length_mm, "
      'bill_depth_mm, flipper_length_mm, body_mass_g), and at commas into 1 '
      "column(s). Expected comma-separated values. Received: ';'-separated "
      "lines. Pass --csv-delimiter ';' to read it with ';', or re-save it as "
      "CSV with commas (pandas: pd.read_csv(path, sep=';').to_csv(new_path, "
      'index=False)).')
  assert_four_parts(message)
  assert not (out / 'model').exists()


def test_decimal_commas_are_named_with_the_delimiter(tmp_path):
  """A European spreadsheet (';' and '41,7'): both are said, quoting a
  value of the file, and the pandas line reads it with its sep (read at
  commas, each line would split at its decimal commas)."""
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import csv_data  # pylint: disable=g-import-not-at-top
  path = tmp_path / 'eu.csv'
  path.write_text('species;bill_length_mm\n0;41,7\n1;40,2\n')
  with pytest.raises(InputArtifactError,
                     match=r"Received: ';'-separated lines, with decimal "
                     r"commas \(41,7\)\. Pass --csv-delimiter ';' to read it "
                     r"with ';' and re-save the numbers with decimal points"):
    csv_data.read(str(path))
  table = csv_data.read(str(path), ';')
  with pytest.raises(InputArtifactError) as e:
    csv_data.infer_kinds([table])
  assert str(e.value) == (
      "Column 'bill_length_mm' holds numbers written with a decimal comma (2 "
      f"rows; first {path}, line 2: '41,7'), which would be read as words. "
      "Expected numbers with a decimal point (41.7). Received: '41,7'. "
      'Re-save the file with decimal points (pandas: pd.read_csv(path, '
      "sep=';', decimal=',').to_csv(new_path, sep=';', index=False)).")
  assert_four_parts(str(e.value))


def test_decimal_comma_advice_keeps_the_given_delimiter(tmp_path, capsys):
  """With --csv-delimiter ';', the command's decimal-comma message says
  pd.read_csv(path, sep=';', decimal=','): the advice that, followed,
  reads the file as it is."""
  path = _csv(tmp_path / 'eu.csv', 'a;b;label\n1;2,5;0\n2;3,5;1\n3;4,5;0\n')
  assert _main('--module-file', SPEC_MODULE, '--train-data', path,
               '--csv-delimiter', ';', '--output-dir',
               str(tmp_path / 'out')) == 1
  message = _error_line(capsys.readouterr().err)
  assert ("pd.read_csv(path, sep=';', decimal=',').to_csv(new_path, "
          "sep=';', index=False)" in message)
  assert "pd.read_csv(path, decimal=',')" not in message


def test_every_mistake_the_header_and_rows_show_is_told_at_once(
    tmp_path, capsys):
  """A house-price file with blanks in its label and '$' amounts, for a
  canned regressor: both mistakes in one message, numbered, in one run."""
  module = module_file(tmp_path, 'houses', """
      from generic_trainer.canned import DNNRegressorSpec

      class Houses(DNNRegressorSpec):
        label_key = 'price'
        hidden_units = [4]
      """)
  path = _csv(tmp_path / 'houses.csv', 'rooms,area,price\n3,70,$250000\n'
              '4,95,\n2,50,$180000\n5,120,$410000\n')
  assert _main('--module-file', module, '--train-data', path, '--output-dir',
               str(tmp_path / 'out')) == 1
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(
      'generic-trainer: InputArtifactError: 2 mistakes in the CSV data, all '
      'found in its header and first rows before training: (1) '
      f"{path}: column 'price' has 1 missing value(s) (line 3), but it "
      'cannot be missing: it is the label of TrainSpec Houses.')
  assert ("(2) The label column 'price' holds text that looks like numbers "
          "written with a currency sign ('$')") in message
  assert "df['price'].str.replace(r'[$]', '', regex=True)" in message


def test_a_misspelt_label_key_is_told_with_the_nearest_column(
    tmp_path, capsys):
  """label_key = 'prise' against a header with 'price': did you mean, and
  the header's columns, before TensorFlow loads (no loading line)."""
  module = module_file(tmp_path, 'houses', """
      from generic_trainer.canned import DNNRegressorSpec

      class Houses(DNNRegressorSpec):
        label_key = 'prise'
      """)
  path = _csv(tmp_path / 'houses.csv', 'rooms,price\n3,250000\n4,310000\n')
  assert _main('--module-file', module, '--train-data', path, '--output-dir',
               str(tmp_path / 'out')) == 1
  out, err = capsys.readouterr()
  assert _error_line(err) == (
      "generic-trainer: InputArtifactError: Houses.label_key names "
      "['prise'], which the data lacks (did you mean 'price'?). The header "
      f'of {path} has: rooms, price. Expected names among the CSV columns. '
      "Received: label_key='prise'. Fix the spelling in the module, or "
      'rename the column in the header.')
  assert 'Loading TensorFlow' not in out + err
  assert_four_parts(_error_line(err)[len('generic-trainer: InputArtifactError: '):])


def test_a_header_mistake_is_told_before_tensorflow_is_imported(tmp_path):
  """The installed command, in a fresh process: a ';'-separated file is
  refused with TensorFlow never imported (no loading line; the process
  ends with tensorflow absent from sys.modules)."""
  path = _csv(tmp_path / 'eu.csv', 'a;b;label\n1;2,5;0\n2;3,5;1\n')
  probe = ('import sys, runpy; sys.argv = ["generic-trainer"] + sys.argv[1:]\n'
           'from generic_trainer.command import cli\n'
           'status = cli._main(sys.argv[1:])\n'
           'print("tensorflow imported:", "tensorflow" in sys.modules)\n'
           'sys.exit(status)\n')
  done = subprocess.run(
      [sys.executable, '-c', probe, '--module-file', SPEC_MODULE,
       '--train-data', path, '--output-dir', str(tmp_path / 'out')],
      capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode == 1, done.stderr
  assert done.stdout.strip() == 'tensorflow imported: False'
  assert "is separated by ';', not by commas" in done.stderr
  assert 'with decimal commas (2,5)' in done.stderr
  assert 'Loading TensorFlow' not in done.stdout + done.stderr


def test_empty_and_header_only_csv_say_all_four_parts(tmp_path):
  """An empty file and a header without rows: what is wrong, expected,
  received, what to do."""
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import csv_data  # pylint: disable=g-import-not-at-top
  empty = tmp_path / 'empty.csv'
  empty.write_text('')
  with pytest.raises(InputArtifactError) as e:
    csv_data.read(str(empty))
  assert str(e.value) == (
      f'{empty} is empty or its first line is blank. Expected the first '
      "line to name the columns, separated by ',' (species,bill_length_mm,"
      '...), then one row of values per example. '
      'Received: an empty file (0 bytes). Write the column names on the '
      'first line (e.g. species,bill_length_mm), then the rows; or leave '
      'the file out of the data.')
  assert_four_parts(str(e.value))
  header = tmp_path / 'header.csv'
  header.write_text(_PENGUIN_HEADER + '\n')
  with pytest.raises(InputArtifactError) as e:
    csv_data.read(str(header))
  assert str(e.value) == (
      f'{header} has a header but no rows. Expected at least one row of '
      'values under the header. Received: the header alone (species, '
      'bill_length_mm, bill_depth_mm, flipper_length_mm, body_mass_g). Add '
      'the rows, or leave the file out of the data.')
  assert_four_parts(str(e.value))


def test_missing_value_spellings_are_read_as_missing_and_counted(
    tmp_path, penguin_csvs, capsys):
  """NA, N/A, null, ?, - and empty cells in a column the model does not
  read: trained on as missing values, counted per column and spelling in
  the log and train_result.json."""
  import json  # pylint: disable=g-import-not-at-top
  with open(penguin_csvs[0]) as f:
    lines = f.read().splitlines()
  assert lines[0].split(',')[-1] == 'is_gentoo'
  for line, spelling in enumerate(['NA', 'N/A', 'null', '?', '-', ''],
                                  start=1):
    lines[line] = ','.join(lines[line].split(',')[:-1] + [spelling])
  path = tmp_path / 'train.csv'
  path.write_text('\n'.join(lines) + '\n')
  out = tmp_path / 'out'
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(path),
               '--output-dir', str(out), '--steps', '5') == 0
  err = capsys.readouterr().err
  assert ("missing values: train data read ''/'-'/'?'/'N/A'/'NA'/'null' as "
          'missing (no value in the tf.Example); counts per column (spelling '
          "count): is_gentoo 6 ('' 1, '-' 1, '?' 1, 'N/A' 1, 'NA' 1, 'null' "
          "1)") in err
  with open(out / 'run' / 'train_result.json') as f:
    assert json.load(f)['missing_values'] == {'train': {'is_gentoo': {
        '': 1, '-': 1, '?': 1, 'N/A': 1, 'NA': 1, 'null': 1}}}


def test_missing_value_in_a_feature_the_model_reads_is_refused(
    tmp_path, penguin_csvs, capsys):
  """NA in a feature a TrainSpec feeds its model (the raw penguin table's
  bill_length_mm): refused, naming the lines and how to train without it."""
  with open(penguin_csvs[0]) as f:
    lines = f.read().splitlines()
  fields = lines[4].split(',')
  fields[1] = 'NA'
  lines[4] = ','.join(fields)
  path = tmp_path / 'train.csv'
  path.write_text('\n'.join(lines) + '\n')
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(path),
               '--output-dir', str(tmp_path / 'out')) == 1
  message = _error_line(capsys.readouterr().err)
  assert message == (
      f"generic-trainer: InputArtifactError: {path}: column 'bill_length_mm' "
      'has 1 missing value(s) (line 5), but it cannot be missing: TrainSpec '
      'PenguinSpec feeds it to the model, which takes one value per example '
      '(leave it out of feature_keys, or use a run_fn that handles missing '
      "values, to train without it). Expected a value on every row of "
      "'bill_length_mm'. Received: 'NA' (read as missing). Fill those cells "
      'in, or drop those rows.')
  assert_four_parts(message)


def test_missing_label_is_refused(tmp_path, penguin_csvs, capsys):
  """NA in the label column of a TrainSpec: refused, naming the lines."""
  lines = _penguin_text(penguin_csvs).splitlines()
  lines[3] = 'NA' + lines[3][1:]
  path = tmp_path / 'train.csv'
  path.write_text('\n'.join(lines) + '\n')
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(path),
               '--output-dir', str(tmp_path / 'out')) == 1
  message = _error_line(capsys.readouterr().err)
  assert message == (
      f"generic-trainer: InputArtifactError: {path}: column 'species' has 1 "
      'missing value(s) (line 4), but it cannot be missing: it is the label '
      "of TrainSpec PenguinSpec. Expected a value on every row of 'species'. "
      "Received: 'NA' (read as missing). Fill those cells in, or drop those "
      'rows.')
  assert_four_parts(message)


def test_a_schema_that_requires_a_column_refuses_its_missing_values(tmp_path):
  """A feature the given schema requires (presence 1) cannot be NA."""
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  schema = schema_pb2.Schema()
  for name in ('a', 'b'):
    feature = schema.feature.add(name=name, type=schema_pb2.FLOAT)
    feature.presence.min_fraction = 1.0
  path = tmp_path / 'x.csv'
  path.write_text('a,b\n1,2\n3,null\n')
  with pytest.raises(InputArtifactError,
                     match=r"column 'b' has 1 missing value\(s\) \(line 3\), "
                     r'but it cannot be missing: the schema s.pbtxt requires '
                     r'it in every example'):
    local_files.to_split(str(path), str(tmp_path / 'Split-train'), schema,
                        'the schema s.pbtxt')


# Bad data is named before training.
def _write_csv(path, rows, text=None, encoding='utf-8'):
  if text is None:
    with open(path, 'w', newline='', encoding=encoding) as f:
      csv.writer(f).writerows(rows)
  else:
    with open(path, 'w', encoding=encoding) as f:
      f.write(text)
  return str(path)


def _penguin_rows(path):
  with open(path) as f:
    return list(csv.reader(f))


@pytest.mark.parametrize('case, message', [
    ('too_few_fields', r'{csv}, line 3: 4 field\(s\), expected 5 as in the '
     r"header \(',\'-separated: species, bill_length_mm, bill_depth_mm, "
     r'flipper_length_mm, body_mass_g\)'),
    ('too_many_fields', r'{csv}, line 3: 6 field\(s\), expected 5'),
    ('stray_word', r"Column 'bill_length_mm' holds numbers in \d+ rows but "
     r"not in 1: {csv}, line 4: 'twelve'\. Expected one kind of value per "
     r'column: numbers\. Received: 1 value\(s\) that are not\. Fix those '
     r'values'),
    ('empty', r'{csv} is empty or its first line is blank'),
])
def test_csv_mistakes_are_named_by_line(tmp_path, penguin_csvs, capsys, case,
                                        message):
  """Rows of the wrong length and a word in a numeric column: exit 1, the
  file and line named, before training."""
  rows = _penguin_rows(penguin_csvs[0])
  rows = [r[:5] for r in rows]
  if case == 'too_few_fields':
    rows[2] = rows[2][:4]
  elif case == 'too_many_fields':
    rows[2] = rows[2] + ['7']
  elif case == 'stray_word':
    rows[3][1] = 'twelve'
  path = _write_csv(tmp_path / 'train.csv', rows,
                    text='' if case == 'empty' else None)
  assert _main('--module-file', SPEC_MODULE, '--train-data', path,
               '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert err.startswith('generic-trainer: InputArtifactError: ')
  import re  # pylint: disable=g-import-not-at-top
  assert re.search(message.format(csv=re.escape(path)), err), err


@pytest.mark.parametrize('variant', ['bom', 'semicolon', 'tab'])
def test_csv_with_a_bom_or_another_delimiter_trains(tmp_path, penguin_csvs,
                                                     capsys, variant):
  """A byte-order mark (Excel), or a ';' or tab delimiter named with
  --csv-delimiter, is read as meant: the label is found."""
  rows = [r[:5] for r in _penguin_rows(penguin_csvs[0])]
  delimiter = {'bom': ',', 'semicolon': ';', 'tab': '\t'}[variant]
  text = '\n'.join(delimiter.join(r) for r in rows) + '\n'
  path = _write_csv(tmp_path / 'train.csv', None, text=text,
                    encoding='utf-8-sig' if variant == 'bom' else 'utf-8')
  flag = {'bom': [], 'semicolon': ['--csv-delimiter', ';'],
          'tab': ['--csv-delimiter', 'tab']}[variant]
  status = _main('--module-file', SPEC_MODULE, '--train-data', path,
                 '--output-dir', str(tmp_path / 'out'), '--steps', '5', *flag)
  assert status == 0, capsys.readouterr().err[-2000:]


@pytest.mark.parametrize('case, message', [
    ('columns', r"{eval} has other columns than the schema inferred from the "
     r"train data: missing \['body_mass_g'\], extra \['mass'\]\."),
    ('kinds', r"{eval}, line 2, column 'body_mass_g': '\d+\.5' is not an "
     r'integer, as the column is int in the schema inferred from the train '
     r"data \(every value of it there is\). Expected the eval data's columns "
     r"of the train data's kinds: an integer."),
    # Told by the first look, before TensorFlow loads (`data.first_look`).
    ('words', r"Column 'body_mass_g' holds numbers in \d+ rows but not in 1: "
     r"{eval}, line 2: 'heavy'\. Expected one kind of value per column: "
     r'numbers\.'),
])
def test_eval_csv_must_match_the_train_data(tmp_path, penguin_csvs, capsys,
                                            case, message):
  """Eval data with other columns or kinds than the train data: named."""
  import re  # pylint: disable=g-import-not-at-top
  rows = [r[:5] for r in _penguin_rows(penguin_csvs[1])]
  if case == 'columns':
    rows[0][4] = 'mass'
  elif case == 'kinds':
    rows[1][4] = rows[1][4] + '.5'
  else:
    rows[1][4] = 'heavy'
  path = _write_csv(tmp_path / 'eval.csv', rows)
  train = _write_csv(tmp_path / 'train.csv',
                     [r[:5] for r in _penguin_rows(penguin_csvs[0])])
  assert _main('--module-file', SPEC_MODULE, '--train-data', train,
               '--eval-data', path, '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert re.search(message.format(eval=re.escape(path)), err), err


def test_a_canned_spec_trains_on_blanks_in_its_features_as_in_a_pipeline(
    tmp_path, penguin_csvs, capsys):
  """One rule of blanks: a canned spec fills a blank feature with 0 (as
  in a pipeline, `CannedSpec.preprocess`), on the command too, and the
  command says so; its label still cannot be blank."""
  module = module_file(tmp_path, 'penguins', """
      from generic_trainer.canned import DNNClassifierSpec

      class Penguins(DNNClassifierSpec):
        label_key = 'species'
        hidden_units = [4]
      """)
  lines = _penguin_text(penguin_csvs, rows=80).splitlines()
  for line in (3, 7):
    fields = lines[line].split(',')
    fields[1] = ''
    lines[line] = ','.join(fields)
  path = _csv(tmp_path / 'train.csv', '\n'.join(lines) + '\n')
  assert _main('--module-file', module, '--train-data', path, '--output-dir',
               str(tmp_path / 'out'), '--steps', '3') == 0
  err = capsys.readouterr().err
  assert ("missing values: TrainSpec Penguins fills them with 0 (numbers) or "
          "'' (words) while it trains, as in a pipeline: bill_length_mm 2 "
          "('' 2)") in err
  assert (tmp_path / 'out' / 'model' / 'saved_model.pb').exists()
