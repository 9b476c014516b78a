"""The generic-trainer command: arguments, the TrainSpec and run_fn paths."""

import ast
import io
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from command_line import error_line as _error_line
from command_line import main as _main
from command_line import module_file as _module_file
from conftest import PENGUIN_MODULE, REPO, TESTDATA
from conftest import command_env
from conftest import command_env as _env
from message_parts import assert_four_parts

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')
CANNED_MODULE = os.path.join(REPO, 'module_files', 'penguin_canned.py')
FIRST_STEP = re.compile(r'^first training step after (\d+\.\d\d) s$', re.M)
# Imported by `tfx.components.trainer.fn_args_utils`, `tfx.v1`, TFXIO's
# TFExampleRecord, TFT's schema_utils: seconds a TrainSpec run (without a
# Transform graph) does not need.
HEAVY_MODULES = ('apache_beam', 'tfx.components.trainer.fn_args_utils',
                 'tfx.dsl', 'tfx.v1', 'tensorflow_transform')


def _command(*args, importtime=False):
  """`python -m generic_trainer ARGS` in a subprocess."""
  flags = ['-X', 'importtime'] if importtime else []
  return subprocess.run([sys.executable, *flags, '-m', 'generic_trainer',
                         *args], capture_output=True, text=True, env=_env(),
                        cwd=REPO, timeout=600, check=False)


def _parse_fresh(argv, cwd):
  """main(argv) in a fresh process: (exit status, stderr, TF imported?)."""
  code = ('import json, sys\nfrom generic_trainer.command import cli\n'
          'status = cli.main(json.loads(sys.argv[1]))\n'
          "print(json.dumps([status, 'tensorflow' in sys.modules]))")
  proc = subprocess.run([sys.executable, '-c', code, json.dumps(argv)],
                        capture_output=True, text=True, env=_env(), cwd=cwd,
                        timeout=120, check=False)
  status, tensorflow = json.loads(proc.stdout.strip().splitlines()[-1])
  return status, proc.stderr, tensorflow


# Bad arguments: exit 2 with the exact message, before TensorFlow loads.
# Each case replaces some flags of a good command line; {tmp} is the test's
# folder (and working directory), where notes.txt, x.tfrecord.gz and
# mods/json.py exist.
@pytest.mark.parametrize('flags, message', [
    ({'--module-file': ['nope.py']},
     "--module-file does not exist. Expected a Python file (.py) that "
     "defines a TrainSpec or a run_fn. Received: --module-file='nope.py' "
     '(working directory {tmp}). Check the path; an absolute path avoids '
     'surprises.'),
    ({'--module-file': ['{tmp}/notes.txt']},
     '--module-file must be a Python source file, ending in .py. Received: '
     "--module-file='{tmp}/notes.txt'. Pass the module's .py file."),
    ({'--train-data': ['missing/*.csv']},
     '--train-data matched no file. Expected a CSV file (*.csv) or TFRecord '
     'files of tf.Example (*.tfrecord, *.gz), a glob, or several '
     "--train-data. Received: --train-data='missing/*.csv' (working "
     "directory {tmp}). Check the path; quote a glob ('data/*.csv') so that "
     'the shell passes it as it is.'),
    ({'--train-data': ['{csv}', '{tmp}/x.tfrecord.gz']},
     '--train-data mixes CSV and TFRecord files. Expected CSV files only or '
     "TFRecord files only. Received: --train-data=['{csv}', "
     "'{tmp}/x.tfrecord.gz'], matching 1 CSV and 1 other file(s). Pass one "
     'kind of file.'),
    ({'--schema': ['nope.pbtxt']},
     '--schema does not exist. Expected a schema.pbtxt (a TFMD Schema in '
     "text format, as SchemaGen writes it). Received: --schema='nope.pbtxt' "
     '(working directory {tmp}). Check the path, or leave --schema out to '
     'infer the schema from the train data.'),
    ({'--output-dir': ['{tmp}/notes.txt']},
     '--output-dir is a file. Expected a folder (created if missing). '
     "Received: --output-dir='{tmp}/notes.txt'. Choose another path."),
    ({'--steps': ['ten']},
     '--steps must be positive, or unset to read the split once (0 is '
     "unset, as TFX's Trainer reads it). Received: --steps='ten'. Set a "
     'positive number, or leave it unset.'),
    ({'--eval-steps': ['-1']},
     '--eval-steps must be positive, or unset to read the split once (0 is '
     "unset, as TFX's Trainer reads it). Received: --eval-steps='-1'. Set a "
     'positive number, or leave it unset.'),
    ({'--hparams': ['{{learning_rate: 0.1}}']},
     '--hparams must be a JSON object such as \'{{"learning_rate": 0.01}}\'. '
     "Received: --hparams='{{learning_rate: 0.1}}', which is not JSON "
     '(Expecting property name enclosed in double quotes: line 1 column 2 '
     '(char 1)). Quote the whole object for the shell and use double quotes '
     'inside it.'),
    ({'--hparams': ['[0.1]']},
     '--hparams must be a JSON object such as \'{{"learning_rate": 0.01}}\'. '
     "Received: --hparams='[0.1]', a JSON list. Wrap the values in an object "
     'that names them.'),
    ({'--keras-version': ['2']},
     '--keras-version must be one of keras3, tf_keras, or unset (whatever '
     'tf.keras is in the process). Received: --keras-version=2. Use '
     'tf_keras for module files written for tf.keras 2, keras3 for Keras '
     '3.'),
    ({'--backend': ['torch']},
     '--backend must be one of tensorflow, jax, or unset (the TrainSpec\'s '
     'own backend, else TensorFlow). Received: --backend=torch. Leave it '
     "out to train on the TrainSpec's backend, or set one of those."),
    ({'--backend': ['jax'], '--keras-version': ['tf_keras']},
     '--backend=jax trains with Keras 3 on JAX, but --keras-version='
     'tf_keras asks for tf.keras 2, which runs on TensorFlow only. '
     'Expected Keras 3 on JAX. Received: --backend=jax, '
     '--keras-version=tf_keras. Leave '
     '--keras-version unset (or keras3) to train on JAX, or train on '
     'TensorFlow (--backend=tensorflow).'),
    ({'--progress': ['fancy']},
     "--progress must be auto, bar or lines. Received: --progress='fancy'. "
     "Use bar for Keras's progress bar, lines for a log line per epoch."),
    ({'--run-fn': ['penguin_spec.PenguinSpec']},
     '--run-fn must be the name of a top-level function or TrainSpec class '
     'of the module file, such as run_fn or PenguinSpec. Received: '
     "--run-fn='penguin_spec.PenguinSpec'. Pass a plain name, without the "
     'module.'),
    ({'--run-fn': ['NoSuchSpec']},
     '--run-fn names `NoSuchSpec`, which {spec} does not define at top '
     'level. Expected a function taking fn_args or a TrainSpec class. '
     "Received: --run-fn='NoSuchSpec'; the module defines: FEATURES, "
     'PenguinSpec, TrainSpec, keras. Pass one of those.'),
], ids=['missing-module', 'module-not-py', 'no-data', 'mixed-data',
        'missing-schema', 'output-is-a-file', 'bad-steps', 'bad-eval-steps',
        'hparams-not-json', 'hparams-not-an-object', 'bad-keras-version',
        'bad-backend', 'jax-with-tf-keras', 'bad-progress', 'dotted-run-fn',
        'unknown-run-fn'])
