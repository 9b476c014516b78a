"""Nothing of the user's removed, round three (issue 49): every removal
removes only what is provably ours (our name format, in a folder that
carries our marker, with the lock held where there is one); what else is
found is left and named once in the log. Each test is an attack that
removed a user's files before: the parsed rows cache given a working
folder, a cache folder that holds an output, the SIGTERM last resort of
a training in another PID namespace, a killed run's clean-up, the
Estimator's export."""

import logging
import os
import shutil
import subprocess
import sys

import pytest

from conftest import command_env
from message_parts import assert_four_parts
from generic_trainer.command import cli_args
from generic_trainer.command.layout import Layout
from generic_trainer.data import local_files
from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.data.kept import folder as kept_folder
from generic_trainer.data.kept import settings as kept_settings
from generic_trainer.errors import ModelFolderError, UnsafeFolderError
from generic_trainer.keys import VERIFIED_FOLDERS_ENV
from generic_trainer.system import atomic_files
from generic_trainer.system import progress
from generic_trainer.system import scratch
from generic_trainer.system import trust

_ENTRY = 'ab' * 20  # An entry's name (`kept_key.entry_name`): 40 hex.


def _working_folder(root):
  """A user's working folder: a thesis, and the model an earlier run
  published in out/."""
  ws = root / 'ws'
  (ws / 'thesis').mkdir(parents=True)
  (ws / 'thesis' / 'chapter1.tex').write_text('mine')
  (ws / 'out' / 'model').mkdir(parents=True)
  (ws / 'out' / 'model' / 'saved_model.pb').write_text('published')
  return ws


def test_a_working_folder_given_as_the_cache_is_refused_and_kept(tmp_path):
  """`--parsed-rows-cache ws`, where ws/ holds a thesis and a published
  model: the store, the command and the Estimator refuse it, naming what
  is in the way; nothing there is removed (eviction took every subfolder
  without a manifest for a half-removed entry)."""
  ws = _working_folder(tmp_path)
  with pytest.raises(UnsafeFolderError) as info:
    with kept_cache.SpanCache(str(ws), budget_bytes=0):
      pass
  message = str(info.value)
  assert message.startswith(
      f'The parsed rows cache folder {ws} is not a folder of parsed rows '
      'alone: out/, thesis/.')
  assert_four_parts(message)
  module = tmp_path / 'mod.py'
  module.write_text('def run_fn(fn_args):\n  pass\n')
  data = tmp_path / 'train.csv'
  data.write_text('a,b\n1,2\n')
  with pytest.raises(UnsafeFolderError, match=r'alone: out/, thesis/\.'):
    cli_args.parse(['--module-file', str(module), '--train-data', str(data),
                    '--output-dir', str(tmp_path / 'run'),
                    '--parsed-rows-cache', str(ws)], 0.0)
  with pytest.raises(UnsafeFolderError, match=r'alone: out/, thesis/\.'):
    kept_settings.checked_folder(str(ws), name='parsed_rows_cache')
  assert (ws / 'thesis' / 'chapter1.tex').read_text() == 'mine'
  assert (ws / 'out' / 'model' / 'saved_model.pb').read_text() == 'published'
  assert sorted(os.listdir(ws)) == ['out', 'thesis']  # No marker written.


def test_a_cache_that_holds_or_lies_in_an_output_or_input_is_refused(
    tmp_path):
  """An output folder or a data file inside the cache folder, or the
  cache inside the base model's folder: refused, naming which."""
  cache = tmp_path / 'rows'
  base = tmp_path / 'base'
  (base / 'variables').mkdir(parents=True)
  (base / 'saved_model.pb').write_text('')
  for output_dir, inputs, folder, what in (
      (str(cache / 'out'), [], cache, f'the output folder {cache}/out lies '
       'in it'),
      (str(tmp_path / 'out'), [str(cache / 'train.csv')], cache,
       f'the input {cache}/train.csv lies in it'),
      (str(tmp_path / 'out'), [str(base)], base / 'rows',
       f'it lies in the input {base}')):
    with pytest.raises(UnsafeFolderError) as info:
      kept_settings.checked_folder(str(folder), output_dir, inputs=inputs)
    assert f'is not a folder of parsed rows alone: {what}.' in str(
        info.value)
    assert_four_parts(str(info.value))
  assert not cache.exists()  # Nothing made for a refused folder.


