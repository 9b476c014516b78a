"""Nothing hangs in silence: a tutorial run_fn's evaluation ends under the
command, a training that waits on something is said and ended at the stall
limit in its own process, and SIGTERM anywhere ends with where the run
was, what was saved and the command that resumes (issue 49, part 3)."""

import contextlib
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import REPO, TESTDATA, command_env
from generic_trainer import errors
from generic_trainer.keys import HEARTBEAT_FILE_ENV, STALL_LIMIT_ENV
from message_parts import missing_parts

TUTORIAL = os.path.join(TESTDATA, 'tutorial_run_fn.py')
GRACE_S = 30  # Kubernetes's default grace period.
TIMEOUT_S = 240  # A command that has not ended by then never will.


def _command(train, out, *extra):
  return ['--module-file', TUTORIAL, '--train-data', train,
          '--output-dir', str(out), '--steps', '3', *extra]


@contextlib.contextmanager
def _fails_after(seconds):
  """A block still running after `seconds` fails the test: a SIGUSR1 to
  this thread wakes what waits and raises pytest's failure there, which
  no `except Exception` of the code under test catches."""
  def fail(signum, frame):  # pylint: disable=unused-argument
    pytest.fail(f'still running after {seconds} s')
  before = signal.signal(signal.SIGUSR1, fail)
  timer = threading.Timer(seconds, signal.pthread_kill,
                          (threading.get_ident(), signal.SIGUSR1))
  timer.start()
  try:
    yield
  finally:
    timer.cancel()
    signal.signal(signal.SIGUSR1, before)


def _wait_for(condition, process, timeout=TIMEOUT_S):
  deadline = time.monotonic() + timeout
  while not condition():
    assert process.poll() is None, 'the command ended early'
    assert time.monotonic() < deadline, 'timed out'
    time.sleep(0.1)


@pytest.mark.slow
def test_a_tutorial_run_fn_ends_without_steps_or_eval_steps(
    tmp_path, penguin_csvs, capsys):
  """A run_fn written as TFX's tutorials are (train and eval datasets that
  repeat, steps_per_epoch=fn_args.train_steps,
  validation_steps=fn_args.eval_steps) finishes under the command without
  --steps or --eval-steps: it gets the train and the eval rows once in
  batches of 32, and the command says how many and why."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'out'
  argv = ['--module-file', TUTORIAL, '--train-data', penguin_csvs[0],
          '--output-dir', str(out)]
  with _fails_after(TIMEOUT_S):  # A training that never ends.
    status = cli.main(argv)
  err = capsys.readouterr().err
  assert status == 0, err[-3000:]
  rows = {split: sum(1 for _ in tf.data.TFRecordDataset(
      str(out / 'data' / f'Split-{split}' / 'data.gz'), 'GZIP'))
          for split in ('train', 'eval')}
  steps = {split: math.ceil(n / 32) for split, n in rows.items()}
  assert (f'Train steps of a run_fn: fn_args.train_steps={steps["train"]}, '
          f'as --steps was not given: the {rows["train"]} train rows once '
          "in batches of 32, Keras's default batch size") in err
  assert (f'Eval steps of a run_fn: fn_args.eval_steps={steps["eval"]}, as '
          f'--eval-steps was not given: the {rows["eval"]} eval rows once in '
          "batches of 32, Keras's default batch size") in err
  with open(out / 'run' / 'evaluation.json') as f:
    assert f.read() == (f'{{"train_steps": {steps["train"]}, "eval_steps": '
                        f'{steps["eval"]}, "eval_batches": {steps["eval"]}}}')
  assert (out / 'model' / 'saved_model.pb').is_file()


@pytest.mark.slow
def test_a_run_fn_that_blocks_is_said_and_ended_at_the_stall_limit(
    tmp_path, penguin_csvs, monkeypatch, capsys):
  """A run_fn whose callback waits forever in on_test_batch_end, under the
  one-process command: within seconds of the stall limit
  (GENERIC_TRAINER_STALL_S=3) the command exits 1 with a message that says
  where the training is, what it waits in and the setting."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(STALL_LIMIT_ENV, '3')
  monkeypatch.delenv(HEARTBEAT_FILE_ENV, raising=False)
  out = tmp_path / 'out'
  with _fails_after(TIMEOUT_S):
    status = cli.main(_command(penguin_csvs[0], out, '--hparams',
                               '{"eval": "block"}'))
  ended = time.time()
  err = capsys.readouterr().err
  assert status == 1, err[-3000:]
  blocked_after = ended - os.path.getmtime(out / 'run' / 'evaluating')
  assert blocked_after < 3 + 15, blocked_after  # The limit; a loaded machine.
  message = err.split('generic-trainer: TrainingProcessError: ', 1)[1]
  assert re.match(
      r'The run_fn made no progress for [34] s, at epoch 1, evaluating '
      r'batch 1 after step 3: its thread waits at wait \(.*threading\.py:\d+: '
      r'`waiter\.acquire\(\)`\), called from on_test_batch_end \('
      + re.escape(TUTORIAL) + r':\d+: `threading\.Event\(\)\.wait\(\)`\), and '
      r'the process used 0\.\d\d s of CPU in that time\. Expected a new '
      r'training step or evaluation batch, or work on the CPU, at least every '
      r'3 s \(GENERIC_TRAINER_STALL_S\)', message), message
  assert not missing_parts(message), message
  assert not (out / 'model').exists()


