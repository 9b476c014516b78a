"""Every mistake clear, round three (issue 30): data read as meant or
refused, no raw error from a cause we can name, user code that cannot keep
the process alive; each message with its four parts."""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import PENGUIN_MODULE, REPO
from conftest import command_env
from message_parts import assert_four_parts
from generic_trainer.errors import InvalidArgumentError

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _main(*argv):
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  return cli.main(list(argv))


def _error_line(err: str) -> str:
  """The command's error line in its stderr."""
  return [l for l in err.splitlines() if l.startswith('generic-trainer: ')][0]


def _module(tmp_path, name, source):
  path = tmp_path / f'{name}.py'
  path.write_text(textwrap.dedent(source))
  return str(path)


# Wrong wiring is named at construction.
def test_examples_wired_to_a_schema_channel_is_named_at_construction():
  """examples=schema_gen.outputs['schema']: our error naming the input, the
  type it takes and the type it got, instead of TFX's bare TypeError."""
  from tfx.components import SchemaGen  # pylint: disable=g-import-not-at-top
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  schema_gen = SchemaGen(
      statistics=Channel(type=standard_artifacts.ExampleStatistics))
  with pytest.raises(InvalidArgumentError) as raised:
    GenericTrainer(examples=schema_gen.outputs['schema'],
                   module_file=PENGUIN_MODULE)
  message = str(raised.value)
  assert message == (
      "'examples' is wired to a channel of Schema artifacts "
      "(SchemaGen.outputs['schema']), which GenericTrainer cannot read as "
      'examples. Expected a channel of Examples artifacts. Received: '
      "examples=a channel of Schema artifacts (SchemaGen.outputs['schema'])."
      " Connect example_gen.outputs['examples'] (or Transform's "
      "outputs['transformed_examples']) to examples.")
  assert isinstance(raised.value.__cause__, TypeError)
  assert_four_parts(message)


@pytest.mark.parametrize('name', ['schema', 'transform_graph', 'base_model',
                                  'hyperparameters', 'statistics'])