def test_bad_argument_exits_2_before_tensorflow(tmp_path, penguin_csvs, flags,
                                                message):
  """A bad argument: exit 2, the exact message, TensorFlow never imported."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  (tmp_path / 'notes.txt').write_text('notes')
  (tmp_path / 'x.tfrecord.gz').write_bytes(b'')
  (tmp_path / 'mods').mkdir()
  (tmp_path / 'mods' / 'json.py').write_text('def train(fn_args):\n  pass\n')
  names = {'tmp': tmp_path, 'csv': penguin_csvs[0], 'spec': SPEC_MODULE,
           'json': importlib.util.find_spec('json').origin}
  command = {'--module-file': [SPEC_MODULE], '--train-data': [penguin_csvs[0]],
             '--output-dir': [str(tmp_path / 'out')]}
  command.update({flag: [v.format(**names) for v in values]
                  for flag, values in flags.items()})
  argv = [arg for flag, values in command.items() for value in values
          for arg in (flag, value)]
  status, stderr, tensorflow = _parse_fresh(argv, cwd=tmp_path)
  assert (status, stderr, tensorflow) == (
      2, f'generic-trainer: error: {message.format(**names)}\n', False)
  assert not (tmp_path / 'out').exists()


def test_input_inside_the_output_folder_is_refused(tmp_path, penguin_csvs):
  """Data inside a folder the run clears would be deleted: exit 2."""
  inside = tmp_path / 'out' / 'data' / 'train.csv'
  inside.parent.mkdir(parents=True)
  (tmp_path / 'out' / '.generic-trainer').write_text('an earlier run')
  inside.write_text(open(penguin_csvs[0]).read())
  status, stderr, _ = _parse_fresh(
      ['--module-file', SPEC_MODULE, '--train-data', str(inside),
       '--output-dir', str(tmp_path / 'out')], cwd=tmp_path)
  assert status == 2
  assert (f'--train-data {inside} lies in {tmp_path}/out/data, which a run '
          'clears first.') in stderr


def test_output_dir_with_folders_of_its_own_is_refused(tmp_path,
                                                      penguin_csvs):
  """An output folder whose data/ no run wrote is not cleared: exit 2."""
  (tmp_path / 'project' / 'data').mkdir(parents=True)
  status, stderr, _ = _parse_fresh(
      ['--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
       '--output-dir', 'project'], cwd=tmp_path)
  assert (status, stderr) == (2, (
      'generic-trainer: error: --output-dir already holds data/, which '
      'generic-trainer did not write and a run would replace. Expected a new '
      'or empty folder, or one an earlier run wrote. Received: '
      "--output-dir='project'. Choose another --output-dir.\n"))
  assert (tmp_path / 'project' / 'data').is_dir()


def test_missing_required_argument_exits_2():
  """argparse's own errors exit 2 and point to --help."""
  proc = _command('--module-file', SPEC_MODULE)
  assert proc.returncode == 2
  assert proc.stderr.endswith(
      'generic-trainer: error: the following arguments are required: '
      '--train-data, --output-dir. Run `generic-trainer --help` for the '
      'arguments.\n')


