"""Safe where other runs and other people are (issue 26): one run per
folder, only our own files deleted, `model/` swapped without disappearing,
private outputs, scratch folders found stale by their lock, every file
written whole. Fast: no training here (see test_shared_machine_runs.py)."""

import ast
import os
import re
import stat
import subprocess
import sys

import pytest

from conftest import REPO, command_env
from other_user import reachable_folder
from generic_trainer.system import trust
from generic_trainer.system import atomic_files
from generic_trainer.system import owner_lock
from generic_trainer.system import paths
from generic_trainer.system import scratch
from generic_trainer.errors import (FolderInUseError, InvalidArgumentError,
                                    ModelFolderError, UnsafeFolderError)
from generic_trainer.system import manifest
from generic_trainer.system import output_folder
from generic_trainer.command.layout import Layout

_HOLD = ('import sys, time\n'
         'from generic_trainer.system import output_folder\n'
         'with output_folder.hold(sys.argv[1]):\n'
         '  print("held", flush=True)\n'
         '  time.sleep(120)\n')


@pytest.fixture
def held_folder(tmp_path):
  """An output folder whose lock another process holds: (folder, pid)."""
  folder = tmp_path / 'out'
  holder = subprocess.Popen([sys.executable, '-c', _HOLD, str(folder)],
                            stdout=subprocess.PIPE, text=True,
                            env=command_env())
  try:
    assert holder.stdout.readline().strip() == 'held'
    yield folder, holder.pid
  finally:
    holder.kill()
    holder.wait()