@pytest.mark.slow
def test_a_pipeline_execution_that_blocks_is_ended_at_the_stall_limit(
    trainer_io, monkeypatch):
  """GenericExecutor.Do, training in the pipeline's own process: the same
  watch ends a run_fn that waits forever, with the same message, and
  nothing is published."""
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(STALL_LIMIT_ENV, '2')
  monkeypatch.delenv(HEARTBEAT_FILE_ENV, raising=False)
  io = trainer_io(train_steps=3, eval_steps=2, module_file=TUTORIAL,
                  custom_config='{"eval": "block"}')
  with _fails_after(TIMEOUT_S), pytest.raises(
      errors.TrainingProcessError) as raised:
    GenericExecutor().Do(*io)
  message = str(raised.value)
  assert re.match(
      r'The run_fn made no progress for [23] s, at epoch 1, evaluating '
      r'batch 1 after step 3: its thread waits at wait \(', message), message
  assert '`threading.Event().wait()`' in message
  assert not os.path.exists(os.path.join(io[1]['model'][0].uri,
                                         'Format-Serving'))


@pytest.mark.slow
def test_sigterm_during_a_run_fns_endless_evaluation_says_how_to_resume(
    tmp_path, penguin_csvs):
  """A run_fn whose evaluation never ends (validation_steps=None on a
  dataset that repeats): the watch says so after the stall limit without
  ending it; SIGTERM then ends the command with 143, and the last line of
  stderr says where the run was, that no resume checkpoint holds it, and
  the command to run again."""
  out = tmp_path / 'out'
  argv = _command(penguin_csvs[0], out, '--hparams', '{"eval": "endless"}')
  err_path = tmp_path / 'stderr'
  with open(err_path, 'w') as err_file:
    process = subprocess.Popen(
        [sys.executable, '-m', 'generic_trainer', *argv],
        stdout=subprocess.DEVNULL, stderr=err_file, text=True,
        env=dict(command_env(), **{STALL_LIMIT_ENV: '3'}), cwd=REPO)
    try:
      _wait_for(lambda: 'has evaluated for' in err_path.read_text(),
                process)
    finally:
      sent = time.monotonic()
      process.send_signal(signal.SIGTERM)
      process.wait(timeout=GRACE_S + 30)
  seconds = time.monotonic() - sent
  err = err_path.read_text()
  assert process.returncode == 143, err[-3000:]
  assert seconds < GRACE_S
  warning = re.search(r'WARNING: (The run_fn has evaluated for .*)', err)
  assert re.match(
      r"The run_fn has evaluated for \d+ s \(epoch 1, evaluating batch \d+ "
      r'after step 3\) with validation_steps=None', warning.group(1))
  assert not missing_parts(warning.group(1)), warning.group(1)
  assert 'generic-trainer: TrainingProcessError' not in err  # Not ended.
  preempted = err.split('generic-trainer: PreemptedError: ', 1)[1]
  assert not missing_parts(preempted), preempted
  last = err.rstrip('\n').rsplit('\n', 1)[-1]
  assert re.fullmatch(
      r"generic-trainer: stopped by SIGTERM at epoch 1, evaluating batch "
      r"\d+ after step 3 of the run_fn's Keras fit; no resume checkpoint "
      r'holds it \(a run_fn writes one with '
      r'generic_trainer\.resume\.keras_callback\)\. To start again, run the '
      r'same command: ' + re.escape(shlex.join(['generic-trainer', *argv])),
      last), last
  assert not (out / 'model').exists()