def test_python_m_generic_trainer_help():
  """`python -m generic_trainer --help` describes the command, fast."""
  proc = _command('--help')
  assert proc.returncode == 0
  assert proc.stdout.startswith('usage: generic-trainer ')
  assert '--module-file M' in proc.stdout and 'exit status:\n  0 ' in proc.stdout


def test_console_script_is_cli_main():
  """pyproject.toml installs `generic-trainer`, running
  generic_trainer.command.cli.main."""
  import importlib  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  from test_packaging import _pyproject  # pylint: disable=g-import-not-at-top
  scripts = _pyproject()['project']['scripts']
  (name, target), = scripts.items()
  module, _, function = target.partition(':')
  assert name == 'generic-trainer'
  assert getattr(importlib.import_module(module), function) is cli.main


def test_first_step_time_prints_once():
  """FirstStepTime prints the seconds since `started` after batch 0 only."""
  import io  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers.first_step import FirstStepTime  # pylint: disable=g-import-not-at-top
  now = iter([12.5, 13.0])
  stream = io.StringIO()
  timer = FirstStepTime(started=10.0, clock=lambda: next(now), stream=stream)
  timer.on_train_begin()
  timer.on_train_batch_end(0)
  timer.on_train_batch_end(1)
  assert (stream.getvalue(), timer.seconds) == (
      'first training step after 2.50 s\n', 2.5)


# The TrainSpec path, end to end, in a real `python -m generic_trainer`.
@pytest.fixture(scope='module')
def spec_run(tmp_path_factory, penguin_csvs):
  """One run of penguin_spec: (process, output dir), with -X importtime."""
  out = tmp_path_factory.mktemp('spec_run') / 'out'
  proc = _command('--module-file', SPEC_MODULE, '--train-data',
                  penguin_csvs[0], '--eval-data', penguin_csvs[1],
                  '--output-dir', str(out), '--steps', '20', '--progress',
                  'lines', importtime=True)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc, out


@pytest.mark.slow
def test_spec_module_publishes_a_model_that_serves(spec_run):
  """DIR/model is a SavedModel whose serving_default predicts eval data."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  _, out = spec_run
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      str(out / 'data' / 'Split-eval' / 'data.gz'), 'GZIP').take(5)]
  outputs = tf.saved_model.load(str(out / 'model')).signatures[
      'serving_default'](examples=tf.constant(records))
  assert outputs['outputs'].shape == (5, 3)
  assert bool(tf.reduce_all(tf.math.is_finite(outputs['outputs'])))
  assert sorted(os.listdir(out)) == [
      '.generic-trainer', '.generic-trainer.lock', '.models', 'data',
      'model', 'run', 'schema']
  assert not os.path.islink(out / 'model')  # A real folder.


@pytest.mark.slow
def test_spec_module_prints_first_step_and_metrics(spec_run):
  """The first-step line, the final metrics and the paths are printed."""
  proc, out = spec_run
  assert len(FIRST_STEP.findall(proc.stdout)) == 1
  assert re.search(
      r'== Trained TrainSpec PenguinSpec of .*penguin_spec.py: 20 steps in 5 '
      r'epochs of 4 steps, [\d.]+ s of training on Keras 3\.[\d.]+ '
      r'\(backend tensorflow\)\n  train: loss=[\d.]+ '
      r'sparse_categorical_accuracy=[\d.]+\n  eval:  loss=[\d.]+ '
      r'sparse_categorical_accuracy=[\d.]+\n  eval on the --eval-data files\n'
      r'  export validated: loads, has '
      r'serving_default, predicts finite values on 4 eval examples; '
      r"answered TF Serving's requests on every signature \(serving_default: "
      r'Predict, serving_raw: Predict; \d+ requests\)\n',
      proc.stdout), proc.stdout
  assert f'  model:  {out}/model\n' in proc.stdout
  assert 'epoch 5 done in ' in proc.stderr  # --progress lines
  assert 'Traceback' not in proc.stderr
  # No --eval-steps: a TrainSpec evaluates on all the eval data (its eval
  # dataset ends); only a run_fn is given eval steps.
  assert 'Eval steps of a run_fn' not in proc.stderr


@pytest.mark.slow
def test_spec_module_writes_the_run_outputs(spec_run):
  """run/ has history.json, TensorBoard and train_result.json with the time
  to the first step; the schema and data folders are there."""
  proc, out = spec_run
  with open(out / 'run' / 'train_result.json') as f:
    result = json.load(f)
  assert result['steps'] == 20 and result['epochs'] == 5
  assert result['time_to_first_step_s'] == pytest.approx(
      float(FIRST_STEP.search(proc.stdout).group(1)), abs=0.01)
  with open(out / 'run' / 'history.json') as f:
    assert [e['epoch'] for e in json.load(f)] == [1, 2, 3, 4, 5]
  assert os.listdir(out / 'run' / 'tensorboard')
  assert (out / 'schema' / 'schema.pbtxt').is_file()


@pytest.mark.slow
def test_spec_module_imports_no_tfx_pipeline_code_nor_beam(spec_run):
  """The TrainSpec path, export included, never imports fn_args_utils,
  tfx.dsl, tfx.v1, Beam or TensorFlow Transform."""
  proc, _ = spec_run
  imported = {line.rsplit('|', 1)[1].strip()
              for line in proc.stderr.splitlines()
              if line.startswith('import time:')}
  assert 'tensorflow' in imported and 'generic_trainer.loop.runner' in imported
  assert [m for m in HEAVY_MODULES if m in imported] == []


# The run_fn path.
@pytest.mark.slow
def test_run_fn_module_end_to_end(tmp_path, penguin_csvs):
  """penguin_keras trains through the executor; DIR/model serves."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'out'
  proc = _command('--module-file', PENGUIN_MODULE, '--train-data',
                  penguin_csvs[0], '--output-dir', str(out), '--steps', '10',
                  '--eval-steps', '2')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert re.search(r'== Trained `run_fn` of .*penguin_keras.py\n  metrics: '
                   'none recorded', proc.stdout)
  assert sorted(os.listdir(out)) == [
      '.generic-trainer', '.generic-trainer.lock', '.models', 'data',
      'model', 'run', 'schema']
  assert not os.path.islink(out / 'model')  # A real folder.
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      str(out / 'data' / 'Split-eval' / 'data.gz'), 'GZIP').take(3)]
  outputs = tf.saved_model.load(str(out / 'model')).signatures[
      'serving_default'](examples=tf.constant(records))
  assert outputs['outputs'].shape == (3, 3)


