"""A rerun into the same output folder (issue 40 items 2, 3, 5; issue 42
item 2): no deletion through a link, modes that follow the inputs and not
the umask, `model/` a real folder replaced in one exchange, checkpoints
fsynced before they count, no temporary folder left by a kill. Fast: no
training here (the kill during publication: test_fault_injection.py)."""

import os
import re
import stat
import subprocess
import sys
import textwrap

import pytest

from conftest import command_env
from other_user import reachable_folder
from generic_trainer.errors import UnsafeFolderError
from generic_trainer.command.layout import Layout
from generic_trainer.system import atomic_files
from generic_trainer.system import output_folder


def _write(root, files):
  for rel, text in files.items():
    path = os.path.join(str(root), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
      f.write(text)


def _stage(layout, text):
  from generic_trainer.keys import SERVING_MODEL_DIR  # pylint: disable=g-import-not-at-top
  _write(layout.publishing, {f'{SERVING_MODEL_DIR}/saved_model.pb': text,
                             f'{SERVING_MODEL_DIR}/variables/v': text})


# Item 1: deletion never passes through a link.
def test_a_link_put_in_place_of_data_is_not_followed_by_the_clean_up(
    tmp_path):
  """data -> the user's dataset after a finished run: the next run deletes
  nothing through the link, keeps the link, and refuses to write there,
  before it removes anything."""
  out = tmp_path / 'out'
  layout = Layout(str(out))
  layout.clear()
  _write(out, {'data/Split-train/data.gz': 'ours', 'run/history.json': '[]'})
  layout.record()
  dataset = tmp_path / 'dataset'
  _write(dataset, {'Split-train/data.gz': 'the users', 'raw.csv': 'mine'})
  (out / 'data' / 'Split-train' / 'data.gz').unlink()
  (out / 'data' / 'Split-train').rmdir()
  (out / 'data').rmdir()
  os.symlink(str(dataset), str(out / 'data'))
  with pytest.raises(UnsafeFolderError, match=re.escape(
      f"{out}/data is a link to '{dataset}', which no run made.")):
    Layout(str(out)).clear()
  assert (dataset / 'Split-train' / 'data.gz').read_text() == 'the users'
  assert (dataset / 'raw.csv').read_text() == 'mine'
  assert os.path.islink(out / 'data')
  # Refused before anything is removed.
  assert (out / 'run' / 'history.json').read_text() == '[]'


def test_a_link_put_in_place_of_a_sub_folder_is_not_followed(tmp_path):
  """run/tensorboard -> elsewhere: what is there stays."""
  out = tmp_path / 'out'
  layout = Layout(str(out))
  layout.clear()
  _write(out, {'run/tensorboard/events': 'ours'})
  layout.record()
  elsewhere = tmp_path / 'elsewhere'
  _write(elsewhere, {'events': 'the users'})
  (out / 'run' / 'tensorboard' / 'events').unlink()
  (out / 'run' / 'tensorboard').rmdir()
  os.symlink(str(elsewhere), str(out / 'run' / 'tensorboard'))
  Layout(str(out)).clear()
  assert (elsewhere / 'events').read_text() == 'the users'
  assert os.path.islink(out / 'run' / 'tensorboard')


def test_a_file_the_user_replaced_is_not_deleted(tmp_path):
  """A file the run wrote, replaced by the user's own: it stays."""
  out = tmp_path / 'out'
  layout = Layout(str(out))
  layout.clear()
  _write(out, {'schema/schema.pbtxt': 'ours'})
  layout.record()
  (out / 'schema' / 'schema.pbtxt').unlink()
  (out / 'schema' / 'schema.pbtxt').write_text('the users, longer')
  Layout(str(out)).clear()
  assert (out / 'schema' / 'schema.pbtxt').read_text() == 'the users, longer'


def test_a_killed_runs_clean_up_keeps_what_the_user_added_after(tmp_path):
  """Killed after writing its data: the next run removes the splits, not
  the file the user added to data/ after the kill."""
  out = tmp_path / 'out'
  layout = Layout(str(out))
  layout.clear()
  for rel, text in {'data/Split-train/data.gz': 'ours',
                    'run/history.json': '[]'}.items():  # As the run writes.
    atomic_files.write_text(os.path.join(out, rel), text)
  # Killed: no record(). The user then adds their own file.
  _write(out, {'data/raw/labels.csv': 'mine'})
  Layout(str(out)).clear()
  assert (out / 'data' / 'raw' / 'labels.csv').read_text() == 'mine'
  assert not (out / 'data' / 'Split-train').exists()
  assert not (out / 'run').exists()


# Item 2: modes follow the inputs, not the umask.
@pytest.fixture
def umask_002():
  before = os.umask(0o002)
  try:
    yield
  finally:
    os.umask(before)


def test_what_a_run_writes_is_as_private_as_its_inputs_whatever_the_umask(
    umask_002):
  """umask 002: a private input gives 0600 files and 0700 folders, a
  shared one (in a folder others can reach) 0644 and 0755: never
  writable by the group."""
  with reachable_folder('inputs', 0o755) as root:
    private, shared = root / 'private.csv', root / 'shared.csv'
    for path, mode in ((private, 0o600), (shared, 0o644)):
      path.write_text('a\n1\n')
      path.chmod(mode)
    for inputs, folder_mode, file_mode in (([str(private)], 0o700, 0o600),
                                           ([str(shared)], 0o755, 0o644)):
      out = root / f'out-{folder_mode:o}'
      with output_folder.hold(str(out), inputs=inputs):
        os.makedirs(out / 'run' / 'tensorboard')
        with open(out / 'run' / 'history.json', 'w') as f:
          f.write('[]')
        atomic_files.write_json(str(out / 'run' / 'train_result.json'), {})
      for path in (out, out / 'run', out / 'run' / 'tensorboard'):
        assert stat.S_IMODE(os.stat(path).st_mode) == folder_mode, path
      for path in (out / 'run' / 'history.json',
                   out / 'run' / 'train_result.json'):
        assert stat.S_IMODE(os.stat(path).st_mode) == file_mode, path
  assert os.umask(0o002) == 0o002  # Given back after the run.


def test_what_a_run_writes_under_user_codes_umask_0_is_sealed(tmp_path):
  """User code that sets umask 0 while the run holds its folder: what it
  wrote is made no more open than the inputs before the lock is let go
  (`output_folder.seal`), never writable by group or others."""
  private = tmp_path / 'private.csv'
  private.write_text('a\n1\n')
  private.chmod(0o600)
  out = tmp_path / 'out'
  with output_folder.hold(str(out), inputs=[str(private)]):
    before = os.umask(0)  # As some libraries do.
    try:
      os.makedirs(out / 'model' / 'variables')
      (out / 'model' / 'variables' / 'weights').write_text('w')
    finally:
      os.umask(before)
  for path in (out / 'model', out / 'model' / 'variables'):
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path
  assert stat.S_IMODE(os.stat(out / 'model' / 'variables' / 'weights').st_mode
                      ) == 0o600


def test_an_existing_shared_folder_is_refused_for_a_private_input(tmp_path):
  """A 0755 output folder and a 0600 CSV: refused, the folder unchanged."""
  private = tmp_path / 'private.csv'
  private.write_text('a\n1\n')
  private.chmod(0o600)
  out = tmp_path / 'out'
  out.mkdir()
  out.chmod(0o755)
  with pytest.raises(UnsafeFolderError, match=re.escape(
      f'--output-dir {out} can be read by group and others (mode 0755), '
      f'but the input {private} is private (mode 0600)') +
                     '.*Received: .*chmod go-rwx'):
    with output_folder.hold(str(out), inputs=[str(private)]):
      pass
  assert stat.S_IMODE(os.stat(out).st_mode) == 0o755


# Item 4: model/ is a real folder, replaced in one exchange.
def test_model_is_a_real_folder_replaced_by_one_exchange(tmp_path,
                                                         monkeypatch):
  """model/ is a folder (cp -r copies a model); the second publication
  exchanges the two folders, and model/ holds a model at every step."""
  layout = Layout(str(tmp_path))
  _stage(layout, 'v1')
  layout.take_model()
  assert os.path.isdir(layout.model) and not os.path.islink(layout.model)
  _stage(layout, 'v2')
  seen = []
  real = atomic_files.exchange

  def exchange(first, second):
    seen.append((os.path.islink(second),
                 (tmp_path / 'model' / 'saved_model.pb').read_text()))
    return real(first, second)

  monkeypatch.setattr(atomic_files, 'exchange', exchange)
  layout.take_model()
  assert seen == [(False, 'v1')]
  assert not os.path.islink(layout.model)
  assert (tmp_path / 'model' / 'saved_model.pb').read_text() == 'v2'
  copy = tmp_path / 'copy'
  subprocess.run(['cp', '-r', str(tmp_path / 'model'), str(copy)],
                 check=True)
  assert (copy / 'variables' / 'v').read_text() == 'v2'
  # Only the listing of what model/ holds (named by its inode) is left.
  assert os.listdir(layout.models) == [
      f'listing-{os.lstat(layout.model).st_ino}.json']


def test_without_an_exchange_the_earlier_model_stays_until_the_new_is_whole(
    tmp_path, monkeypatch):
  """Where renameat2 cannot exchange: two renames; a kill between them
  puts the earlier model back on the next use of the folder."""
  layout = Layout(str(tmp_path))
  _stage(layout, 'v1')
  layout.take_model()
  _stage(layout, 'v2')
  monkeypatch.setattr(atomic_files, 'exchange', lambda a, b: False)
  real_rename = os.rename
  calls = []

  def rename(src, dst, *args, **kwargs):
    calls.append(dst)
    if dst == layout.model:
      raise KeyboardInterrupt('killed between the two renames')
    return real_rename(src, dst, *args, **kwargs)

  monkeypatch.setattr(os, 'rename', rename)
  with pytest.raises(KeyboardInterrupt):
    layout.take_model()
  monkeypatch.setattr(os, 'rename', real_rename)
  assert not os.path.lexists(layout.model)  # The window the docs name.
  Layout(str(tmp_path)).recover()
  assert (tmp_path / 'model' / 'saved_model.pb').read_text() == 'v1'
  _stage(layout, 'v3')
  Layout(str(tmp_path)).take_model()
  assert (tmp_path / 'model' / 'saved_model.pb').read_text() == 'v3'


def test_a_model_link_of_an_earlier_version_becomes_a_folder(tmp_path):
  """model -> .models/model-<v> (before this version): replaced by a real
  folder, the version it pointed to removed."""
  layout = Layout(str(tmp_path))
  _write(tmp_path, {'.models/model-1/saved_model.pb': 'old'})
  os.symlink('.models/model-1', str(tmp_path / 'model'))
  _stage(layout, 'new')
  layout.take_model()
  assert not os.path.islink(layout.model)
  assert (tmp_path / 'model' / 'saved_model.pb').read_text() == 'new'
  assert not (tmp_path / '.models' / 'model-1').exists()


# Item 5: checkpoints fsynced before they count; no temporary folder left.
def test_checkpoint_files_are_fsynced_before_latest_json_names_them(
    tmp_path, monkeypatch):
  """Every file of a checkpoint is fsynced before latest.json is written."""
  from generic_trainer import resume  # pylint: disable=g-import-not-at-top
  synced = []
  real_fsync = os.fsync

  def fsync(fd):
    synced.append(os.readlink(f'/proc/self/fd/{fd}'))
    return real_fsync(fd)

  monkeypatch.setattr(os, 'fsync', fsync)
  order = []
  real_write_json = atomic_files.write_json

  def write_json(path, *args, **kwargs):
    if path.endswith(resume.LATEST_FILE):
      order.append(list(synced))
    return real_write_json(path, *args, **kwargs)

  monkeypatch.setattr(atomic_files, 'write_json', write_json)

  def write_files(folder):
    for name in ('model.weights.h5', 'arrays.npz'):
      with open(os.path.join(folder, name), 'wb') as f:
        f.write(b'x' * 10)

  resume.write_checkpoint(str(tmp_path), 7, write_files, {'step': 7})
  before = [os.path.basename(p) for p in order[0]]
  assert 'model.weights.h5' in before and 'arrays.npz' in before, before


def test_a_killed_remote_checkpoint_leaves_no_temporary_folder(tmp_path):
  """SIGKILL while a checkpoint for an object store is written locally:
  the next scratch folder's clean-up removes the local copy."""
  tmp = tmp_path / 'tmp'
  tmp.mkdir()
  script = textwrap.dedent('''
      import os, signal
      from generic_trainer import resume

      def write_files(folder):
        open(os.path.join(folder, 'model.weights.h5'), 'w').close()
        os.kill(os.getpid(), signal.SIGKILL)

      resume.write_checkpoint('ram://bucket/ckpt', 1, write_files, {})
      ''')
  env = dict(command_env(), TMPDIR=str(tmp))
  process = subprocess.run([sys.executable, '-c', script], env=env,
                           check=False, capture_output=True, text=True)
  assert process.returncode == -9, process.stderr[-2000:]
  assert os.listdir(tmp)  # The kill left the local copy...
  from generic_trainer.system import scratch  # pylint: disable=g-import-not-at-top
  scratch.remove_stale(str(tmp))
  assert os.listdir(tmp) == []  # ...which the next clean-up removes.