def test_every_input_of_the_wrong_type_is_named(name):
  """Any input given a channel of another artifact type is refused with its
  own name and the output to connect."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  examples = Channel(type=standard_artifacts.Examples)
  with pytest.raises(InvalidArgumentError,
                     match=rf"^'{name}' is wired to a channel of Examples "
                     r'artifacts, which GenericTrainer cannot read as') as e:
    GenericTrainer(examples=examples, module_file=PENGUIN_MODULE,
                   **{name: examples})
  assert_four_parts(str(e.value))


def test_a_component_instead_of_its_channel_is_named():
  """examples=example_gen (the component): told to pass its output."""
  from tfx.components import CsvExampleGen  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  example_gen = CsvExampleGen(input_base='/tmp/data')
  with pytest.raises(InvalidArgumentError,
                     match=r"^'examples' is wired to the CsvExampleGen "
                     r"component itself \(its outputs: \['examples'\]\), not "
                     r'one of its output channels') as e:
    GenericTrainer(examples=example_gen, module_file=PENGUIN_MODULE)
  assert_four_parts(str(e.value))


# User code cannot keep the process alive.
_PIPELINE_SCRIPT = '''
import os, sys, textwrap, time
sys.path.insert(0, {tests!r})
from conftest import write_penguin_artifacts
from tfx.types import standard_artifacts
from generic_trainer.component.executor import GenericExecutor

root = {root!r}
examples, schema = write_penguin_artifacts(os.path.join(root, 'data'))
module = os.path.join(root, 'leaves_a_thread.py')
with open(module, 'w') as f:
  f.write(textwrap.dedent("""
      import sys, threading, time
      sys.path.insert(0, {testdata!r})
      from records_fn_args import run_fn as _record

      def run_fn(fn_args):
        threading.Thread(target=time.sleep, args=(3600,),
                         name='forever').start()
        _record(fn_args)
      """))
model = standard_artifacts.Model()
model.uri = os.path.join(root, 'model')
model_run = standard_artifacts.ModelRun()
model_run.uri = os.path.join(root, 'model_run')
GenericExecutor().Do(
    {{'examples': [examples], 'schema': [schema]}},
    {{'model': [model], 'model_run': [model_run]}},
    {{'train_args': '{{"num_steps": 2}}', 'eval_args': '{{"num_steps": 1}}',
     'custom_config': 'null', 'module_file': module}})
print('pipeline done', flush=True)
'''


@pytest.mark.slow
def test_thread_left_by_run_fn_does_not_keep_a_pipeline_script_alive(
    tmp_path):
  """A user's own script that runs the executor (as LocalDagRunner does, in
  its process) exits once the run ends, though run_fn left a non-daemon
  thread sleeping an hour; the log names the thread."""
  from conftest import TESTDATA  # pylint: disable=g-import-not-at-top
  script = tmp_path / 'my_pipeline.py'
  script.write_text(_PIPELINE_SCRIPT.format(
      tests=os.path.join(REPO, 'tests'), root=str(tmp_path),
      testdata=TESTDATA))
  start = time.monotonic()
  proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                        text=True, env=command_env(), cwd=str(tmp_path),
                        timeout=240, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'pipeline done' in proc.stdout
  assert ('left 1 non-daemon thread(s) running (forever). Expected user code '
          'to join its threads before returning') in proc.stderr
  assert time.monotonic() - start < 200


def test_stray_threads_become_daemons_and_are_named(caplog):
  """The mechanism itself: a non-daemon thread started by user code is a
  daemon afterwards, and not joined at exit."""
  import threading  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import stray_threads  # pylint: disable=g-import-not-at-top
  before = set(threading.enumerate())
  stop = threading.Event()
  thread = threading.Thread(target=stop.wait, name='uploader')
  thread.start()
  try:
    assert stray_threads.release(before, 'run_fn') == ['uploader']
    assert thread.daemon
    assert thread._tstate_lock not in threading._shutdown_locks  # pylint: disable=protected-access
  finally:
    stop.set()
    thread.join()
  assert 'run_fn left 1 non-daemon thread(s) running (uploader)' in (
      caplog.text)


# CSV data is read as meant, or refused naming what was found.
_PENGUIN_HEADER = ('species,bill_length_mm,bill_depth_mm,flipper_length_mm,'
                   'body_mass_g')


def _penguin_text(penguin_csvs, rows=None):
  with open(penguin_csvs[0]) as f:
    lines = [','.join(l.rstrip('\n').split(',')[:5]) for l in f]
  return '\n'.join(lines[:rows] if rows else lines) + '\n'


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
  """A European spreadsheet (';' and '39,1'): both are said."""
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import csv_data  # pylint: disable=g-import-not-at-top
  path = tmp_path / 'eu.csv'
  path.write_text('species;bill_length_mm\n0;39,1\n1;40,2\n')
  with pytest.raises(InputArtifactError,
                     match=r"Received: ';'-separated lines, with decimal "
                     r"commas \(39,1\)\. Pass --csv-delimiter ';' to read it "
                     r"with ';' and re-save the numbers with decimal points"):
    csv_data.read(str(path))
  table = csv_data.read(str(path), ';')
  with pytest.raises(InputArtifactError) as e:
    csv_data.infer_kinds([table])
  assert str(e.value) == (
      "Column 'bill_length_mm' holds numbers written with a decimal comma (2 "
      f"rows; first {path}, line 2: '39,1'), which would be read as words. "
      "Expected numbers with a decimal point (39.1). Received: '39,1'. "
      'Re-save the file with decimal points (pandas: pd.read_csv(path, '
      "decimal=',').to_csv(new_path, index=False)).")
  assert_four_parts(str(e.value))


@pytest.mark.parametrize('value, delimiter', [
    (';', ';'), ('tab', '\t'), ('|', '|'), (',', ',')])
def test_csv_delimiter_flag_names_the_delimiter(value, delimiter):
  """--csv-delimiter takes the character or the word tab."""
  from generic_trainer.data import csv_dialect  # pylint: disable=g-import-not-at-top
  assert csv_dialect.parse_delimiter(value) == delimiter


def test_unknown_csv_delimiter_flag_exits_2(tmp_path, penguin_csvs, capsys):
  """--csv-delimiter of more than one character: exit 2, four parts."""
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'),
               '--csv-delimiter', ';;') == 2
  err = capsys.readouterr().err
  assert err == (
      'generic-trainer: error: --csv-delimiter must be one character of , ; '
      '| or the word tab. Expected the character between the fields. '
      "Received: --csv-delimiter=';;'. Pass one of those, or leave it out "
      'for commas.\n')


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


# A label of the wrong kind is named before training.
def test_class_names_in_a_label_of_class_indices_are_named(
    tmp_path, capsys):
  """'Adelie' in the label a SparseCategoricalCrossentropy spec reads:
  the column, what it takes, and how to map names to indices."""
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  path = write_penguin_csv(str(tmp_path / 'named'), string_labels=True)
  assert _main('--module-file', SPEC_MODULE, '--train-data', path,
               '--output-dir', str(tmp_path / 'out'), '--steps', '5') == 1
  message = _error_line(capsys.readouterr().err)
  assert message == (
      "generic-trainer: SpecError: The label column 'species' holds names "
      "('Adelie', 'Chinstrap', 'Gentoo'), but the loss "
      'SparseCategoricalCrossentropy takes numbers: class indices 0..N-1 for '
      'a classifier. Expected class indices (0, 1, 2...) or a vocabulary that '
      "maps the names to them. Received: strings in 'species' ('Adelie', "
      "'Chinstrap', 'Gentoo'). Map the names to indices: declare a head with "
      "the vocabulary (head = heads.MultiClassHead(label_vocabulary=['Adelie'"
      ", 'Chinstrap', 'Gentoo']), with build_model returning the body), use a "
      'canned spec (canned.DNNClassifierSpec reads the classes from the '
      'data), or write the indices into the data (a keras.layers.StringLookup '
      'in a Transform preprocessing_fn).')
  assert_four_parts(message)


def test_fractions_in_a_label_of_class_indices_are_named():
  """0.5 for a loss of class indices: use a regression loss."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import label_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError) as e:
    label_checks.check_kind('mass', np.array([0.5, 1.0]),
                            'sparse_categorical_crossentropy', 3)
  assert str(e.value) == (
      "The label column 'mass' holds fractions ([0.5]), but the loss "
      'sparse_categorical_crossentropy takes class indices. Expected whole '
      'numbers 0..N-1 for a classifier. Received: floats such as 0.5. Use a '
      'regression loss (e.g. keras.losses.MeanSquaredError with one output '
      'unit) for a number to predict, or write class indices into the label '
      'column.')


