"""Trust by descriptor, folders private from birth (issue 49): the cache
folder opened once without following a link and used through that
descriptor; the folders we create 0700, parents included, whatever the
umask; TMPDIR held to the rule of the output and the cache; a child's
request read only from a folder of ours; outputs as private as the inputs,
the base model's included, on the pipeline's path too.

The attacks run as root (tests/needs-root.txt): the other user is uid
65534 (`nobody`), whose
moves are made by a real process of that user (`setpriv`), in folders of
group 65534 that the group can write, as a team's folders are."""

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import REPO, TESTDATA, command_env
from message_parts import assert_four_parts
from other_user import NOBODY, as_nobody, reachable_folder
from generic_trainer.command import cli_args
from generic_trainer.command import run as command_run
from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.data.kept import folder as kept_folder
from generic_trainer.errors import UnsafeFolderError
from generic_trainer.launch import child_process
from generic_trainer.system import scratch
from generic_trainer.system import trust


@pytest.fixture
def team(tmp_path):
  """A folder of ours that group 65534 may write (mode 2775), where that
  user can reach it (pytest's base folder is 0700)."""
  with reachable_folder('team', 0o2775, group=NOBODY) as path:
    yield path


def _mode(path):
  return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_cache_folder_and_its_parents_are_made_private_under_umask_002(
    tmp_path):
  """The default ~/.cache/tfx-generic-trainer/parsed-rows, made by a
  training under umask 002: 0700 each, parents included (they were 0775:
  a group member could put a link in the folder's place)."""
  code = ('import os\nos.umask(0o002)\n'  # What a store does on entering.
          'from generic_trainer.data.kept import folder, settings\n'
          'path = settings.checked_folder(None)\n'
          'os.close(folder.open_marked(path, "the cache"))\nprint(path)\n')
  home = tmp_path / 'xdg'
  done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                        text=True, env=dict(command_env(),
                                            XDG_CACHE_HOME=str(home)))
  assert done.returncode == 0, done.stderr
  folder = done.stdout.strip()
  assert folder == str(home / 'tfx-generic-trainer' / 'parsed-rows')
  for path in (home, home / 'tfx-generic-trainer', folder):
    assert _mode(path) == 0o700, path


def test_a_link_a_group_member_puts_in_place_of_the_cache_is_refused(
    tmp_path, team):
  """In a group-writable folder the cache is refused before any swap:
  a member could rename it aside (`trust.check_ancestors`, naming the
  folder and the fix); in a sticky shared folder, where no one can rename
  ours, a link another user puts where the cache will be is refused,
  naming who made it; the folder it points to keeps everything."""
  victim = tmp_path / 'victim'
  (victim / 'thesis').mkdir(parents=True)
  (victim / 'thesis' / 'chapter1.tex').write_text('mine')
  with pytest.raises(UnsafeFolderError) as info:
    with kept_cache.SpanCache(str(team / 'parsed-rows')):
      pass
  message = str(info.value)
  assert message.startswith(
      f'The parsed rows cache folder {team}/parsed-rows is inside {team}, '
      'which is not safe to hold it: it is writable by group (mode 2775, no '
      'sticky bit).')
  assert f'`chmod +t {team}`' in message
  assert_four_parts(message)
  with reachable_folder('shared', 0o1777) as shared:
    as_nobody('ln', '-s', str(victim), f'{shared}/parsed-rows')
    with pytest.raises(UnsafeFolderError) as info:
      with kept_cache.SpanCache(str(shared / 'parsed-rows'), budget_bytes=0):
        pass
    message = str(info.value)
    assert message.startswith(
        f'The parsed rows cache folder {shared}/parsed-rows is a link to '
        f"'{victim}' made by nobody (uid 65534), not by root (uid 0) who runs "
        'this')
    assert_four_parts(message)
  assert (victim / 'thesis' / 'chapter1.tex').read_text() == 'mine'