def test_a_second_run_into_a_held_folder_stops_naming_the_holder(
    held_folder, penguin_csvs, capsys):
  """The command exits 1 naming the process that holds the folder, and
  deletes nothing of the first run's."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  folder, pid = held_folder
  (folder / 'run').mkdir()
  (folder / 'run' / 'events').write_text('first run')
  manifest.finish(str(folder), ['run'], set())
  module = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  status = cli.main(['--module-file', module, '--train-data', penguin_csvs[0],
                     '--output-dir', str(folder)])
  err = capsys.readouterr().err
  assert status == 1, err
  assert re.search(
      rf'FolderInUseError: --output-dir {re.escape(str(folder))} is in use '
      rf'by another run: process {pid} of user \S+ on \S+ \(.*\), since .*'
      r'Expected one run per output folder at a time', err), err
  assert (folder / 'run' / 'events').read_text() == 'first run'


def test_the_estimator_holds_its_model_dir(held_folder):
  """The notebook Estimator refuses a model_dir another run holds."""
  from generic_trainer.notebook.estimator import Estimator  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  folder, pid = held_folder
  est = Estimator(PenguinSpec, str(folder))
  with pytest.raises(FolderInUseError, match=f'process {pid} '):
    est.train('unused.csv')


def test_the_lock_is_free_again_when_its_holder_is_killed(tmp_path):
  """SIGKILL frees the folder: the kernel drops the lock."""
  folder = tmp_path / 'out'
  holder = subprocess.Popen([sys.executable, '-c', _HOLD, str(folder)],
                            stdout=subprocess.PIPE, text=True,
                            env=command_env())
  assert holder.stdout.readline().strip() == 'held'
  holder.kill()
  holder.wait()
  with output_folder.hold(str(folder)):
    assert owner_lock.in_use(str(folder / output_folder.LOCK_FILE))


def _run_once(layout, files, keep=None, checkpoint=None):
  """What a run does to the folder: clear, write `files` (through the
  run's writer, which notes them in its journal), record."""
  layout.clear(keep=keep, checkpoint=checkpoint)
  for rel, text in files.items():
    atomic_files.write_text(os.path.join(layout.root, rel), text)
  layout.record()


def test_a_users_file_in_a_run_folder_survives_the_next_run(tmp_path):
  """data/raw/labels.csv, put in data/ after a run, is kept; what the run
  wrote there is removed."""
  layout = Layout(str(tmp_path))
  _run_once(layout, {'data/Split-train/data.gz': 'x', 'run/history.json': '',
                     'hyperparameters/hyperparameters.json': '{}'})
  (tmp_path / 'data' / 'raw').mkdir()
  (tmp_path / 'data' / 'raw' / 'labels.csv').write_text('mine')
  (tmp_path / 'notes.txt').write_text('mine too')
  Layout(str(tmp_path)).clear()
  assert (tmp_path / 'data' / 'raw' / 'labels.csv').read_text() == 'mine'
  assert (tmp_path / 'notes.txt').read_text() == 'mine too'
  assert not (tmp_path / 'data' / 'Split-train').exists()
  assert not (tmp_path / 'run').exists()
  assert not (tmp_path / 'hyperparameters').exists()


def test_a_killed_runs_files_are_removed_but_not_what_was_there_before(
    tmp_path):
  """A run killed before recording what it wrote: the next run removes
  the folders it left empty, and keeps what a user had put there and
  the files the killed run wrote by path without claiming them (an
  event file: a name is no proof, row 562)."""
  layout = Layout(str(tmp_path))
  _run_once(layout, {'run/history.json': ''})
  (tmp_path / 'run' / 'mine.txt').write_text('mine')
  Layout(str(tmp_path)).clear()  # Killed: no record().
  (tmp_path / 'run' / 'tensorboard').mkdir(parents=True)
  (tmp_path / 'run' / 'tensorboard' / 'events').write_text('')
  (tmp_path / 'data' / 'Split-train').mkdir(parents=True)
  Layout(str(tmp_path)).clear()
  assert sorted(os.listdir(tmp_path / 'run')) == ['mine.txt', 'tensorboard']
  assert (tmp_path / 'run' / 'tensorboard' / 'events').exists()
  assert not (tmp_path / 'data').exists()


def test_a_folder_of_an_older_version_loses_only_the_names_it_wrote(
    tmp_path):
  """A plain-text marker (before the manifest): the names that version
  wrote are removed, a user's file in data/ stays."""
  (tmp_path / '.generic-trainer').write_text('Written by generic-trainer')
  for rel in ('data/Split-train/data.gz', 'data/raw/labels.csv',
              'schema/schema.pbtxt', '.resume-abc/latest.json'):
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text('')
  Layout(str(tmp_path)).clear()
  assert sorted(os.listdir(tmp_path / 'data')) == ['raw']
  assert not (tmp_path / 'schema').exists()
  assert not (tmp_path / '.resume-abc').exists()


def test_the_resumed_checkpoint_is_kept_and_stays_the_runs(tmp_path):
  """clear(keep=...) keeps the checkpoint; the next run may remove it."""
  layout = Layout(str(tmp_path))
  checkpoint = str(tmp_path / '.resume-k1')
  _run_once(layout, {'.resume-k1/latest.json': '{}'}, checkpoint=checkpoint)
  _run_once(Layout(str(tmp_path)), {}, keep=checkpoint, checkpoint=checkpoint)
  assert (tmp_path / '.resume-k1' / 'latest.json').exists()
  Layout(str(tmp_path)).clear(checkpoint=str(tmp_path / '.resume-k2'))
  assert not (tmp_path / '.resume-k1').exists()


def _stage(layout, text):
  from generic_trainer.keys import SERVING_MODEL_DIR  # pylint: disable=g-import-not-at-top
  staged = os.path.join(layout.publishing, SERVING_MODEL_DIR)
  os.makedirs(staged)
  with open(os.path.join(staged, 'saved_model.pb'), 'w') as f:
    f.write(text)


def test_model_is_swapped_by_one_rename_and_never_disappears(tmp_path,
                                                             monkeypatch):
  """model/ is a real folder; each rename leaves a model/ in place, and
  the old model is deleted after the exchange."""
  layout = Layout(str(tmp_path))
  _stage(layout, 'v1')
  layout.take_model()
  assert os.path.isdir(layout.model) and not os.path.islink(layout.model)
  _stage(layout, 'v2')
  renames = []
  real_rename, real_replace = os.rename, os.replace

  def watched(real):
    def rename(src, dst, *args, **kwargs):
      renames.append(os.path.isfile(os.path.join(layout.model,
                                                 'saved_model.pb')))
      return real(src, dst, *args, **kwargs)
    return rename

  monkeypatch.setattr(os, 'rename', watched(real_rename))
  monkeypatch.setattr(os, 'replace', watched(real_replace))
  layout.take_model()
  assert renames and all(renames), renames
  assert (tmp_path / 'model' / 'saved_model.pb').read_text() == 'v2'
  assert os.listdir(layout.models) == [
      f'listing-{os.lstat(layout.model).st_ino}.json']


def test_a_model_folder_of_an_older_version_is_exchanged(tmp_path):
  """A model/ folder without a listing (before the links) is replaced."""
  layout = Layout(str(tmp_path))
  (tmp_path / 'model').mkdir()
  (tmp_path / 'model' / 'saved_model.pb').write_text('old')
  _stage(layout, 'new')
  layout.take_model()
  assert not os.path.islink(layout.model)
  assert (tmp_path / 'model' / 'saved_model.pb').read_text() == 'new'
  assert len(os.listdir(layout.models)) == 1  # Its listing.


def test_a_model_link_no_run_made_is_refused_before_training(tmp_path):
  """model -> elsewhere: refused, the link and its target untouched."""
  target = tmp_path / 'served'
  target.mkdir()
  (target / 'saved_model.pb').write_text('served')
  out = tmp_path / 'out'
  out.mkdir()
  os.symlink(str(target), str(out / 'model'))
  (out / '.generic-trainer').write_text('{}')
  with pytest.raises(ModelFolderError, match=re.escape(
      f"{out}/model is a link to '{target}', which no run made.")):
    Layout(str(out)).clear()
  assert (target / 'saved_model.pb').read_text() == 'served'


def test_a_model_mount_point_is_refused_before_training(tmp_path,
                                                        monkeypatch):
  """model/ as a mount point is refused with what to do."""
  out = tmp_path / 'out'
  (out / 'model').mkdir(parents=True)
  mount = str(out / 'model')
  real = os.path.ismount
  monkeypatch.setattr(os.path, 'ismount', lambda p: p == mount or real(p))
  with pytest.raises(ModelFolderError, match=re.escape(
      f'{mount} is a mount point.') + '.*Unmount it'):
    Layout(str(out)).check_model_place()


def test_an_output_folder_writable_by_others_is_refused(tmp_path, capsys):
  """A group- or world-writable folder (no sticky bit) exits 2 saying why."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'shared'
  out.mkdir()
  out.chmod(0o777)
  data = tmp_path / 'd.csv'
  data.write_text('a,b\n1,2\n')
  status = cli.main(['--module-file', os.path.join(
      REPO, 'module_files', 'penguin_spec.py'), '--train-data', str(data),
                     '--output-dir', str(out)])
  assert status == 2
  # The group is no one else when it is the user's own group of one.
  who = ('others' if trust.owners_group_alone(os.getegid(), os.geteuid())
         else 'group and others')
  assert (f'--output-dir {out} is not safe to write: it is writable by {who} '
          '(mode 0777, no sticky bit).') in capsys.readouterr().err
  out.chmod(0o1777)
  output_folder.check(str(out))  # Sticky: others cannot replace our files.


def test_an_output_folder_of_another_user_is_refused(tmp_path, monkeypatch):
  """A folder owned by someone else is refused, naming the owner."""
  monkeypatch.setattr(os, 'geteuid', lambda: os.stat(tmp_path).st_uid + 1)
  with pytest.raises(UnsafeFolderError, match='it is owned by .*, not by '):
    output_folder.check(str(tmp_path), 'model_dir')


def test_csv_rows_keep_the_csv_files_permissions(tmp_path):
  """A 0600 CSV becomes a 0600 data.gz."""
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  csv_file = tmp_path / 'private.csv'
  csv_file.write_text('a,b\n1,2\n3,4\n')
  csv_file.chmod(0o600)
  out, = local_files.to_split([str(csv_file)], str(tmp_path / 'Split-train'))
  assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
  assert not [n for n in os.listdir(tmp_path / 'Split-train')
              if n.startswith(atomic_files.TEMP_PREFIX)]


def test_a_split_folder_with_a_users_file_is_refused_not_emptied(tmp_path):
  """A file no run wrote in a split folder stays, and the run says so."""
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  split = tmp_path / 'Split-train'
  split.mkdir()
  (split / 'mine.txt').write_text('mine')
  csv_file = tmp_path / 'd.csv'
  csv_file.write_text('a,b\n1,2\n')
  with pytest.raises(InputArtifactError, match=r"holds \['mine.txt'\], which "
                     'no run wrote'):
    local_files.to_split([str(csv_file)], str(split))
  assert (split / 'mine.txt').read_text() == 'mine'


def test_a_path_that_names_a_file_is_that_file(tmp_path):
  """`part[0].gz` is the file of that name, not a pattern; a pattern we
  make of a literal path matches it only."""
  (tmp_path / 'part[0].gz').write_text('')
  (tmp_path / 'part0.gz').write_text('')
  literal = str(tmp_path / 'part[0].gz')
  assert paths.user_files(literal) == [literal]
  assert paths.expand([paths.as_pattern(literal)]) == [literal]
  assert paths.expand([literal]) == [literal]
  assert paths.folder_pattern(str(tmp_path / 'exp[1]' / '*')) == str(
      tmp_path / 'exp[[]1]' / '*')


def test_scratch_folders_of_killed_processes_are_removed(tmp_path,
                                                         monkeypatch):
  """A SIGKILLed process's workers folder is removed by the next scratch
  folder made, a live one's is not, whatever PIDs their names hold."""
  monkeypatch.setenv('TMPDIR', str(tmp_path))
  monkeypatch.setattr('tempfile.tempdir', None)
  code = ('import sys, time\nfrom generic_trainer.system import scratch\n'
          'with scratch.folder("workers") as f:\n'
          '  print(f, flush=True)\n  time.sleep(120)\n')
  env = dict(command_env(), TMPDIR=str(tmp_path))
  killed, alive = [subprocess.Popen([sys.executable, '-c', code], env=env,
                                    stdout=subprocess.PIPE, text=True)
                   for _ in range(2)]
  try:
    killed_dir = killed.stdout.readline().strip()
    alive_dir = alive.stdout.readline().strip()
    killed.kill()
    killed.wait()
    with scratch.folder('cache') as mine:
      assert not os.path.exists(killed_dir)
      assert os.path.isdir(alive_dir) and os.path.isdir(mine)
  finally:
    alive.kill()
    alive.wait()


def test_an_unwritable_tmpdir_is_named(tmp_path, monkeypatch):
  """TMPDIR that does not exist is an error, not a silent /tmp."""
  monkeypatch.setenv('TMPDIR', str(tmp_path / 'nope'))
  with pytest.raises(InvalidArgumentError, match=re.escape(
      "TMPDIR does not exist. Expected a folder this user can write")):
    scratch.parent()


def test_children_do_not_put_site_packages_first(monkeypatch):
  """Installed, PYTHONPATH is the user's; from a checkout, it goes first."""
  import site  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import child_process  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv('PYTHONPATH', '/users/own/path')
  installed = site.getsitepackages()[0]
  monkeypatch.setattr(child_process, '_package_parent', lambda: installed)
  assert child_process.child_env()['PYTHONPATH'] == '/users/own/path'
  monkeypatch.setattr(child_process, '_package_parent', lambda: REPO)
  assert child_process.child_env()['PYTHONPATH'] == (
      f'{REPO}{os.pathsep}/users/own/path')


def test_an_interrupted_write_leaves_the_old_file(tmp_path):
  """A write that fails midway leaves the previous content, no temp."""
  target = tmp_path / 'train_result.json'
  atomic_files.write_json(str(target), {'v': 1})
  with pytest.raises(RuntimeError):
    with atomic_files.replacing_path(str(target)) as temp:
      with open(temp, 'w') as f:
        f.write('{"v": ')
      raise RuntimeError('killed')
  assert target.read_text() == '{"v": 1}'
  assert os.listdir(tmp_path) == ['train_result.json']


# Writers that may write in place, and why.
_IN_PLACE = {
    'system/atomic_files.py': 'the helper itself',
    'system/owner_lock.py': 'the lock file: replacing it would drop the lock',
    'system/console.py': "the command's log, appended to as it runs",
    'publication/staged_export.py': 'an empty probe that the folder can be written',
    'launch/private_network.py': "/proc files of the child's namespace",
    'data/tfrecords.py': 'its writer writes a temporary file that '
                         'atomic_files puts in place',
    'command/cli.py': "a new temporary file of its own (mkstemp) for an "
                    "unexpected error's traceback",
    'data/kept/entry.py': 'the files of an entry, in its temporary folder, '
                          'which is synced and renamed into place whole',
}
_WRITE_CALLS = ('open', 'GFile', 'fdopen')
_ALWAYS_WRITES = ('json.dump', 'shutil.copyfile', 'shutil.copy',
                  'shutil.copy2', 'write_text', 'write_bytes',
                  'TFRecordWriter')


def _writes_in_place(path):
  """Lines of `path` that open a file for writing, or copy or dump into
  one, without atomic_files."""
  with open(path) as f:
    tree = ast.parse(f.read())
  found = []
  for node in ast.walk(tree):
    if not isinstance(node, ast.Call):
      continue
    name = ast.unparse(node.func)
    if name.startswith('atomic_files.'):
      continue
    short = name.rsplit('.', 1)[-1]
    modes = [a.value for a in node.args[1:2] + [
        k.value for k in node.keywords if k.arg == 'mode']
             if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if (short in _WRITE_CALLS and any(set(m) & set('wax+') for m in modes)) \
        or name in _ALWAYS_WRITES or short in _ALWAYS_WRITES:
      found.append(f'{path}:{node.lineno}: {name}')
  return found


def test_every_writer_goes_through_atomic_files():
  """No module of the package writes a file in place (but the few that
  must, named with their reason)."""
  root = os.path.join(REPO, 'generic_trainer')
  found = []
  for folder, _, files in os.walk(root):
    for name in files:
      path = os.path.join(folder, name)
      if name.endswith('.py') and os.path.relpath(path, root) not in _IN_PLACE:
        found += _writes_in_place(path)
  assert not found, 'write through generic_trainer.system.atomic_files:\n' + (
      '\n'.join(found))


def test_the_writer_scan_finds_a_write_in_place(tmp_path):
  """The scan above can fail."""
  module = tmp_path / 'm.py'
  module.write_text("import json\nwith open(p, 'w') as f:\n  json.dump(1, f)\n"
                    "g = tf.io.gfile.GFile(p, mode='wb')\n")
  assert sorted(line.split(': ')[1] for line in _writes_in_place(
      str(module))) == ['json.dump', 'open', 'tf.io.gfile.GFile']


def test_a_model_file_is_refused_before_training(tmp_path):
  """model as a plain file (no run wrote it) is refused, not deleted."""
  (tmp_path / 'model').write_text('mine')
  (tmp_path / '.generic-trainer').write_text('{}')
  with pytest.raises(ModelFolderError, match=re.escape(
      f'{tmp_path}/model is a file. Expected model to be absent')):
    Layout(str(tmp_path)).clear()
  assert (tmp_path / 'model').read_text() == 'mine'


def test_a_new_output_folder_is_as_private_as_its_inputs():
  """A 0600 input gives a 0700 output folder, and so does a 0644 one in a
  0700 folder (who can reach it decides); a 0644 one others can reach a
  0755 folder."""
  with reachable_folder('inputs', 0o755) as root:
    private, shared = root / 'private.csv', root / 'shared.csv'
    (root / 'home').mkdir(mode=0o700)
    unreachable = root / 'home' / 'shared.csv'
    for path, mode in ((private, 0o600), (shared, 0o644),
                       (unreachable, 0o644)):
      path.write_text('a\n1\n')
      path.chmod(mode)
    for name, inputs, expected in (
        ('private', [str(private), str(shared)], 0o700),
        ('unreachable', [str(unreachable)], 0o700),
        ('shared', [str(shared)], 0o755)):
      out = root / f'out-{name}'
      with output_folder.hold(str(out), inputs=inputs):
        pass
      assert stat.S_IMODE(os.stat(out).st_mode) == expected & ~_umask(), name


def _umask():
  mask = os.umask(0)
  os.umask(mask)
  return mask


def test_a_folder_is_replaced_without_disappearing(tmp_path, monkeypatch):
  """replace_folder: the target exists at every step, and a link there is
  replaced itself, its target untouched."""
  target, new = tmp_path / 'export', tmp_path / 'export.new'
  target.mkdir()
  (target / 'v').write_text('1')
  new.mkdir()
  (new / 'v').write_text('2')
  seen = []
  real = atomic_files.exchange
  monkeypatch.setattr(atomic_files, 'exchange', lambda a, b: (
      seen.append(os.path.isfile(target / 'v')), real(a, b))[1])
  atomic_files.replace_folder(str(new), str(target))
  assert seen == [True] and (target / 'v').read_text() == '2'
  assert sorted(os.listdir(tmp_path)) == ['export']
  elsewhere = tmp_path / 'elsewhere'
  elsewhere.mkdir()
  target.rename(tmp_path / 'real')
  os.symlink(str(elsewhere), str(target))
  new.mkdir()
  atomic_files.replace_folder(str(new), str(target))
  assert not os.path.islink(target) and elsewhere.is_dir()


def test_a_users_file_in_model_survives_the_next_publication(tmp_path):
  """A file put in model/ after publication is not deleted with the
  version it was put in; the rest of that version is."""
  layout = Layout(str(tmp_path))
  _stage(layout, 'v1')
  layout.take_model()
  (tmp_path / 'model' / 'notes.txt').write_text('mine')
  _stage(layout, 'v2')
  layout.take_model()
  assert (tmp_path / 'model' / 'saved_model.pb').read_text() == 'v2'
  earlier = [n for n in os.listdir(layout.models)
             if not n.startswith('listing-')]
  assert len(earlier) == 1
  assert os.listdir(os.path.join(layout.models, earlier[0])) == ['notes.txt']
  (tmp_path / '.generic-trainer').write_text('{}')
  Layout(str(tmp_path)).clear()  # The next run's clean-up: it stays.
  assert os.listdir(os.path.join(layout.models, earlier[0])) == ['notes.txt']


def test_a_run_folder_that_is_a_link_is_refused_not_written_through(
    tmp_path):
  """data -> elsewhere: refused before anything is written through it."""
  elsewhere = tmp_path / 'elsewhere'
  elsewhere.mkdir()
  out = tmp_path / 'out'
  out.mkdir()
  os.symlink(str(elsewhere), str(out / 'data'))
  (out / '.generic-trainer').write_text('{}')
  with pytest.raises(UnsafeFolderError, match=re.escape(
      f"{out}/data is a link to '{elsewhere}', which no run made.")):
    Layout(str(out)).clear()
  assert os.listdir(elsewhere) == []