def test_schema_types_that_disagree_with_the_data_are_named(
    tmp_path, penguin_csvs, capsys):
  """A --schema saying BYTES for a column of numbers the model casts:
  the feature, both sides and the fix, not TensorFlow's UnimplementedError
  from a function_node."""
  fields = ''.join(
      f'feature {{ name: "{name}" type: {kind} presence {{ min_fraction: 1.0 '
      '} shape { dim { size: 1 } } }\n' for name, kind in (
          ('species', 'INT'), ('bill_length_mm', 'BYTES'),
          ('bill_depth_mm', 'FLOAT'), ('flipper_length_mm', 'INT'),
          ('body_mass_g', 'INT')))
  schema = tmp_path / 'schema.pbtxt'
  schema.write_text(fields)
  path = tmp_path / 'train.csv'
  path.write_text(_penguin_text(penguin_csvs))
  out = tmp_path / 'out'
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(path),
               '--schema', str(schema), '--output-dir', str(out),
               '--steps', '5') == 1
  err = capsys.readouterr().err
  message = [l for l in err.splitlines() if 'generic-trainer:' in l][0]
  assert message.startswith(
      "generic-trainer: InputArtifactError: The schema and the data disagree "
      f"on ['bill_length_mm']: {out}/schema/schema.pbtxt says BYTES "
      '(strings), the data holds numbers, and the model casts them to '
      'numbers, which TensorFlow cannot do (Cast string to float is not '
      "supported). Expected the type FLOAT or INT for ['bill_length_mm'] in ")
  assert ('Set `type: FLOAT` (or INT) for those features in the schema, or '
          'leave --schema out to infer the types from the data.') in message
  assert 'function_node' not in err and 'Traceback' not in err
  assert_four_parts(message)