def test_eviction_removes_only_entries_and_names_the_rest_once(
    tmp_path, caplog):
  """What appears in a marked cache folder during a training (a user's
  file, a folder, a link where an entry would be, a 40-hex folder
  without our manifest: a name is no proof) is left by eviction and
  named in one log line; entries with our manifest go."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  cache = tmp_path / 'rows'
  with kept_cache.SpanCache(str(cache), budget_bytes=0):
    (cache / _ENTRY).mkdir()  # Our name, no manifest: not provably ours.
    (cache / _ENTRY / 'blocks.bin').write_bytes(b'0' * 10)
    (cache / ('ef' * 20)).mkdir()  # An entry: our name and a manifest.
    (cache / ('ef' * 20) / kept_folder.ENTRY_MANIFEST).write_text('{}')
    (cache / ('ef' * 20) / 'blocks.bin').write_bytes(b'0' * 10)
    (cache / 'notes.txt').write_text('mine')
    (cache / 'thesis').mkdir()
    (cache / 'thesis' / 'chapter1.tex').write_text('mine')
    os.symlink(tmp_path, cache / ('cd' * 20))
  assert sorted(os.listdir(cache)) == sorted(
      [_ENTRY, 'cd' * 20, kept_folder.MARKER, kept_folder.DECISIONS,
       'notes.txt', 'thesis'])
  assert (cache / _ENTRY / 'blocks.bin').read_bytes() == b'0' * 10
  assert (cache / 'thesis' / 'chapter1.tex').read_text() == 'mine'
  lines = [r.getMessage() for r in caplog.records
           if 'not an entry of ours' in r.getMessage()]
  assert lines == [
      f'parsed rows: {_ENTRY}, {"cd" * 20}, notes.txt, thesis in {cache} are '
      'not an entry of ours, so eviction left them; keep other files out of '
      'the cache folder']


def test_a_cache_folder_that_lost_its_marker_is_not_evicted(tmp_path,
                                                            caplog):
  """The marker removed while a training uses the folder: nothing there
  is provably ours any more, so nothing is evicted, and the log says
  why."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  cache = tmp_path / 'rows'
  with kept_cache.SpanCache(str(cache), budget_bytes=0):
    (cache / _ENTRY).mkdir()
    os.unlink(cache / kept_folder.MARKER)
  assert (cache / _ENTRY).is_dir()
  assert [r.getMessage() for r in caplog.records
          if 'nothing evicted' in r.getMessage()] == [
              f'parsed rows: nothing evicted from {cache}: it no longer '
              f'carries the marker {kept_folder.MARKER} of a parsed rows '
              'cache, so nothing there is provably ours']


def test_a_killed_runs_clean_up_keeps_the_users_files_it_cannot_prove(
    tmp_path, caplog):
  """A run killed before recording what it wrote: the next run removes
  what its journal noted as written (data.gz, history.json, schema.pbtxt
  through the run's writer, still as written), the folders left empty
  and the links of a split folder, and keeps, naming them once, a user's
  data/Split-train/mine.csv and run/notes.txt put there after the kill,
  what a run_fn wrote under a name of its own, and the files written by
  path (a checkpoint, an event file) that the killed run never claimed:
  a name is no proof (on main: removed for their names)."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  Layout(str(tmp_path)).clear()  # The killed run's start; no record().
  written = ['data/Split-train/data.gz', 'data/Split-eval/.tmp-data.gz1',
             'run/history.json', 'schema/schema.pbtxt']
  by_path = ['run/checkpoints/best.weights.h5',
             'run/tensorboard/train/events.out.tfevents.1']
  users = ['data/Split-train/mine.csv', 'run/notes.txt',
           'run/run_fn_plot.png']
  for rel in written:  # Through the run's writer: noted in its journal.
    atomic_files.write_text(str(tmp_path / rel), 'x')
  for rel in by_path + users:
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text('x')
  os.symlink(tmp_path / 'run' / 'notes.txt',
             tmp_path / 'data' / 'Split-eval' / 'part-0.gz')  # A run's link.
  Layout(str(tmp_path)).clear()
  for rel in written + ['data/Split-eval/part-0.gz']:
    assert not os.path.lexists(tmp_path / rel), rel
  for rel in by_path + users:
    assert (tmp_path / rel).read_text() == 'x', rel
  named = [r.getMessage() for r in caplog.records
           if 'did not provably write' in r.getMessage()]
  assert len(named) == 1 and (
      'data/Split-train/mine.csv, run/checkpoints/best.weights.h5, '
      'run/notes.txt, run/run_fn_plot.png, '
      'run/tensorboard/train/events.out.tfevents.1' in named[0]), named
  caplog.clear()
  Layout(str(tmp_path)).clear()  # Named once: now counted as the user's.
  assert not [r for r in caplog.records
              if 'did not provably write' in r.getMessage()]
  for rel in by_path + users:
    assert (tmp_path / rel).read_text() == 'x', rel


def test_what_a_run_wrote_by_path_is_claimed_as_it_ends(tmp_path, caplog):
  """A run that ends (its record, as after a SIGTERM too) claims what
  TensorFlow and its run_fn wrote by path in its own folders
  (run/checkpoints, run/tensorboard: new since it started, writable by it
  alone), with identities: the next run removes those, as they were;
  one the user changed since stays, named once, and so does one in a
  folder others could write (user code's `os.umask(0)` makes TensorFlow's
  folders 0777), which the run cannot claim (on main: recorded and
  removed for its name)."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  layout = Layout(str(tmp_path))
  layout.clear()
  by_path = ['run/checkpoints/best.weights.h5',
             'run/tensorboard/train/events.out.tfevents.1',
             'run/checkpoints/run_fn_own.bin']
  for rel in by_path:
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text('x')
  open_to_all = tmp_path / 'run' / 'tensorboard' / 'eval'
  open_to_all.mkdir()
  open_to_all.chmod(0o777)
  (open_to_all / 'events.out.tfevents.2').write_text('anyone could')
  layout.record()
  (tmp_path / by_path[2]).write_text('the user changed it since')
  Layout(str(tmp_path)).clear()
  for rel in by_path[:2]:
    assert not os.path.lexists(tmp_path / rel), rel
  assert (tmp_path / by_path[2]).read_text() == 'the user changed it since'
  assert (open_to_all / 'events.out.tfevents.2').read_text() == 'anyone could'
  named = [r.getMessage() for r in caplog.records
           if 'did not provably write' in r.getMessage()]
  assert len(named) == 1 and (
      'run/checkpoints/run_fn_own.bin, '
      'run/tensorboard/eval/events.out.tfevents.2' in named[0]), named


