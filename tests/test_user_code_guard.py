"""User code's failures said plainly (`usercode.guard`): what Keras refuses
in a run_fn, and a failed local pipeline script, each with what to do."""

import pytest

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