# No raw error from a cause we can name.
def test_handlers_returning_a_plain_function_is_named(tmp_path, penguin_csvs,
                                                      capsys):
  """handlers() returning [a function]: a SpecError naming the member and
  LambdaCallback, not Keras's AttributeError."""
  module = _module(tmp_path, 'plain_handler', '''
      from spec_fixtures import PenguinSpec

      def log_epoch(epoch, logs=None):
        print(epoch, logs)

      class Logged(PenguinSpec):
        def handlers(self):
          return [log_epoch]
      ''')
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '4') == 1
  message = _error_line(capsys.readouterr().err)
  assert message == (
      'generic-trainer: SpecError: Logged.handlers() returned, at index 0, '
      'the function log_epoch, which is not a Keras callback. Expected '
      'keras.callbacks.Callback instances (objects with on_epoch_end, '
      'set_model...). Received: the function log_epoch. Return instances '
      'only: wrap a plain function in keras.callbacks.LambdaCallback('
      'on_epoch_end=fn), or subclass keras.callbacks.Callback.')
  assert_four_parts(message)


class _Spec:
  """A stand-in TrainSpec for the member checks."""


@pytest.mark.parametrize('member, value, message', [
    ('handlers', lambda: None, r'^_Spec.handlers\(\) returned the function '
     r'.*<lambda>\. Expected a list of Keras callbacks'),
    ('handlers', [dict], r'at index 0, the class dict \(not an instance of '
     r'it\).*Return instances only: call the class'),
    ('model', None, r'^_Spec.build_model\(\) returned None\. Expected a Keras '
     r'model.*Return the model, e\.g\.'),
    ('optimizer', None, r'^_Spec.build_optimizer\(\) returned None\.'),
    ('loss', None, r'^_Spec.build_loss\(\) returned None\.'),
    ('metrics', 'accuracy', r"^_Spec.build_metrics\(\) returned a str "
     r"\('accuracy'\)\..*Return a list, e\.g\. `return \['accuracy'\]`"),
])
def test_spec_members_of_the_wrong_kind_are_named(member, value, message):
  """Each build_* member and handlers() returning the wrong kind of value:
  the member, what it takes and what it got."""
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.trainspec import member_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError, match=message) as e:
    getattr(member_checks, member)(_Spec(), value)
  assert_four_parts(str(e.value))


_FULL_DISK_RUN_FNS = {
    # h5py on a disk that is full when the file is created: OSError ENOSPC.
    'h5py_create': '''
        import os
        import h5py

        def run_fn(fn_args):
          os.makedirs(fn_args.serving_model_dir, exist_ok=True)
          path = os.path.join(fn_args.serving_model_dir, 'model.h5')
          os.symlink('/dev/full', path)
          with h5py.File(path, 'w') as f:
            f['weights'] = [1.0] * 1000
        ''',
    # TensorFlow's writers: ResourceExhaustedError, 'No space left on
    # device'.
    'tf_write': '''
        import os
        import tensorflow as tf

        def run_fn(fn_args):
          os.makedirs(fn_args.serving_model_dir, exist_ok=True)
          path = os.path.join(fn_args.serving_model_dir, 'variables.data')
          os.symlink('/dev/full', path)
          with tf.io.gfile.GFile(path, 'wb') as f:
            f.write(b'0' * 100000)
        ''',
    # The disk fills between h5py's first write and its close: HDF5's own
    # words, as Keras's model.save('x.h5') reports them.
    'h5py_flush': '''
        def run_fn(fn_args):
          raise RuntimeError(
              "Unable to synchronously close file (file write failed: time = "
              "..., filename = '/tmp/model.h5', file descriptor = 5, errno = "
              "28, error message = 'No space left on device') (Disable slist "
              "on flush dest failure failed)")
        ''',
}


@pytest.mark.parametrize('case', sorted(_FULL_DISK_RUN_FNS))
def test_a_full_disk_during_export_is_our_error(trainer_io, tmp_path, case):
  """A run_fn whose export hits a full disk (a real ENOSPC through h5py,
  or HDF5's flush failure): a StorageError saying to free space, with
  h5py's error as the cause; nothing published."""
  from generic_trainer.errors import StorageError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  module = _module(tmp_path, f'full_{case}', _FULL_DISK_RUN_FNS[case])
  io = trainer_io(module_file=module)
  with pytest.raises(StorageError) as e:
    GenericExecutor().Do(*io)
  message = str(e.value)
  assert message.startswith(
      f"The disk filled while run_fn (module_file='{module}') wrote ")
  assert ('Expected free space for the checkpoints and the export. '
          'Received: no space left') in message
  assert ('Free space on that disk, or point the output (--output-dir, or '
          'the pipeline root) at a disk with room, and run again; nothing '
          'was published, and an earlier model is unchanged.') in message
  assert type(e.value.__cause__).__name__ in (
      'OSError', 'RuntimeError', 'ResourceExhaustedError')
  assert isinstance(e.value, OSError)
  assert_four_parts(message)
  assert not os.path.exists(os.path.join(io[1]['model'][0].uri,
                                         'Format-Serving', 'model.h5'))