def test_the_cache_is_used_through_the_folder_it_opened(tmp_path):
  """The cache folder swapped for a link while a training uses it:
  eviction works in the folder opened at the start, never in the one the
  path names by then."""
  cache = tmp_path / 'rows'
  victim = tmp_path / 'victim'
  entry = 'ab' * 20
  (victim / entry).mkdir(parents=True)  # Entry-like, not ours to remove.
  (victim / entry / 'blocks.bin').write_text('mine')
  with kept_cache.SpanCache(str(cache), budget_bytes=0):
    (cache / ('cd' * 20)).mkdir()  # An entry of ours: evicted on leaving.
    (cache / ('cd' * 20) / kept_folder.ENTRY_MANIFEST).write_text('{}')
    (cache / ('cd' * 20) / 'blocks.bin').write_bytes(b'0' * 10)
    os.rename(cache, tmp_path / 'moved')
    os.symlink(victim, cache)
  assert (victim / entry / 'blocks.bin').read_text() == 'mine'
  assert sorted(os.listdir(tmp_path / 'moved')) == [kept_folder.MARKER,
                                                    kept_folder.DECISIONS]


@pytest.mark.parametrize('mode, owner, refused', [
    (0o2775, 0, 'it is writable by group (mode 2775, no sticky bit)'),
    (0o0755, NOBODY, 'it is owned by nobody (uid 65534), not by root'),
    (0o1777, 0, None), (0o0700, 0, None)])
def test_tmpdir_is_held_to_the_rule_of_the_output_folder(
    tmp_path, monkeypatch, mode, owner, refused):
  """A team's group-writable TMPDIR, or another user's, is refused for
  scratch, saying what to do; one with the sticky bit (as /tmp), or ours
  alone, is used."""
  tmpdir = tmp_path / 'scratch'
  tmpdir.mkdir()
  os.chown(tmpdir, owner, NOBODY)
  os.chmod(tmpdir, mode)
  monkeypatch.setenv('TMPDIR', str(tmpdir))
  monkeypatch.setattr(scratch.tempfile, 'tempdir', None)
  if refused is None:
    with scratch.folder('cache') as made:
      assert os.path.dirname(made) == str(tmpdir)
    return
  with pytest.raises(UnsafeFolderError) as info:
    with scratch.folder('cache'):
      pass
  message = str(info.value)
  assert message.startswith(
      f'The temporary folder {tmpdir} (TMPDIR) is not safe for scratch '
      f'folders: {refused}')
  assert 'export TMPDIR=~/tmp' in message
  assert_four_parts(message)
  assert os.listdir(tmpdir) == []


@pytest.mark.slow
def test_a_child_reads_its_request_only_from_a_folder_of_its_own(team):
  """In a group-writable TMPDIR another user moves a child's scratch
  folder aside during its start-up and puts a folder with a request of
  theirs in its place: the child refuses to read it, and writes nothing
  where that request says (it read the request and reported there)."""
  folder = team / 'generic-trainer-child-1-abc'
  folder.mkdir(mode=0o700)
  request = folder / 'request.json'
  request.write_text('{}')
  forged = team / 'forged'
  pwned = team / 'pwned.json'
  as_nobody('sh', '-c', f'mv {folder} {team}/aside && mkdir {folder} && '
             f"echo '{json.dumps({'request': {}, 'result_path': str(pwned)})}'"
             f' > {request} && echo > {forged}')
  done = subprocess.run(
      [sys.executable, '-m', child_process.CHILD_MODULE, str(request)],
      capture_output=True, text=True, env=command_env())
  assert done.returncode == 1
  assert not pwned.exists()
  assert (f'The training request {request} is not safe to read: its folder '
          f'{folder} is owned by uid 65534, not you.') in done.stderr
  assert_four_parts(done.stderr.strip().splitlines()[-1])