def test_run_fn_gets_the_component_fn_args(tmp_path, penguin_csvs, capsys):
  """A run_fn gets TFX's FnArgs over the local data, steps and hparams."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'out'
  status = cli.main([
      '--module-file', os.path.join(TESTDATA, 'records_fn_args.py'),
      '--train-data', penguin_csvs[0], '--eval-data', penguin_csvs[1],
      '--output-dir', str(out), '--steps', '7', '--eval-steps', '2',
      '--hparams', '{"units": 8}'])
  assert status == 0, capsys.readouterr().err[-3000:]
  with open(out / 'run' / 'fn_args.json') as f:
    got = json.load(f)
  assert got['fn_args_class'] == 'tfx.components.trainer.fn_args_utils'
  assert got['train_files'] == [str(out / 'data' / 'Split-train' / '*')]
  assert got['eval_files'] == [str(out / 'data' / 'Split-eval' / '*')]
  assert (got['train_steps'], got['eval_steps']) == (7, 2)
  assert got['schema_path'] == str(out / 'schema' / 'schema.pbtxt')
  assert got['hyperparameters'] == {'units': 8}
  assert got['model_run_dir'] == str(out / 'run')
  assert (out / 'model' / 'saved_model.pb').is_file()
  assert not (out / '.publishing').exists()


def test_a_run_fn_without_steps_gets_one_pass_of_the_train_rows(
    tmp_path, penguin_csvs, capsys):
  """Without --steps a run_fn gets fn_args.train_steps: the train rows once
  in batches of 32, said in a line before it trains, and the line names
  the Keras it trains on."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'out'
  status = cli.main([
      '--module-file', os.path.join(TESTDATA, 'records_fn_args.py'),
      '--train-data', penguin_csvs[0], '--eval-data', penguin_csvs[1],
      '--output-dir', str(out)])
  err = capsys.readouterr().err
  assert status == 0, err[-3000:]
  rows = sum(1 for _ in tf.data.TFRecordDataset(
      str(out / 'data' / 'Split-train' / 'data.gz'), 'GZIP'))
  steps = -(-rows // 32)
  with open(out / 'run' / 'fn_args.json') as f:
    assert json.load(f)['train_steps'] == steps
  assert (f'Train steps of a run_fn: fn_args.train_steps={steps}, as '
          f'--steps was not given: the {rows} train rows once in batches of '
          "32, Keras's default batch size (a run_fn reading other batch "
          'sizes trains on more or fewer rows per epoch; a repeating train '
          'dataset would never end with None). --steps N sets it.') in err
  assert re.search(r'Training the run_fn on Keras 3\.\d+\.\d+ \(backend '
                   r'tensorflow\)\.', err), err[-3000:]


def test_tf_keras_refusing_an_endless_dataset_is_told_to_set_steps(
    tmp_path, penguin_csvs, capsys):
  """tf_keras's "infinite dataset" refusal (a run_fn that fits a repeating
  dataset with steps_per_epoch=None) is answered with the steps to set,
  --steps first, not "fix the code"."""
  module = _module_file(tmp_path, 'endless', """
      import tensorflow as tf
      import tf_keras

      def run_fn(fn_args):
        data = tf.data.Dataset.from_tensor_slices(([[0.0]], [[0.0]])).repeat()
        model = tf_keras.Sequential([tf_keras.layers.Dense(1)])
        model.compile('sgd', 'mse')
        model.fit(data, steps_per_epoch=None)
      """)
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out')) == 1
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(
      f"generic-trainer: RunFnError: run_fn (module_file={module!r}) raised "
      "ValueError: "
      'When providing an infinite dataset, you must specify the number of '
      'steps to run'), message
  reason = message.split('dataset). ', 1)[1]
  assert reason.startswith(
      "The train (or eval) dataset repeats, as TFXIO's datasets do unless "
      'num_epochs is set, and tf.keras 2 will not read an endless dataset '
      'without a number of steps.'), reason
  assert "Set the steps: the command's --steps N" in reason
  assert_four_parts(reason)


@pytest.mark.slow
def test_tfxs_keras2_tutorial_runs_on_keras3_with_keras_version_tf_keras(
    tmp_path, penguin_csvs):
  """TFX's penguin_simple run_fn (tf.keras 2, model.save(save_format='tf'))
  trains and publishes unchanged with --keras-version tf_keras, as the
  install page says, where TensorFlow's tf.keras is Keras 3."""
  out = tmp_path / 'out'
  proc = _command('--module-file', os.path.join(TESTDATA, 'tutorial_keras2.py'),
                  '--train-data', penguin_csvs[0], '--output-dir', str(out),
                  '--steps', '10', '--keras-version', 'tf_keras')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert re.search(r'^Training the run_fn on tf_keras 2\.\d+\.\d+ '
                   r'\(tf\.keras 2\)\.$', proc.stderr, re.M), proc.stderr
  assert (out / 'model' / 'saved_model.pb').exists()


def test_a_run_fn_parsing_an_int_column_as_float_is_told_the_spec_line(
    tmp_path, penguin_csvs, capsys):
  """A run_fn's own spec that reads an INT column as float32 (TFX's
  tutorial does, for every penguin column) gets the feature, both types
  and the line to write, not TensorFlow's "Data types don't match" with
  "fix the code"."""
  module = _module_file(tmp_path, 'float_spec', """
      from tensorflow_metadata.proto.v0 import schema_pb2
      from tfx_bsl.tfxio import dataset_options

      def run_fn(fn_args):
        schema = schema_pb2.Schema()
        feature = schema.feature.add(name='body_mass_g', type=schema_pb2.FLOAT)
        feature.shape.dim.add(size=1)
        feature.presence.min_fraction = 1.0
        data = fn_args.data_accessor.tf_dataset_factory(
            fn_args.train_files,
            dataset_options.TensorFlowDatasetOptions(batch_size=8), schema)
        next(iter(data))
      """)
  assert _main('--module-file', module, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '2') == 1
  message = _error_line(capsys.readouterr().err)
  reason = message.split("Data types don't match. Data type: int64 but "
                         'expected type: float. ', 1)[1]
  assert reason == (
      "The data holds 'body_mass_g' as whole numbers (an int64_list: INT in "
      'the schema), and the run_fn parses it as tf.float32: a feature spec '
      'or schema of its own (tf.io.FixedLenFeature(..., dtype=...) turned '
      "into a schema, as TFX's tutorials write) that differs from the "
      "data's. Expected 'body_mass_g' parsed as tf.int64, as the data writes "
      "it. Received: 'body_mass_g' parsed as tf.float32. Write "
      "'body_mass_g': tf.io.FixedLenFeature([1], tf.int64) in the spec (and "
      'cast it to float32 in the model where it needs floats), or parse with '
      "the data's own schema (fn_args.schema_path, which the command writes "
      'from the data or from --schema). Nothing was published.')
  assert_four_parts(reason)


def test_a_second_run_replaces_the_first(tmp_path, penguin_csvs, capsys):
  """A run into the folder of an earlier run replaces its outputs."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'out'
  argv = ['--module-file', os.path.join(TESTDATA, 'records_fn_args.py'),
          '--train-data', penguin_csvs[0], '--output-dir', str(out)]
  assert cli.main(argv + ['--hparams', '{"units": 4}']) == 0
  assert (out / 'hyperparameters').is_dir()
  assert cli.main(argv) == 0, capsys.readouterr().err[-3000:]
  assert not (out / 'hyperparameters').exists()
  assert (out / 'model' / 'saved_model.pb').is_file()


def test_run_fn_names_a_function_of_the_module(tmp_path, penguin_csvs,
                                               capsys, monkeypatch):
  """--run-fn NAME runs that function of a run_fn module."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(sys, 'path', list(sys.path))
  module = tmp_path / 'cli_named_entry.py'
  module.write_text(textwrap.dedent(f'''
      import sys
      sys.path.insert(0, {TESTDATA!r})
      from records_fn_args import run_fn as _record

      def train_here(fn_args):
        _record(fn_args)
      '''))
  out = tmp_path / 'out'
  status = cli.main(['--module-file', str(module), '--train-data',
                     penguin_csvs[0], '--output-dir', str(out),
                     '--run-fn', 'train_here'])
  assert status == 0, capsys.readouterr().err[-3000:]
  assert '== Trained `train_here` of' in capsys.readouterr().out
  assert (out / 'run' / 'fn_args.json').is_file()


def test_run_fn_names_one_of_several_specs(tmp_path, penguin_csvs, capsys):
  """--run-fn SpecName picks one of two unrelated TrainSpecs."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  module = tmp_path / 'two_specs.py'
  module.write_text(textwrap.dedent('''
      from spec_fixtures import PenguinSpec

      class Small(PenguinSpec):
        epochs = 1

      class Other(PenguinSpec):
        pass
      '''))
  out = tmp_path / 'out'
  status = cli.main(['--module-file', str(module), '--train-data',
                     penguin_csvs[0], '--output-dir', str(out), '--steps',
                     '4', '--run-fn', 'Small'])
  captured = capsys.readouterr()
  assert status == 0, captured.err[-3000:]
  assert '== Trained TrainSpec Small of' in captured.out
  assert len(FIRST_STEP.findall(captured.out)) == 1


# Failures: exit 1, the message without a traceback, no DIR/model.
@pytest.mark.slow
def test_rejected_export_leaves_no_model(tmp_path, penguin_csvs):
  """An export that predicts NaN: exit 1, no model/, the export kept in run/."""
  out = tmp_path / 'out'
  proc = _command('--module-file', os.path.join(TESTDATA, 'nan_prediction.py'),
                  '--train-data', penguin_csvs[0], '--output-dir', str(out))
  assert proc.returncode == 1
  assert re.search(
      r"generic-trainer: ExportValidationError: The 'serving_default' "
      r'signature of .* returned non-finite values \(NaN or Inf\)',
      proc.stderr)
  assert proc.stderr.endswith(
      f'Nothing was published; the rejected export is kept in '
      f'{out}/run/rejected_export for inspection.\n')
  assert 'Traceback' not in proc.stderr
  assert not (out / 'model').exists() and not (out / '.publishing').exists()
  assert (out / 'run' / 'rejected_export' / 'Format-Serving' /
          'saved_model.pb').is_file()


def test_spec_error_exits_1_with_the_message(tmp_path, penguin_csvs, capsys):
  """A TrainSpec that does not fit the data: exit 1, SpecError's message."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  module = tmp_path / 'wrong_label.py'
  module.write_text(textwrap.dedent('''
      from spec_fixtures import PenguinSpec

      class WrongLabel(PenguinSpec):
        label_key = 'weight_class'
      '''))
  out = tmp_path / 'out'
  status = cli.main(['--module-file', str(module), '--train-data',
                     penguin_csvs[0], '--output-dir', str(out)])
  err = capsys.readouterr().err
  assert status == 1
  assert ("generic-trainer: SpecError: The label 'weight_class' "
          '(TrainSpec.label_key) is not a feature of the data.') in err
  assert 'Traceback' not in err
  assert not (out / 'model').exists()


def test_data_that_is_not_tfrecords_exits_1(tmp_path, capsys):
  """A data file neither CSV nor TFRecord is named before training."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  notes = tmp_path / 'notes.txt'
  notes.write_text('not a TFRecord file')
  status = cli.main(['--module-file', SPEC_MODULE, '--train-data', str(notes),
                     '--output-dir', str(tmp_path / 'out')])
  err = capsys.readouterr().err
  assert status == 1
  assert err.startswith(
      f'generic-trainer: InputArtifactError: {notes} is not a readable '
      'TFRecord file: ')
  assert err.endswith(
      'Expected TFRecord files of tf.Example (gzip when the name ends in .gz) '
      'or CSV files (named *.csv). Check the file, or convert it.\n')


def test_module_that_does_not_parse_exits_1_before_tensorflow(tmp_path,
                                                             penguin_csvs):
  """A syntax error is the module's fault (exit 1), found before TF loads."""
  module = tmp_path / 'broken.py'
  module.write_text('def run_fn(fn_args)\n  pass\n')
  status, stderr, tensorflow = _parse_fresh(
      ['--module-file', str(module), '--train-data', penguin_csvs[0],
       '--output-dir', str(tmp_path / 'out')], cwd=tmp_path)
  assert (status, tensorflow) == (1, False)
  assert stderr.startswith(
      f"generic-trainer: UserModuleError: The module file '{module}' has a "
      'syntax error at line 1')



def test_keras_setup_and_the_folder_hold_happen_once(tmp_path, penguin_csvs,
                                                     capsys, monkeypatch):
  """On the command's path Keras's environment is chosen, TensorFlow
  imported and the output folder held once each, and the checkpoint folder
  the command names is the one its plan chose."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import run as command_run  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import console  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import keras_env  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import output_folder  # pylint: disable=g-import-not-at-top
  calls = []

  def counted(module, name):
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(name) or
                        real(*a, **k))

  counted(keras_env, 'choose_before_import')
  counted(console, 'import_tensorflow')
  counted(output_folder, 'hold')
  plans = []
  real_run = command_run.run
  monkeypatch.setattr(command_run, 'run', lambda request, starting: real_run(
      request, lambda plan: plans.append(plan) or starting(plan)))
  out = tmp_path / 'out'
  argv = ['--module-file', os.path.join(TESTDATA, 'records_fn_args.py'),
          '--train-data', penguin_csvs[0], '--output-dir', str(out)]
  assert cli.main(argv) == 0, capsys.readouterr().err[-3000:]
  assert sorted(calls) == ['choose_before_import', 'hold', 'import_tensorflow']
  [plan] = plans
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  assert plan.checkpoint_dir == os.path.join(
      str(out), '.resume-' + command_run.resume_key(
          cli_args.parse(argv, started=0.0)))


def test_steps_0_is_unset_as_on_the_component(tmp_path, penguin_csvs):
  """--steps 0 and --eval-steps 0 are unset, as num_steps=0 is on the
  component; a negative one is refused with the component's message."""
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  base = ['--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
          '--output-dir', str(tmp_path / 'out')]
  request = cli_args.parse(base + ['--steps', '0', '--eval-steps', '0'], 0.0)
  assert (request.steps, request.eval_steps) == (None, None)
  assert cli_args.parse(base + ['--steps', '5'], 0.0).steps == 5
  with pytest.raises(InvalidArgumentError, match=re.escape(
      "--steps must be positive, or unset to read the split once (0 is "
      "unset, as TFX's Trainer reads it). Received: --steps='-3'. Set a "
      'positive number, or leave it unset.')):
    cli_args.parse(base + ['--steps=-3'], 0.0)

def _csv(path, text):
  path.write_text(text)
  return str(path)


@pytest.mark.parametrize('typed, meant', [('--trian-data', '--train-data'),
                                          ('--output_dir', '--output-dir'),
                                          ('--step', '--steps')])
def test_an_unknown_flag_is_named_with_the_nearest_known_one(
    tmp_path, capsys, typed, meant):
  """A misspelt flag (or an abbreviation, which is not taken) is named with
  the flag meant, not answered with "required: --train-data"."""
  argv = {'--module-file': SPEC_MODULE, '--train-data': 'x.csv',
          '--output-dir': str(tmp_path / 'out'), '--steps': '6'}
  argv[typed] = argv.pop(meant)
  assert _main(*[w for kv in argv.items() for w in kv]) == 2
  message = _error_line(capsys.readouterr().err)
  assert message.startswith(f'generic-trainer: error: {typed} is not a flag '
                            f'of generic-trainer; did you mean {meant}?')
  assert_four_parts(message)


def test_a_glob_the_shell_expanded_says_to_quote_it(tmp_path, capsys):
  """`--train-data data/*.csv` unquoted reaches the command as several
  paths: the error says so, and how to quote it."""
  files = [_csv(tmp_path / f'{n}.csv', 'a,b\n1,2\n') for n in 'abc']
  assert _main('--module-file', SPEC_MODULE, '--train-data', *files,
               '--output-dir', str(tmp_path / 'out')) == 2
  message = _error_line(capsys.readouterr().err)
  assert 'The shell expands an unquoted glob' in message
  assert "Quote the glob (--train-data 'data/*.csv')" in message
  assert_four_parts(message)


def test_a_folder_as_data_means_its_csv_files(tmp_path, capsys):
  """A folder as --train-data is its CSV files (else its TFRecord files),
  and the command says which it took."""
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  data = tmp_path / 'data'
  data.mkdir()
  files = [_csv(data / f'{n}.csv', 'a,b\n1,2\n') for n in 'ab']
  (data / 'notes.txt').write_text('not data')
  request = cli_args.parse(['--module-file', SPEC_MODULE, '--train-data',
                            str(data), '--output-dir', str(tmp_path / 'out')],
                           started=0.0)
  assert request.train_data == files
  assert (f'--train-data {data}: taking its 2 CSV file(s): a.csv, b.csv'
          in capsys.readouterr().err)


def test_help_is_grouped_with_an_example_and_every_exit_status(capsys):
  """--help: the flags by group, one example, every exit status, and where
  the cache lives and how big it may grow."""
  with pytest.raises(SystemExit):
    _main('--help')
  text = capsys.readouterr().out
  titles = re.findall(r'^(\w+):$', text, re.M)
  assert titles[1:6] == ['data', 'training', 'outputs', 'workers', 'cache']
  assert re.search(r"^example:\n  generic-trainer --module-file .*\n", text,
                   re.M)
  for status in ('0', '1', '2', '130', '143'):
    assert re.search(rf'^  {status} +\w', text, re.M), status
  cache = text.split('\ncache:\n')[1]
  assert '$XDG_CACHE_HOME' in cache and 'most gigabytes' in cache


def test_off_a_terminal_the_export_dump_and_ansi_codes_are_dropped(
    monkeypatch):
  """When stdout is a file or a pipe, Keras's "Saved artifact at ..." dump
  and ANSI codes do not reach it; other lines do."""
  from generic_trainer.system import console  # pylint: disable=g-import-not-at-top
  out = io.StringIO()
  monkeypatch.setattr(sys, 'stdout', out)
  with console.command_lines(io.StringIO()):
    sys.stdout.write("Saved artifact at '/tmp/m'. The following endpoints "
                     "are available:\n\n* Endpoint 'serve'\n  args_0: ...\n")
    print('\x1b[1m4/4\x1b[0m \x1b[32m━━━━\x1b[0m loss: 0.5')
  assert out.getvalue() == '4/4 ━━━━ loss: 0.5\n'


def test_the_summary_names_only_what_exists_and_no_source_file(
    tmp_path, capsys):
  """The last lines name the folders that exist, and a run_fn without a
  record is pointed to the docs, not to the package's source."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import run  # pylint: disable=g-import-not-at-top
  from generic_trainer.command.layout import Layout  # pylint: disable=g-import-not-at-top
  layout = Layout(str(tmp_path))
  os.makedirs(layout.model)
  request = type('R', (), {'module_file': 'm.py'})()
  cli._print_outcome(request, run.Outcome('`run_fn`', None, {}, layout, None))  # pylint: disable=protected-access
  out = capsys.readouterr().out
  assert f'model:  {layout.model}' in out
  assert 'run:' not in out and 'data:' not in out and 'schema:' not in out
  assert 'generic_trainer/' not in out
  assert 'docs/guides/run-fn-modules.md' in out
  guide = open(os.path.join(REPO, 'docs', 'guides', 'run-fn-modules.md')).read()
  assert '## The training record' in guide


@pytest.fixture(scope='module')
def species_csv(tmp_path_factory):
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  return write_penguin_csv(str(tmp_path_factory.mktemp('species')),
                           string_labels=True)


@pytest.mark.slow
def test_the_command_stderr_has_no_tensorflow_start_up_lines_nor_warnings(
    tmp_path, species_csv):
  """A canned spec trained by the command: stderr holds the progress log
  only (no C++ start-up lines, no FutureWarning), and 200 steps of a
  one-epoch spec read as such, not as "1 epochs"."""
  env = command_env()
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  env.pop('PYTHONWARNINGS', None)
  proc = subprocess.run(
      [sys.executable, '-m', 'generic_trainer', '--module-file',
       CANNED_MODULE, '--train-data', species_csv, '--output-dir',
       str(tmp_path / 'out'), '--steps', '200', '--progress', 'lines'],
      capture_output=True, text=True, env=env, cwd=str(tmp_path),
      timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'Warning' not in proc.stderr, proc.stderr
  assert not re.search(r'^\d{4}-\d\d-\d\d [\d:.]+: [IWEF] ', proc.stderr,
                       re.M), proc.stderr
  assert [l for l in proc.stderr.splitlines() if not l.startswith(
      ('Training ', 'PenguinSpecies reads 4 features ', '  ', 'cache: ',
       'epoch 1 '))] == [], proc.stderr
  assert ': 200 steps in one epoch (evaluated once, at the end), ' in (
      proc.stdout)
  assert '1 epochs' not in proc.stdout


def test_the_schedule_reads_as_steps_and_epochs():
  """Steps and epochs in words: one epoch says so; several say their size."""
  from generic_trainer.command.cli import schedule_text  # pylint: disable=g-import-not-at-top
  assert schedule_text(20000, 1) == (
      '20000 steps in one epoch (evaluated once, at the end)')
  assert schedule_text(20, 5) == '20 steps in 5 epochs of 4 steps'
  assert schedule_text(21, 5) == '21 steps in 5 epochs'


@pytest.mark.parametrize('argv, said, todo', [
    (['--train-steps', '100'], 'the train steps are --steps here',
     'Write --steps 100.'),
    (['--num-steps=7'], 'the train steps are --steps here',
     'Write --steps 7.'),
    (['--num-eval-steps', '3'], 'the eval steps are --eval-steps here',
     'Write --eval-steps 3.'),
    (['--epochs', '5'], "A TrainSpec sets its class attribute `epochs = 5`",
     'Write epochs = 5 in the TrainSpec, or --hparams \'{"epochs": 5}\' for '
     'a run_fn that reads it.'),
    (['--batch-size', '64'], 'A TrainSpec sets its class attribute '
     '`batch_size = 64`', 'Write batch_size = 64 in the TrainSpec, or '
     '--hparams \'{"batch_size": 64}\' for a run_fn that reads it.'),
    (['--learning-rate=0.001'], "A TrainSpec's build_optimizer() sets it",
     'Write --hparams \'{"learning_rate": 0.001}\'.'),
], ids=['train-steps', 'num-steps', 'num-eval-steps', 'epochs', 'batch-size',
        'learning-rate'])
def test_flags_a_tfx_user_brings_say_where_each_is_set(tmp_path, capsys, argv,
                                                       said, todo):
  """`--train-steps` is not answered with "did you mean --train-data?": it
  is told that the steps are --steps; --epochs, --batch-size and
  --learning-rate where they live: the TrainSpec (its batch_size, its
  optimizer) or --hparams for a run_fn's own code."""
  spec = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  assert _main('--module-file', spec, '--train-data', 'x.csv',
               '--output-dir', str(tmp_path / 'out'), *argv) == 2
  message = _error_line(capsys.readouterr().err)
  name = argv[0].split('=')[0]
  assert message.startswith(
      f'generic-trainer: error: {name} is not a flag of generic-trainer: ')
  assert said in message and message.endswith(todo), message
  assert 'did you mean' not in message
  assert_four_parts(message)


def test_a_learning_rate_written_as_a_json_string_is_named(
    tmp_path, capsys, penguin_csvs):
  """--hparams '{"learning_rate": "0.01"}': a note when the flags are read,
  and Keras's refusal said as a string from --hparams, with the number
  written without quotes."""
  spec = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  assert _main('--module-file', spec, '--train-data', penguin_csvs[0],
               '--output-dir', str(tmp_path / 'out'), '--steps', '5',
               '--hparams', '{"learning_rate": "0.01"}') == 1
  err = capsys.readouterr().err
  assert ('--hparams: learning_rate given as text ("learning_rate": "0.01")'
          ', which the code receives as a str') in err
  message = _error_line(err)
  assert message.startswith(
      "generic-trainer: RunFnError: TrainSpec PenguinSpec (module_file='"
      f"{spec}') raised ValueError: Argument `learning_rate` should be float")
  reason = message.split('Received instead: learning_rate=0.01. ')[1]
  assert reason == (
      "learning_rate is the string '0.01' from --hparams, not a number: JSON "
      'keeps a quoted value as text, and the code passed it on as it was. '
      'Expected a JSON number for learning_rate: 0.01, without quotes. '
      'Received: "learning_rate": "0.01" (a string) in --hparams. Write the '
      'number without quotes: --hparams \'{"learning_rate": 0.01}\'. Nothing '
      'was published.')
  assert_four_parts(reason)


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