def test_examples_of_a_csv_split_at_the_wrong_delimiter_are_refused(
    trainer_io, tmp_path):
  """In a pipeline, CsvExampleGen split a ';' file at commas: one feature
  named after the whole header. The trainer refuses it before run_fn, naming
  ';' and what to do."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from conftest import TESTDATA  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / 'examples')
  examples.split_names = '["train", "eval"]'
  name = 'species;bill_length_mm;body_mass_g'
  for split in ('train', 'eval'):
    os.makedirs(os.path.join(examples.uri, f'Split-{split}'))
    path = os.path.join(examples.uri, f'Split-{split}', 'data.gz')
    with tf.io.TFRecordWriter(path, options='GZIP') as writer:
      for line in ('0;39.1;3750', '1;46.5;3500'):
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[line.encode()]))})).SerializeToString())
  io = trainer_io(module_file=os.path.join(TESTDATA, 'records_fn_args.py'))
  io[0]['examples'] = [examples]
  del io[0]['schema']
  with pytest.raises(InputArtifactError) as e:
    GenericExecutor().Do(*io)
  message = str(e.value)
  assert message.endswith(
      "record 0: the feature 'species;bill_length_mm;body_mass_g' is a whole "
      "CSV header: the CSV was split at commas, but it is separated by ';'. "
      'Expected one feature per column (species, bill_length_mm, '
      "body_mass_g). Received: one feature holding whole lines ('0;39.1;"
      "3750'). Re-save the CSV with commas (pandas: pd.read_csv(path, "
      "sep=';').to_csv(new_path, index=False)) and run ExampleGen again: "
      'CsvExampleGen splits at commas only.')
  assert_four_parts(message)
  assert not os.path.exists(os.path.join(io[1]['model_run'][0].uri,
                                         'fn_args.json'))


def test_preprocess_that_returns_none_is_named(tmp_path, penguin_csvs,
                                               capsys):
  """preprocess() without its return: the member and the fix, not a
  TypeError from inside tf.data."""
  module = _module(tmp_path, 'no_return', '''
      from spec_fixtures import PenguinSpec

      class Forgot(PenguinSpec):
        def preprocess(self, features):
          features = dict(features)
      ''')
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '4') == 1
  message = _error_line(capsys.readouterr().err)
  assert message == (
      'generic-trainer: SpecError: Forgot.preprocess() returned None. '
      'Expected the features the model reads: a dict of tensors by name. '
      'Received: None. Return the dict (`return features`) at the end of '
      'preprocess().')


def test_an_error_we_cannot_name_is_said_without_a_traceback(
    tmp_path, penguin_csvs, capsys, monkeypatch):
  """Whatever escapes every check still reaches the user in four parts,
  exit 1, its traceback in a file the message names."""
  from generic_trainer.command import run as command_run  # pylint: disable=g-import-not-at-top

  def fails(request, starting=None):
    raise KeyError('boom')

  monkeypatch.setattr(command_run, 'run', fails)
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert 'Traceback' not in err
  message = _error_line(err)
  assert message.startswith(
      "generic-trainer: KeyError: 'boom'. This error has no message of ours. "
      'Expected the run to train, or to stop with an error that says what to '
      'do. Received: KeyError. Its traceback is in ')
  path = message.split('Its traceback is in ')[1].split('. Check')[0]
  with open(path) as f:
    assert 'KeyError' in f.read()
  os.remove(path)
  assert_four_parts(message)


def _bytes_examples(tmp_path, rows):
  """An Examples artifact whose train and eval splits hold `rows` ({name:
  text}) as bytes features, as CsvExampleGen writes a column of words."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / 'examples')
  examples.split_names = '["train", "eval"]'
  for split in ('train', 'eval'):
    os.makedirs(os.path.join(examples.uri, f'Split-{split}'))
    path = os.path.join(examples.uri, f'Split-{split}', 'data.gz')
    with tf.io.TFRecordWriter(path, options='GZIP') as writer:
      for row in rows:
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[value.encode()])) for name, value in row.items()}
        )).SerializeToString())
  return examples