def test_a_private_base_model_makes_the_outputs_private(tmp_path):
  """A model fine-tuned from a base model whose files only its owner may
  read is written into a 0700 output folder, whatever the data's modes
  (it was 0755: the new model, made from the private one, readable by
  all)."""
  base = tmp_path / 'base'
  (base / 'variables').mkdir(parents=True)
  for rel in ('saved_model.pb', 'variables/variables.index'):
    (base / rel).write_text('')
    os.chmod(base / rel, 0o600)
  module = tmp_path / 'mod.py'
  module.write_text('def run_fn(fn_args):\n  pass\n')
  data = tmp_path / 'train.csv'
  data.write_text('a,b\n1,2\n')
  os.chmod(data, 0o644)
  request = cli_args.parse(
      ['--module-file', str(module), '--train-data', str(data),
       '--output-dir', str(tmp_path / 'out'), '--base-model', str(base),
       '--parsed-rows-cache', 'off'], 0.0)
  with command_run.holding_folder(request):
    assert os.umask(0o077) == 0o077  # What the run writes: 0600, 0700.
  assert _mode(tmp_path / 'out') == 0o700


@pytest.mark.slow
def test_the_executor_writes_as_privately_as_its_inputs_under_umask_002(
    trainer_io, penguin_artifacts, tmp_path):
  """The pipeline's path: examples only their owner may read, umask 002:
  the Model and ModelRun folders are 0700 and nothing in them is
  readable or writable by group or others (they were 0775, files 0664)."""
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples, _ = penguin_artifacts
  io = trainer_io(module_file=os.path.join(TESTDATA, 'counts_rows.py'))
  private = io[0]['examples'][0].__class__()
  private.uri = str(tmp_path / 'examples')
  private.split_names = examples.split_names
  shutil.copytree(examples.uri, private.uri)
  for folder, _, files in os.walk(private.uri):
    for name in files:
      os.chmod(os.path.join(folder, name), 0o600)
  io[0]['examples'] = [private]
  for artifact in io[1]['model'] + io[1]['model_run']:
    os.mkdir(artifact.uri, 0o775)  # As TFX makes them, under umask 002.
    os.chmod(artifact.uri, 0o775)
  mask = os.umask(0o002)
  try:
    GenericExecutor().Do(*io)
  finally:
    os.umask(mask)
  for artifact in io[1]['model'] + io[1]['model_run']:
    assert _mode(artifact.uri) == 0o700, artifact.uri
    for folder, dirs, files in os.walk(artifact.uri):
      for name in dirs + files:
        path = os.path.join(folder, name)
        assert not _mode(path) & 0o077, (path, oct(_mode(path)))


def test_a_folder_of_ones_own_group_of_one_may_hold_the_outputs_under_umask_002(
    tmp_path, penguin_csvs):
  """Ubuntu's and Debian's users: umask 002 and a group of their own that
  holds no one else (`useradd`'s user-private group), so every folder they
  make is 0775. The command's output folder in such a folder trains and
  publishes (it was refused: 'writable by group'); a group with another
  member stays refused (tests/test_team_folder.py)."""
  uid, gid = os.geteuid(), os.getegid()
  if not trust.owners_group_alone(gid, uid):
    pytest.skip(f'this user (uid {uid}) has no group of their own alone '
                f'(gid {gid}): the case needs one, as `useradd` makes')
  projects = tmp_path / 'projects'
  projects.mkdir()
  os.chmod(projects, 0o775)
  os.chmod(tmp_path, 0o775)
  done = subprocess.run(
      [sys.executable, '-c', 'import os, sys\nos.umask(0o002)\n'
       'from generic_trainer.command import cli\n'
       'sys.exit(cli.main(sys.argv[1:]))',
       '--module-file', os.path.join(REPO, 'module_files', 'penguin_spec.py'),
       '--train-data', str(penguin_csvs[0]), '--output-dir',
       str(projects / 'out'), '--steps', '5'],
      capture_output=True, text=True, env=command_env(), timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  assert (projects / 'out' / 'model' / 'saved_model.pb').exists()
  assert not _mode(projects / 'out' / 'model') & 0o022
