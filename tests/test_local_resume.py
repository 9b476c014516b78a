"""generic-trainer resumes a training that did not finish: the checkpoint
folder's key, what a new run keeps, and a real interrupted process."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, TESTDATA
from generic_trainer.command.cli import LOADING
from conftest import checkpointed_epoch as saved_epoch
from conftest import command_env as _env

RECORDS_FN_ARGS = os.path.join(TESTDATA, 'records_fn_args.py')
SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _request(tmp_path, **changes):
  from generic_trainer.command import run as command_run  # pylint: disable=g-import-not-at-top
  fields = dict(module_file=str(tmp_path / 'm.py'),
                train_data=[str(tmp_path / 'train.csv')],
                output_dir=str(tmp_path / 'out'), started=0.0, steps=10)
  fields.update(changes)
  return command_run.Request(**fields)


def test_resume_key_follows_module_data_and_flags(tmp_path):
  """Same module, data and flags: same key; any of them changed: another."""
  from generic_trainer.command.run import resume_key  # pylint: disable=g-import-not-at-top
  (tmp_path / 'm.py').write_text('X = 1\n')
  (tmp_path / 'train.csv').write_text('a,b\n1,2\n')
  key = resume_key(_request(tmp_path))
  assert resume_key(_request(tmp_path)) == key
  assert resume_key(_request(tmp_path, steps=11)) != key
  assert resume_key(_request(tmp_path, hparams={'units': 4})) != key
  assert resume_key(_request(tmp_path, output_dir='/elsewhere')) == key
  (tmp_path / 'train.csv').write_text('a,b\n1,2\n3,4\n')
  changed_data = resume_key(_request(tmp_path))
  assert changed_data != key
  (tmp_path / 'm.py').write_text('X = 2\n')
  assert resume_key(_request(tmp_path)) not in (key, changed_data)


def test_a_new_run_keeps_only_its_own_checkpoint(tmp_path):
  """clear(keep=its resume folder) removes the others and the outputs but
  the published model, which stays until a new one is validated."""
  from generic_trainer.command.run import Layout  # pylint: disable=g-import-not-at-top
  layout = Layout(str(tmp_path / 'out'))
  layout.clear()
  for key in ('aaaa', 'bbbb'):
    os.makedirs(os.path.join(layout.resume_dir(key), 'chkpt'))
  os.makedirs(layout.model)
  os.makedirs(layout.run)
  layout.clear(keep=layout.resume_dir('aaaa'))
  assert sorted(os.listdir(layout.root)) == ['.generic-trainer',
                                             '.resume-aaaa', 'model']
  assert os.listdir(layout.resume_dir('aaaa')) == ['chkpt']
  layout.clear()
  assert sorted(os.listdir(layout.root)) == ['.generic-trainer', 'model']


def test_no_resume_flag(tmp_path, penguin_csvs):
  """--no-resume asks for a fresh start; resuming is the default."""
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  argv = ['--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
          '--output-dir', str(tmp_path / 'out')]
  assert cli_args.parse(argv, started=0.0).resume
  assert not cli_args.parse(argv + ['--no-resume'], started=0.0).resume


def _default_sigint():
  signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_interrupted_run_resumes_when_run_again(tmp_path, penguin_csvs):
  """Ctrl-C mid-training: exit 130, no model, the checkpoint kept; the same
  command resumes after the last checkpointed epoch and publishes."""
  out = tmp_path / 'out'
  command = [sys.executable, '-m', 'generic_trainer', '--module-file',
             os.path.join(TESTDATA, 'slow_spec.py'), '--train-data',
             penguin_csvs[0], '--output-dir', str(out), '--steps', '40',
             '--progress', 'lines']
  # SIGINT as a terminal gives it, even where this test runs with SIGINT
  # ignored (a background job of a script), which a child would inherit.
  first = subprocess.Popen(command, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=_env(),
                           cwd=REPO, preexec_fn=_default_sigint)

  def checkpointed_epoch():
    return saved_epoch(str(out / '.resume-*'))

  deadline = time.monotonic() + 300
  while (checkpointed_epoch() or 0) < 2:
    assert first.poll() is None and time.monotonic() < deadline, (
        first.communicate()[1][-3000:] if first.poll() is not None else
        'timed out')
    time.sleep(0.05)
  first.send_signal(signal.SIGINT)
  _, err = first.communicate(timeout=120)
  assert first.returncode == 130, err[-3000:]
  epoch = checkpointed_epoch()
  [checkpoint] = glob.glob(str(out / '.resume-*'))
  assert err.endswith('generic-trainer: interrupted; nothing was published. '
                      'The same command resumes from the checkpoint in '
                      f'{checkpoint}.\n')
  assert not (out / 'model').exists()

  second = subprocess.run(command, capture_output=True, text=True, env=_env(),
                          cwd=REPO, timeout=600, check=False)
  assert second.returncode == 0, second.stderr[-3000:]
  assert second.stdout.startswith(
      f'{LOADING}\nResuming from the checkpoint an earlier run left in '
      f'{checkpoint} (--no-resume starts over).\n')
  assert re.search(r'== Trained TrainSpec SlowPenguinSpec of .*: 40 steps in '
                   r'8 epochs of 5 steps, .* '
                   rf'\(resumed after epoch {epoch}\)',
                   second.stdout)
  with open(out / 'run' / 'train_result.json') as f:
    assert json.load(f)['resumed_from_epoch'] == epoch >= 2
  assert (out / 'model' / 'saved_model.pb').is_file()
  assert not glob.glob(str(out / '.resume-*'))


def test_run_fn_gets_the_checkpoint_of_its_key(tmp_path, penguin_csvs,
                                               capsys):
  """A run keeps its key's checkpoint and passes it to the run_fn, removes
  other keys' checkpoints, and removes its own once published;
  --no-resume removes its own first."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import run as command_run  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'out'
  argv = ['--module-file', RECORDS_FN_ARGS, '--train-data', penguin_csvs[0],
          '--output-dir', str(out)]
  checkpoint = os.path.join(str(out), '.resume-' + command_run.resume_key(
      cli_args.parse(argv, started=0.0)))
  for flags, kept in (([], ['chkpt']), (['--no-resume'], None)):
    os.makedirs(os.path.join(checkpoint, 'chkpt'), exist_ok=True)
    os.makedirs(out / '.resume-0000', exist_ok=True)
    assert cli.main(argv + flags) == 0, capsys.readouterr().err[-3000:]
    with open(out / 'run' / 'fn_args.json') as f:
      got = json.load(f)
    assert (got['checkpoint_dir'], got['checkpoint_contents']) == (
        checkpoint, kept), flags
    assert sorted(os.listdir(out)) == [
        '.generic-trainer', '.generic-trainer.lock', '.models', 'data',
        'model', 'run', 'schema']
  assert capsys.readouterr().out.startswith(
      f'Resuming from the checkpoint an earlier run left in {checkpoint} '
      '(--no-resume starts over).\n')