def test_an_epoch_without_steps_past_ten_passes_is_named(
    tmp_path, monkeypatch, caplog):
  """A Keras fit with steps_per_epoch=None on a train dataset that repeats
  is named while it runs, once its epoch has taken more than ten times the
  train rows in steps, with the settings that end it; it is not ended."""
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import stall_watch  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(STALL_LIMIT_ENV, '600')
  monkeypatch.delenv(HEARTBEAT_FILE_ENV, raising=False)
  train = tmp_path / 'train.tfrecord'
  with tf.io.TFRecordWriter(str(train)) as writer:
    for _ in range(5):
      writer.write(tf.train.Example().SerializeToString())
  data = tf.data.Dataset.from_tensor_slices(
      ([[0.0]] * 5, [[0.0]] * 5)).batch(1).repeat()
  model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
  model.compile('sgd', 'mse')
  started = time.monotonic()

  def said():
    return [r.getMessage() for r in caplog.records
            if 'train steps in epoch' in r.getMessage()]

  class StopOnceSaid(keras.callbacks.Callback):

    def on_train_batch_end(self, batch, logs=None):
      if said() or time.monotonic() - started > 60:
        self.model.stop_training = True

  with stall_watch.watching_here('the run_fn') as watch:
    watch.reads([str(train)])
    model.fit(data, epochs=1, callbacks=[StopOnceSaid()], verbose=0)
  [warning] = said()
  assert re.match(
      r'The run_fn has taken \d+ train steps in epoch 1 with '
      r'steps_per_epoch=None, more than 10 times the 5 rows of its train '
      r'data: at least \d+ passes over the data in one epoch, whatever the '
      r'batch size', warning), warning
  assert 'the command: --steps N' in warning
  assert not missing_parts(warning), warning


def test_the_watch_ends_a_training_that_waits_on_the_main_thread(
    monkeypatch):
  """In its own process (no parent's heartbeat file), a block that waits
  past the stall limit is interrupted where it waits with
  TrainingProcessError, which says what it waits in; the SIGALRM handler
  is given back after."""
  from generic_trainer.launch import stall_watch  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(STALL_LIMIT_ENV, '1')
  monkeypatch.delenv(HEARTBEAT_FILE_ENV, raising=False)
  before = signal.getsignal(signal.SIGALRM)
  started = time.monotonic()
  with pytest.raises(errors.TrainingProcessError) as raised:
    with stall_watch.watching_here('the run_fn'):
      time.sleep(20)
  assert time.monotonic() - started < 10
  message = str(raised.value)
  assert re.match(
      r"The run_fn made no progress for [12] s, outside Keras's fit and "
      r'evaluate: its thread waits at test_the_watch_ends_a_training_that_'
      r'waits_on_the_main_thread \(.*test_stall_watch\.py:\d+: '
      r'`time\.sleep\(20\)`\)', message), message
  assert not missing_parts(message), message
  assert signal.getsignal(signal.SIGALRM) == before


