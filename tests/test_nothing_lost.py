"""Nothing lost: a failed run keeps the earlier model; user code cannot end
or hang the trainer; bad data and settings are named before training."""

import csv
import hashlib
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO, TESTDATA
from conftest import command_env

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _main(*argv):
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  return cli.main(list(argv))


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


def _module(tmp_path, name, source):
  path = tmp_path / f'{name}.py'
  path.write_text(textwrap.dedent(source))
  return str(path)


def _command(*args, timeout=600):
  return subprocess.run([sys.executable, '-m', 'generic_trainer', *args],
                        capture_output=True, text=True, env=command_env(),
                        cwd=REPO, timeout=timeout, check=False)


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


# User code cannot end or hang the trainer.
@pytest.mark.parametrize('call, shown', [
    ('sys.exit(0)', 'sys.exit(0)'),
    ('exit()', 'sys.exit(None)'),
    ('os._exit(0)', 'os._exit(0)'),
])
def test_run_fn_that_ends_the_process_fails_the_run(tmp_path, penguin_csvs,
                                                     call, shown):
  """sys.exit/exit()/os._exit in run_fn: exit 1 with a message, no model."""
  module = _module(tmp_path, 'ends', f'''
      import os, sys

      def run_fn(fn_args):
        {call}
      ''')
  out = tmp_path / 'out'
  proc = _command('--module-file', module, '--train-data', penguin_csvs[0],
                  '--output-dir', str(out))
  assert proc.returncode == 1, proc.stderr[-2000:]
  assert (f"generic-trainer: RunFnError: run_fn (module_file='{module}') "
          f"called {shown}, which would end the trainer's process.") in (
              proc.stderr)
  assert 'published nothing' in proc.stderr
  assert not (out / 'model').exists()


def test_spec_that_exits_fails_the_run(tmp_path, penguin_csvs, capsys):
  """A TrainSpec member calling sys.exit is a failed run, not an exit."""
  module = _module(tmp_path, 'spec_exits', '''
      import sys
      from spec_fixtures import PenguinSpec

      class Exits(PenguinSpec):
        def build_optimizer(self):
          sys.exit(3)
      ''')
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out')) == 1
  assert 'TrainSpec Exits' in capsys.readouterr().err


def test_module_that_parses_the_command_line_at_import(tmp_path, penguin_csvs,
                                                        capsys):
  """A module with argparse at import sees only its own path as argv; when
  its parser exits, the message says to guard it with __main__."""
  module = _module(tmp_path, 'argv_module', '''
      import argparse
      parser = argparse.ArgumentParser()
      parser.add_argument('--epochs', required=True)
      ARGS = parser.parse_args()

      def run_fn(fn_args):
        pass
      ''')
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert (f"generic-trainer: UserModuleError: Importing the module file "
          f"'{module}' called sys.exit(2): the module ended the process "
          'while it was being imported.') in err
  assert "belongs under `if __name__ == '__main__':`" in err
  assert '--module-file' not in err.split('UserModuleError')[0]


def test_run_fn_that_exits_in_a_pipeline_fails_the_execution(trainer_io,
                                                              tmp_path):
  """In a pipeline, SystemExit from run_fn no longer escapes the executor
  (LocalDagRunner's script would exit 0): it is a RunFnError."""
  from generic_trainer.errors import RunFnError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  module = _module(tmp_path, 'exits', '''
      import sys

      def run_fn(fn_args):
        sys.exit(0)
      ''')
  io = trainer_io(module_file=module)
  with pytest.raises(RunFnError, match=r'called sys.exit\(0\)'):
    GenericExecutor().Do(*io)
  assert not os.path.exists(os.path.join(io[1]['model'][0].uri,
                                         'Format-Serving'))


