"""User code guarded (`usercode.guard`): a run_fn or a TrainSpec that exits
(sys.exit, os._exit) or parses the command line at import fails the run
instead of ending it; what Keras refuses in a run_fn and a failed local
pipeline script are said plainly, with what to do."""

import os
import subprocess
import sys

import pytest

from command_line import main as _main
from command_line import module_file as _module
from conftest import REPO, command_env
from message_parts import assert_four_parts


def test_keras2_saving_under_keras3_says_what_replaces_it():
  """`model.save(dir, save_format='tf')` under Keras 3: Keras's refusal
  with what was expected and what replaces it: a signature of serialized
  tf.Example, which Evaluator needs, not model.export's raw tensors
  alone."""
  from generic_trainer.errors import RunFnError  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import guard  # pylint: disable=g-import-not-at-top
  keras_says = ('The `save_format` argument is deprecated in Keras 3. Please '
                'remove this argument and pass a file path with either '
                '`.keras` or `.h5` extension.Received: save_format=tf')
  with pytest.raises(RunFnError) as e:
    with guard.user_code('run_fn', 'm.py'):
      raise ValueError(keras_says)
  message = str(e.value)
  assert ("Keras 3's model.export(dir) alone writes a signature of raw "
          'tensors, which TF Serving can call but Evaluator cannot') in message
  assert ('a tf.function taking tf.TensorSpec([None], tf.string, '
          '"examples")') in message
  assert "keras_version='tf_keras'" in message
  assert_four_parts(message.split('\nIts traceback')[0])


@pytest.mark.parametrize('signalled', ['PreemptedError',
                                       'TrainingProcessError'])
@pytest.mark.parametrize('chained', ['cause', 'context'])
def test_a_signals_error_a_library_wrapped_leaves_as_itself(signalled,
                                                            chained):
  """SIGTERM's PreemptedError (or a stall's TrainingProcessError) raised
  where the main thread was, inside a library that re-raised it as its own
  (TensorFlow's tf.function binding: a TypeError `from` it; or one raised
  while handling it), leaves the user code as itself, not as the user's
  error (CI run 9 of issue 58 met it: exit 1 instead of 143). An error of
  the user's own stays theirs."""
  from generic_trainer import errors  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import guard  # pylint: disable=g-import-not-at-top
  ours = getattr(errors, signalled)('SIGTERM arrived at epoch 1.')

  def library():
    try:
      raise ours
    except Exception as e:  # pylint: disable=broad-except
      if chained == 'cause':
        raise TypeError(f'Binding inputs to tf.function failed due to {e}') \
            from e
      raise TypeError('binding failed')  # pylint: disable=raise-missing-from

  with pytest.raises(getattr(errors, signalled)) as e:
    with guard.user_code('run_fn', 'm.py'):
      library()
  assert e.value is ours
  with pytest.raises(errors.RunFnError):  # Theirs: not ours within.
    with guard.user_code('run_fn', 'm.py'):
      raise TypeError('the run_fn\'s own mistake')


def test_a_failed_pipeline_script_prints_the_reason_then_the_log(
    tmp_path, capfd):
  """A run_fn failing inside a local pipeline script: the console prints
  the reason (what is wrong, expected, received, what to do), then the
  log's path, and no traceback; the log holds it. --verbose (no log)
  prints the traceback."""
  from generic_trainer.system import console  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import guard  # pylint: disable=g-import-not-at-top

  def load_vocabulary(path):
    with open(path) as f:
      return f.read().split()

  def body(say, log_path):
    say('  GenericTrainer ...')
    with guard.user_code('run_fn', "module_file='penguin_run_fn.py'"):
      load_vocabulary(str(tmp_path / 'no_such_vocab.txt'))

  assert not console.run_pipeline('Penguin pipeline', str(tmp_path), False,
                                  body)
  out, err = capfd.readouterr()
  log = str(tmp_path / console.LOG_FILE)
  assert out.splitlines() == [
      f'== Penguin pipeline; full log: {log}', '  GenericTrainer ...']
  lines = err.splitlines()
  assert lines[0].startswith(
      "The pipeline failed: RunFnError: run_fn (module_file='penguin_run_fn"
      ".py') raised FileNotFoundError: [Errno 2] No such file or directory")
  assert lines[1:] == [
      f'The tracebacks and every line of the run are in the log: {log} '
      '(--verbose prints them here instead).']
  assert_four_parts(lines[0])
  with open(log) as f:
    text = f.read()
  assert 'Its traceback:' in text and 'in load_vocabulary' in text
  assert console.run_pipeline('Penguin pipeline', str(tmp_path), True,
                              body) is False
  err = capfd.readouterr().err
  assert 'Its traceback:' in err and 'in load_vocabulary' in err


def _command(*args, timeout=600):
  return subprocess.run([sys.executable, '-m', 'generic_trainer', *args],
                        capture_output=True, text=True, env=command_env(),
                        cwd=REPO, timeout=timeout, check=False)


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


def test_os_exit_in_a_thread_of_the_run_fn_fails_the_execution(trainer_io,
                                                                tmp_path):
  """os._exit in a thread run_fn starts (which only that thread would see)
  fails the execution naming the call and the thread, not 'exported
  nothing'."""
  from generic_trainer.errors import RunFnError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  module = _module(tmp_path, 'exits_in_thread', '''
      import os, threading

      def _work():
        os._exit(4)

      def run_fn(fn_args):
        worker = threading.Thread(target=_work, name='loader')
        worker.start()
        worker.join()
      ''')
  io = trainer_io(module_file=module)
  with pytest.raises(RunFnError, match=(
      r"called os._exit\(4\) in the thread 'loader', which would end the "
      r"trainer's process")) as e:
    GenericExecutor().Do(*io)
  assert 'in _work\n    os._exit(4)' in str(e.value)
  assert_four_parts(str(e.value))
  assert not os.path.exists(os.path.join(io[1]['model'][0].uri,
                                         'Format-Serving'))


@pytest.mark.parametrize('read, given, received', [
    ("fn_args.custom_config['epochs']", None,
     r'custom_config=None \(none was given\)'),
    ("fn_args.custom_config.get('epochs')", None,
     r'custom_config=None \(none was given\)'),
    ("fn_args.custom_config['epochs']", {'batch_size': 8},
     r"custom_config with the keys \['batch_size'\]"),
], ids=['none-subscripted', 'none-get', 'key-missing'])
def test_a_run_fn_needing_custom_config_it_lacks_is_told_how_to_pass_it(
    trainer_io, tmp_path, read, given, received):
  """A run_fn reading a custom_config key it was not given: the key, what
  it was given, and how to pass it."""
  import json  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import RunFnError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  module = _module(tmp_path, 'needs_config', f'''
      def run_fn(fn_args):
        epochs = {read}
      ''')
  io = trainer_io(module_file=module)
  if given is not None:
    io[2]['custom_config'] = json.dumps(given)
  with pytest.raises(RunFnError, match=(
      r"The code reads 'epochs' of fn_args.custom_config, which this "
      r"training was not given. Expected custom_config to hold 'epochs'. "
      rf"Received: {received}. Pass it in the pipeline: GenericTrainer\("
      r"custom_config=\{'epochs': ...\}\)")) as e:
    GenericExecutor().Do(*io)
  assert_four_parts(str(e.value))