_HOLD_SCRATCH = '''
import os, sys, threading, time
from generic_trainer.system import preemption, scratch
with scratch.folder('cache') as mine:
  print(os.getpid(), mine, flush=True)
  if sys.argv[1] == 'last-resort':  # 22 s after a SIGTERM, blocked since.
    preemption._last_resort(threading.Event(),
                            time.monotonic() - preemption.PREEMPTION_EXIT_S)
  time.sleep(120)
'''


@pytest.mark.skipif(shutil.which('unshare') is None, reason='no unshare')
def test_the_sigterm_last_resort_removes_only_its_own_scratch_folders(
    tmp_path, monkeypatch):
  """Two trainings in PID namespaces of their own, both PID 1, share
  TMPDIR: the last resort of the second (still blocked 22 s after its
  SIGTERM) removes its own folder, not the first's live one (it globbed
  `generic-trainer-*-1-*`). The namespaces are an ordinary user's too (a
  user namespace of theirs first, as rootless containers make), with this
  process's verdict on TMPDIR and the folders above it handed down, as
  the local workers' launcher hands it (root's /tmp shows as the
  overflow uid's in there)."""
  monkeypatch.setenv('TMPDIR', str(tmp_path))
  monkeypatch.setattr(scratch.tempfile, 'tempdir', None)
  scratch.parent()
  env = dict(command_env(), TMPDIR=str(tmp_path),
             **{VERIFIED_FOLDERS_ENV: trust.verified_env()})
  started = [subprocess.Popen(
      ['unshare', '--map-current-user', '--pid', '--fork', '--kill-child',
       sys.executable, '-c', _HOLD_SCRATCH, how], env=env,
      stdout=subprocess.PIPE, text=True) for how in ('hold', 'last-resort')]
  try:
    (pid_1, first), (pid_2, second) = [
        process.stdout.readline().split() for process in started]
    assert pid_1 == pid_2 == '1'
    assert started[1].wait(60) == 143
    assert os.path.isdir(first) and started[0].poll() is None
    assert not os.path.exists(second)
  finally:
    for process in started:
      process.kill()
      process.wait()


@pytest.mark.slow
def test_an_export_replaces_only_an_export_it_made(tmp_path, penguin_csvs):
  """Estimator.export(dir): a folder of the user's (no marker, or a file
  added to an earlier export) is refused and kept whole; an earlier
  export of ours is replaced."""
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  est = Estimator(PenguinSpec, str(tmp_path / 'nb'), parsed_rows_cache=False)
  est.train(penguin_csvs[0], steps=2)
  mine = tmp_path / 'models'
  mine.mkdir()
  (mine / 'notes.txt').write_text('mine')
  with pytest.raises(ModelFolderError) as info:
    est.export(str(mine))
  assert str(info.value).startswith(
      f'export_dir {mine} holds what no export of an Estimator wrote: '
      'notes.txt.')
  assert_four_parts(str(info.value))
  assert os.listdir(mine) == ['notes.txt']
  exported = est.export(str(tmp_path / 'export'))
  assert est.export(exported) == exported  # Ours: replaced.
  (tmp_path / 'export' / 'variables' / 'mine.txt').write_text('mine')
  with pytest.raises(ModelFolderError, match='wrote: variables/mine.txt'):
    est.export(exported)
  assert (tmp_path / 'export' / 'variables' / 'mine.txt').exists()
  assert (tmp_path / 'export' / 'saved_model.pb').exists()


def test_a_split_stamped_with_its_sources_time_is_still_the_runs(
    tmp_path, caplog):
  """The command gives a converted split the time of its CSVs
  (`local_files.stamp_like`) after writing it: the run notes it again,
  so the next run removes it as the run's and says nothing (on main: its
  identity had changed since it was noted, so every rerun kept both
  splits' data.gz and named them as not the run's)."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  source = tmp_path / 'train.csv'
  source.write_text('a\n1\n')
  os.utime(source, ns=(10**18, 10**18))
  out = tmp_path / 'out'
  layout = Layout(str(out))
  layout.clear()
  data = str(out / 'data' / 'Split-train' / 'data.gz')
  atomic_files.write_text(data, 'rows')
  local_files.stamp_like([data], [str(source)])
  layout.record()
  Layout(str(out)).clear()
  assert not os.path.lexists(data)
  assert not [r.getMessage() for r in caplog.records
              if 'did not provably write' in r.getMessage()]