def test_an_interruption_caught_by_user_code_is_said(monkeypatch, caplog):
  """User code that catches the interruption and waits again is said in a
  warning soon after (not a limit later), with why it was not ended."""
  from generic_trainer.launch import stall_watch  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(STALL_LIMIT_ENV, '1')
  monkeypatch.delenv(HEARTBEAT_FILE_ENV, raising=False)
  with stall_watch.watching_here('the run_fn'):
    try:
      time.sleep(20)
    except errors.TrainingProcessError:
      pass  # What user code with a broad `except` does.
    time.sleep(2.5)
  [warning] = [r.getMessage() for r in caplog.records
               if 'made no progress' in r.getMessage()][:1]
  assert ('It is not ended from here: it was interrupted once already, and '
          'waits still') in warning, warning


def test_the_watch_says_what_it_cannot_end(monkeypatch, caplog):
  """A training outside the main thread (which alone takes signals) that
  waits past the stall limit is said in a warning, with why it is not
  ended; a training a parent watches is left to the parent."""
  from generic_trainer.launch import stall_watch  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(STALL_LIMIT_ENV, '1')
  monkeypatch.delenv(HEARTBEAT_FILE_ENV, raising=False)
  release = threading.Event()

  def train():
    with stall_watch.watching_here('TrainSpec Waits'):
      release.wait(2.5)

  trainer = threading.Thread(target=train)
  trainer.start()
  trainer.join()
  warnings = [r.getMessage() for r in caplog.records
              if r.getMessage().startswith('TrainSpec Waits made no progress')]
  assert warnings, [r.getMessage() for r in caplog.records]
  assert ('It is not ended from here: it trains outside the main thread, '
          'which alone takes signals; this is said again after every 1 s '
          'without progress.') in warnings[0]
  caplog.clear()
  monkeypatch.setenv(HEARTBEAT_FILE_ENV, '/nonexistent/heartbeat')
  with stall_watch.watching_here('the run_fn'):
    time.sleep(2.2)  # No error: the parent's watch decides.
  assert not caplog.records


def test_sigterm_outside_a_trainspecs_steps_stops_where_the_run_is():
  """Inside `stopping_anywhere` (the command, an executor's Do), SIGTERM
  where no TrainSpec step reads the flag raises PreemptedError where the
  main thread is, saying where the run was and its last checkpoint."""
  from generic_trainer.system import preemption  # pylint: disable=g-import-not-at-top
  try:
    with preemption.handling():
      with pytest.raises(errors.PreemptedError) as raised:
        with preemption.stopping_anywhere(), preemption.training(
            'the run_fn', lambda: 'the end of epoch 2 in /ckpt'):
          os.kill(os.getpid(), signal.SIGTERM)
          time.sleep(10)
  finally:
    preemption._requested.clear()  # pylint: disable=protected-access
  assert raised.value.reached == "in the run_fn, outside Keras's fit"
  message = str(raised.value)
  assert 'The last resume checkpoint: the end of epoch 2 in /ckpt;' in message
  assert not missing_parts(message), message
  assert signal.getsignal(signal.SIGALRM) == signal.SIG_DFL  # Disarmed.


def test_a_wrong_stall_limit_is_refused_by_the_command(
    tmp_path, penguin_csvs, monkeypatch, capsys):
  """The command refuses a GENERIC_TRAINER_STALL_S that is no number of
  seconds with its flags' errors (exit 2), before anything starts."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv(STALL_LIMIT_ENV, 'soon')
  argv = _command(penguin_csvs[0], tmp_path / 'out')
  assert cli.main(argv) == 2
  assert capsys.readouterr().err.startswith(
      f'generic-trainer: error: {STALL_LIMIT_ENV} must be the seconds')
  assert not (tmp_path / 'out').exists()