@pytest.mark.slow
def test_threads_left_running_do_not_keep_the_command_alive(tmp_path,
                                                             penguin_csvs):
  """A run_fn that leaves a non-daemon thread: the command publishes, says
  so, and exits instead of waiting forever."""
  module = _module(tmp_path, 'leaves_a_thread', f'''
      import sys, threading, time
      sys.path.insert(0, {TESTDATA!r})
      from records_fn_args import run_fn as _record

      def run_fn(fn_args):
        threading.Thread(target=time.sleep, args=(3600,),
                         name='forever').start()
        _record(fn_args)
      ''')
  out = tmp_path / 'out'
  start = time.monotonic()
  proc = _command('--module-file', module, '--train-data', penguin_csvs[0],
                  '--output-dir', str(out), timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert ('Note: user code left 1 thread(s) running (forever); exiting '
          'without waiting for them.') in proc.stderr
  assert (out / 'model' / 'saved_model.pb').is_file()
  assert time.monotonic() - start < 240


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
     r'integer, as the column is int in the schema the data must follow'),
])
def test_eval_csv_must_match_the_train_data(tmp_path, penguin_csvs, capsys,
                                            case, message):
  """Eval data with other columns or kinds than the train data: named."""
  import re  # pylint: disable=g-import-not-at-top
  rows = [r[:5] for r in _penguin_rows(penguin_csvs[1])]
  if case == 'columns':
    rows[0][4] = 'mass'
  else:
    rows[1][4] = rows[1][4] + '.5'
  path = _write_csv(tmp_path / 'eval.csv', rows)
  train = _write_csv(tmp_path / 'train.csv',
                     [r[:5] for r in _penguin_rows(penguin_csvs[0])])
  assert _main('--module-file', SPEC_MODULE, '--train-data', train,
               '--eval-data', path, '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert re.search(message.format(eval=re.escape(path)), err), err


def test_schema_that_does_not_parse_names_the_line(tmp_path, penguin_csvs,
                                                   capsys):
  """A schema file with a typo: the file and line, not a bare ParseError."""
  schema = tmp_path / 'schema.pbtxt'
  schema.write_text('feature {\n  name: "species"\n  type: INTEGER\n}\n')
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--schema', str(schema), '--output-dir',
               str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert (f'InputArtifactError: The schema file {schema} does not parse, at '
          'line 3, column 9: ') in err
  assert 'has no value named INTEGER' in err


def _penguin_records(tmp_path, penguin_artifacts):
  examples, _ = penguin_artifacts
  return os.path.join(examples.uri, 'Split-train', 'data.gz')


def test_tfrecords_that_hold_no_tf_example(tmp_path, capsys):
  """TFRecords of something else than tf.Example: the file and record."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / 'not_examples.tfrecord')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(b'\xff\xfe this is not a protocol buffer')
  assert _main('--module-file', SPEC_MODULE, '--train-data', path,
               '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert err.startswith(f'generic-trainer: InputArtifactError: {path}, record '
                        '0, is not a tf.Example (DecodeError')
  assert 'Traceback' not in err


def test_truncated_gzip_tfrecords_are_named_before_training(
    tmp_path, penguin_artifacts, capsys):
  """A gzip TFRecord file cut short past its first records: named first."""
  source = _penguin_records(tmp_path, penguin_artifacts)
  with open(source, 'rb') as f:
    data = f.read()
  path = tmp_path / 'cut.gz'
  path.write_bytes(data[:len(data) * 2 // 3])
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(path),
               '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert err.startswith(f'generic-trainer: InputArtifactError: {path} is not '
                        'a readable gzip TFRecord file: ')
  assert 'Traceback' not in err


def test_schema_that_does_not_match_the_data(tmp_path, penguin_artifacts,
                                             capsys):
  """A given schema that says FLOAT where the data holds ints: the file,
  record and feature, before TensorFlow parses anything."""
  examples, schema = penguin_artifacts
  text = open(os.path.join(schema.uri, 'schema.pbtxt')).read()
  wrong = tmp_path / 'schema.pbtxt'
  wrong.write_text(text.replace('name: "body_mass_g"\n  type: INT',
                                'name: "body_mass_g"\n  type: FLOAT'))
  assert 'FLOAT' in wrong.read_text()
  train = _penguin_records(tmp_path, penguin_artifacts)
  assert _main('--module-file', SPEC_MODULE, '--train-data', train,
               '--schema', str(wrong), '--output-dir',
               str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert (f'InputArtifactError: The Split-train data does not match the '
          f'schema (the schema {wrong}): {train}, record 0: feature '
          "'body_mass_g' holds ints; the schema says floats.") in err


def test_component_checks_the_data_against_the_schema(trainer_io, tmp_path,
                                                      penguin_artifacts):
  """The same mismatch through the component (a TrainSpec): named before
  training, nothing published."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  _, schema = penguin_artifacts
  text = open(os.path.join(schema.uri, 'schema.pbtxt')).read()
  wrong = standard_artifacts.Schema()
  wrong.uri = str(tmp_path / 'wrong_schema')
  os.makedirs(wrong.uri)
  with open(os.path.join(wrong.uri, 'schema.pbtxt'), 'w') as f:
    f.write(text.replace('name: "species"\n  type: INT',
                         'name: "species"\n  type: BYTES'))
  io = trainer_io(module_file=SPEC_MODULE)
  io[0]['schema'] = [wrong]
  with pytest.raises(InputArtifactError, match=(
      r"The train data does not match the schema \(.*wrong_schema.*\): .*"
      r"Split-train.*record 0: feature 'species' holds ints; the schema says "
      r'bytes')):
    GenericExecutor().Do(*io)


# Settings that cannot work are refused before training.
@pytest.mark.parametrize('setting, message', [
    ({'early_stopping': {'monitor': 'val_auc', 'patience': 1}},
     "TrainSpec.early_stopping monitors 'val_auc', which the training does "
     'not log. Expected one of: loss, sparse_categorical_accuracy, val_loss, '
     'val_sparse_categorical_accuracy'),
    ({'checkpoint': {'best_only': True, 'monitor': 'val_acc'}},
     "TrainSpec.checkpoint monitors 'val_acc', which the training does not "
     'log.'),
])
def test_monitored_metric_must_exist(tmp_path, penguin_csvs, setting,
                                     message):
  """Early stopping or a best-only checkpoint on a metric the model does not
  log is refused before the first step (Keras would only warn)."""
  import re  # pylint: disable=g-import-not-at-top
  from generic_trainer import Estimator, SpecError  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  spec = type('Watching', (PenguinSpec,), dict(setting))
  est = Estimator(spec, str(tmp_path))
  with pytest.raises(SpecError, match=re.escape(message)):
    est.train(penguin_csvs[0], eval_data=penguin_csvs[1], steps=4)
  assert est.spec.optimizer.iterations.numpy() == 0


def test_monitor_check_after_the_first_epoch():
  """For models whose log names are not known before training, the first
  epoch's logs decide."""
  from generic_trainer import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers.monitor_check import MonitorCheck  # pylint: disable=g-import-not-at-top
  check = MonitorCheck({'early_stopping': 'val_auc'})
  check.on_train_begin()
  with pytest.raises(SpecError, match=(
      r"TrainSpec.early_stopping monitors 'val_auc', which the training does "
      r'not log. Expected one of: loss, val_loss')):
    check.on_epoch_end(0, {'loss': 1.0, 'val_loss': 1.0})
  check.on_epoch_end(1, {})  # Checked once.


def test_train_step_that_returns_no_logs(tmp_path, penguin_csvs):
  """A custom train_step that forgets to return the logs: our message, not
  Keras's internals."""
  from generic_trainer import Estimator, SpecError  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top

  class NoLogs(PenguinSpec):
    def train_step(self, model, data):
      model.optimizer.iterations.assign_add(1)

  with pytest.raises(SpecError, match=(
      r"TrainSpec.train_step must return the logs dict, e.g. \{'loss': loss\}"
      r'.* Received: NoneType None')):
    Estimator(NoLogs, str(tmp_path)).train(penguin_csvs[0], steps=2)


def test_too_many_local_workers_are_refused_before_any_start(monkeypatch):
  """num_workers far above what the machine runs: refused, nothing started."""
  from generic_trainer.system import machine  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  assert local_cluster.capacity(2, 24 << 30) == 4
  assert local_cluster.capacity(16, 4 << 30) == 4
  assert local_cluster.capacity(1, None) == 2
  monkeypatch.setattr(machine, 'cores', lambda: 2)
  monkeypatch.setattr(machine, 'available_memory', lambda: 24 << 30)
  with pytest.raises(InvalidArgumentError, match=(
      r'num_workers=64 would start 64 TensorFlow processes on this machine, '
      r'which can run about 4: 2 core\(s\) and 24.0 GiB of free memory')):
    local_cluster.check_capacity(64)
  local_cluster.check_capacity(4)


def test_executor_refuses_too_many_workers(trainer_io, monkeypatch, tmp_path):
  """The executor checks the machine before it starts a worker."""
  from generic_trainer.system import machine  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import child_process  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(machine, 'cores', lambda: 1)
  monkeypatch.setattr(machine, 'available_memory', lambda: 1 << 30)
  started = []
  monkeypatch.setattr(child_process, 'start',
                      lambda *a, **k: started.append(a))
  io = trainer_io(module_file=os.path.join(TESTDATA, 'records_fn_args.py'),
                  num_workers=2)
  with pytest.raises(InvalidArgumentError, match=r'which can run about 1'):
    GenericExecutor().Do(*io)
  assert not started


@pytest.mark.parametrize('output_dir, message', [
    ('', "--output-dir is empty. Expected a folder for the model and the run "
         "outputs (created if missing). Received: --output-dir=''."),
    ('{tmp}/locked/out', '--output-dir cannot be written: {tmp}/locked, '
     'where it would be created, is not writable by this user.'),
])
def test_output_dir_that_cannot_be_used_is_refused(tmp_path, penguin_csvs,
                                                   capsys, monkeypatch,
                                                   output_dir, message):
  """An empty or unwritable output folder: exit 2 before any work."""
  locked = str(tmp_path / 'locked')
  os.makedirs(locked)
  real_access = os.access
  monkeypatch.setattr(os, 'access', lambda p, m: False if p == locked
                      else real_access(p, m))
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--output-dir', output_dir.format(tmp=tmp_path)) == 2
  assert message.format(tmp=tmp_path) in capsys.readouterr().err