def test_numbers_with_na_read_as_strings_by_example_gen_are_refused(
    trainer_io, tmp_path):
  """In a pipeline, CsvExampleGen read a column of numbers with 'NA' as
  strings: refused before run_fn, naming the column and the spelling."""
  from conftest import TESTDATA  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples = _bytes_examples(tmp_path, [
      {'island': 'Biscoe', 'bill_length_mm': '39.1'},
      {'island': 'Dream', 'bill_length_mm': 'NA'}])
  io = trainer_io(module_file=os.path.join(TESTDATA, 'records_fn_args.py'))
  io[0]['examples'] = [examples]
  del io[0]['schema']
  with pytest.raises(InputArtifactError) as e:
    GenericExecutor().Do(*io)
  message = str(e.value)
  assert message.endswith(
      "the column(s) ['bill_length_mm'] hold numbers, and missing values "
      "spelled out as words: 'bill_length_mm' ('NA'); CsvExampleGen read "
      'those columns as strings, so a model would take the numbers as names '
      'or fail to cast them. Expected numbers, with a missing value left '
      "empty. Received: string features ['bill_length_mm']. Leave missing "
      'values empty in the CSV (pandas: pd.read_csv(path).to_csv(new_path, '
      'index=False) writes NA as an empty cell) and run ExampleGen again.')
  assert_four_parts(message)


def test_negative_labels_for_a_loss_of_class_indices_are_named():
  """-1/1 labels for SparseCategoricalCrossentropy: write 0..N-1."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import label_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError) as e:
    label_checks.check_kind('churned', np.array([-1, 1]),
                            'sparse_categorical_crossentropy', 2)
  assert str(e.value) == (
      "The label column 'churned' holds negative values ([-1.0]), but the "
      'loss sparse_categorical_crossentropy takes class indices from 0. '
      'Expected whole numbers 0..N-1. Received: -1. Write the classes as '
      '0..N-1 (e.g. -1/1 as 0/1), or use a loss for numbers.')
  assert_four_parts(str(e.value))


def test_an_optimizer_keras_does_not_know_is_named(tmp_path, penguin_csvs,
                                                   capsys):
  """build_optimizer() returning 'adamm': a SpecError naming the members,
  not a RunFnError around Keras's ValueError."""
  module = _module(tmp_path, 'typo', '''
      from spec_fixtures import PenguinSpec

      class Typo(PenguinSpec):
        def build_optimizer(self):
          return 'adamm'
      ''')
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '4') == 1
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(
      "generic-trainer: SpecError: Keras cannot compile Typo's model: "
      'ValueError: ')
  assert "Could not interpret optimizer identifier: 'adamm'" in message or (
      'Could not interpret optimizer identifier: adamm' in message)
  assert "Received: optimizer=a str ('adamm'), loss=a " in message
  assert message.endswith(
      'Fix the name or object in build_optimizer(), build_loss() or '
      'build_metrics().')
  assert_four_parts(message)


def test_a_module_file_given_as_a_path_object_is_read_as_meant():
  """module_file=pathlib.Path(...): taken as its str, not TFX's TypeError."""
  import pathlib  # pylint: disable=g-import-not-at-top
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                           module_file=pathlib.Path(PENGUIN_MODULE))
  assert trainer.exec_properties['module_file'] == PENGUIN_MODULE


def test_a_parameter_of_the_wrong_type_is_named():
  """module_path=5: our error naming the parameter and the type, not TFX's
  bare TypeError from the spec."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  with pytest.raises(InvalidArgumentError) as e:
    GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                   module_path=5)
  assert str(e.value) == (
      "'module_path' has the wrong type for GenericTrainer. Expected <class "
      "'str'>. Received: module_path=5. Pass a value of that type (a path as "
      'a str).')
  assert isinstance(e.value.__cause__, TypeError)
  assert_four_parts(str(e.value))
