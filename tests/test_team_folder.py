"""Attacked as its users (issue 55, scopes 2, 3 and 6): a victim's run as
an ordinary uid, a teammate as a second uid of the same group, in a
team's shared 2775 folder (`other_user.team_folder`). Each step of the
victim's run is driven in-process as that uid (`other_user.started_as`,
a forked child), so that the teammate's move, made by a real process of
hers, is timed at the step (after the lock, during staging, while data is
written) by a flag file polled as inotify would tell.

Each of these ran as a test on main before issue 55 and failed there
(the run published into the teammate's folder; the staging cleanup
emptied `~/thesis` through a link; ...): see the threat model's rows."""

import logging
import os
import pathlib
import stat
import subprocess

import pytest

from message_parts import assert_four_parts
from other_user import (TEAMMATE, VICTIM, as_user, home, started_as,
                        team_folder, wait_for)
from generic_trainer.command import cli_args
from generic_trainer.command import layout as command_layout
from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.errors import InvalidArgumentError, UnsafeFolderError
from generic_trainer.system import atomic_files
from generic_trainer.system import manifest
from generic_trainer.system import output_folder
from generic_trainer.system import paths
from generic_trainer.system import progress
from generic_trainer import resume
from generic_trainer.publication.staged_export import StagedExport

_HEX = '0123456789abcdef' * 2 + '01234567'  # 40 hex digits: a git sha.


@pytest.fixture
def team():
  with team_folder() as path:
    yield path


def _mode(path):
  return stat.S_IMODE(os.lstat(path).st_mode)


def _run_holding(out: str, flags: pathlib.Path) -> str:
  """The victim's run, as far as it goes: holds its output folder, says
  so (`locked`), waits for the teammate (`swapped`), then publishes."""
  try:
    with output_folder.hold(out):
      (flags / 'locked').touch()
      wait_for(flags / 'swapped')
      atomic_files.write_text(os.path.join(out, 'model.txt'), 'weights')
    return 'published'
  finally:
    (flags / 'done').touch()


def _swap_aside(out: str) -> None:
  """The teammate: the victim's folder renamed aside, one of hers (0777)
  in its place."""
  os.rename(out, out + '.aside')
  os.mkdir(out)
  os.chmod(out, 0o777)


def test_an_output_folder_in_a_team_folder_cannot_be_swapped_after_the_lock(
    team):
  """A teammate renames the victim's output folder aside just after the
  lock and puts a 0777 folder of hers in its place: the run never
  publishes there. It is refused before anything is made, naming the
  team folder and the fix (`chmod +t`) (on main: exit 0, published into
  her folder)."""
  out = str(team / 'out')
  flags = home(team, VICTIM) / 'flags'
  as_user(VICTIM, os.mkdir, str(flags))
  wait = started_as(VICTIM, _run_holding, out, flags)
  while not (wait_for(flags / 'locked', 0.05) or os.path.exists(
      flags / 'done')):
    pass
  if os.path.exists(flags / 'locked'):
    as_user(TEAMMATE, _swap_aside, out)
    (flags / 'swapped').touch()
  with pytest.raises(UnsafeFolderError) as info:
    wait()
  message = str(info.value)
  assert message.startswith(
      f'--output-dir {out} is inside {team}, which is not safe to hold it: '
      'it is writable by group (mode 2775, no sticky bit)')
  assert f'`chmod +t {team}`' in message
  assert_four_parts(message)
  assert sorted(os.listdir(team)) == []  # Nothing made, nothing hers used.


def test_a_sticky_team_folder_is_accepted(team):
  """With the sticky bit (`chmod +t`), members cannot rename what is not
  theirs: the same run holds its folder."""
  os.chmod(team, 0o3775)
  flags = home(team, VICTIM) / 'flags'
  as_user(VICTIM, os.mkdir, str(flags))
  (flags / 'swapped').touch()  # No swap: she cannot.
  assert as_user(VICTIM, _run_holding, str(team / 'out'), flags) == (
      'published')
  with pytest.raises(PermissionError):
    as_user(TEAMMATE, _swap_aside, str(team / 'out'))


def _prepare_staging(out: str) -> None:
  StagedExport(os.path.join(out, '.publishing'), keep_dir=out).prepare()


def test_the_staging_cleanup_never_follows_a_link(team):
  """A link at `.publishing/Format-Serving` to the victim's thesis: the
  cleanup before staging removes the link, never what it points to (on
  main, `tf.io.gfile.rmtree` emptied the thesis)."""
  own = home(team, VICTIM)
  thesis, out = own / 'thesis', own / 'out'
  for folder in (thesis, out, out / '.publishing'):
    folder.mkdir()
  (thesis / 'chapter1.tex').write_text('mine')
  serving, _ = paths.model_dirs(str(out / '.publishing'))
  os.symlink(thesis, serving)
  subprocess.run(['chown', '-R', '-h', f'{VICTIM}:{VICTIM}', str(own)],
                 check=True)
  try:
    as_user(VICTIM, _prepare_staging, str(out))
    failed = None
  except Exception as e:  # pylint: disable=broad-except
    failed = e  # On main: the thesis emptied, then 'Not a directory'.
  assert os.listdir(thesis) == ['chapter1.tex']
  assert failed is None
  assert not os.path.lexists(serving)


def _replace_swapping(path: str, secret: str) -> int:
  """Writes `path` through `replacing_path` while its temporary file is
  swapped for a link to `secret` (0600) as soon as it is made; the mode
  of `secret` after."""
  real = atomic_files.tempfile.mkstemp

  def made_then_swapped(*args, **kwargs):
    fd, temp = real(*args, **kwargs)
    os.unlink(temp)
    os.symlink(secret, temp)
    return fd, temp

  atomic_files.tempfile.mkstemp = made_then_swapped
  try:
    with atomic_files.replacing_path(path, 0o644):
      pass
  except OSError:
    pass  # Its fsync opens the temporary file without following a link.
  finally:
    atomic_files.tempfile.mkstemp = real
  return _mode(secret)


def test_a_temporary_file_is_chmodded_through_its_descriptor(team):
  """The temporary file of a write swapped for a link to the victim's
  0600 file as it is made: the chmod is the file's made, through its
  descriptor; the victim's file stays 0600 (on main: 0644, by path)."""
  own = home(team, VICTIM)
  secret = own / 'secret.txt'
  as_user(VICTIM, _write_private, str(secret))
  assert as_user(VICTIM, _replace_swapping, str(own / 'out.json'),
                 str(secret)) == 0o600


def _write_private(path: str) -> None:
  fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
  os.write(fd, b'private')
  os.close(fd)


def _parse_with_cache(folder: str, workdir: str):
  module = os.path.join(workdir, 'mod.py')
  data = os.path.join(workdir, 'train.csv')
  with open(module, 'w') as f:
    f.write('def run_fn(fn_args):\n  pass\n')
  with open(data, 'w') as f:
    f.write('a,b\n1,2\n')
  cli_args.parse(['--module-file', module, '--train-data', data,
                  '--output-dir', os.path.join(workdir, 'run'),
                  '--parsed-rows-cache', folder], 0.0)


def _make_snapshots(folder: str) -> None:
  os.makedirs(os.path.join(folder, _HEX))
  with open(os.path.join(folder, _HEX, 'config.json'), 'w') as f:
    f.write('{"hub": true}')


def _open_cache(folder: str) -> None:
  with kept_cache.SpanCache(folder, budget_bytes=0):
    pass


def test_a_folder_of_hex_named_folders_is_not_taken_for_a_cache(team):
  """A model hub's `snapshots/` (folders named by 40 hex digits, no
  manifest of ours) named as the cache: refused by the arguments and by
  the store, nothing marked, nothing emptied (on main: marked and
  emptied)."""
  own = home(team, VICTIM)
  snapshots = str(own / 'hub' / 'snapshots')
  as_user(VICTIM, _make_snapshots, snapshots)
  for step in (lambda: as_user(VICTIM, _parse_with_cache, snapshots,
                               str(own)),
               lambda: as_user(VICTIM, _open_cache, snapshots)):
    with pytest.raises(UnsafeFolderError) as info:
      step()
    assert (f'is not a folder of parsed rows alone: {_HEX}/.' in
            str(info.value))
  assert os.listdir(snapshots) == [_HEX]
  assert os.listdir(os.path.join(snapshots, _HEX)) == ['config.json']


def _make_private_cache(folder: str) -> None:
  os.makedirs(folder)
  os.chmod(folder, 0o700)


def test_another_users_cache_is_our_error_not_a_traceback(team):
  """The victim names the teammate's cache (0700): our error, which says
  what to do (on main: a raw PermissionError)."""
  theirs = str(home(team, TEAMMATE) / 'rows')
  as_user(TEAMMATE, _make_private_cache, theirs)
  with pytest.raises(UnsafeFolderError) as info:
    as_user(VICTIM, _parse_with_cache, theirs, str(home(team, VICTIM)))
  # Refused at its folder, the teammate's home (`trust.check_ancestors`),
  # before anything tries to enter it.
  assert theirs in str(info.value)
  assert_four_parts(str(info.value))


def _parse_fifo_schema(workdir: str) -> None:
  fifo = os.path.join(workdir, 'schema.pbtxt')
  os.mkfifo(fifo)
  module = os.path.join(workdir, 'mod.py')
  data = os.path.join(workdir, 'train.csv')
  for path, text in ((module, 'def run_fn(fn_args):\n  pass\n'),
                     (data, 'a,b\n1,2\n')):
    with open(path, 'w') as f:
      f.write(text)
  cli_args.parse(['--module-file', module, '--train-data', data,
                  '--output-dir', os.path.join(workdir, 'run'),
                  '--schema', fifo], 0.0)


def test_a_fifo_given_as_the_schema_is_said_to_be_no_regular_file(team):
  """`--schema` naming a FIFO: 'is not a regular file', not 'does not
  exist'."""
  with pytest.raises(InvalidArgumentError,
                     match='--schema is not a regular file'):
    as_user(VICTIM, _parse_fifo_schema, str(home(team, VICTIM)))


def _warnings_of(fn, *args):
  """(what `fn(*args)` returned, the warnings it logged)."""
  found = []

  class Kept(logging.Handler):

    def emit(self, record):
      found.append(record.getMessage())

  handler = Kept(logging.WARNING)
  progress.log().addHandler(handler)
  try:
    return fn(*args), found
  finally:
    progress.log().removeHandler(handler)


def _killed_then_mine(out: str):
  """A run that writes its split and is killed (no record); the user then
  adds `data/Split-mine/data.gz`; the next run's clean-up."""
  first = command_layout.Layout(out)
  first.clear()
  atomic_files.write_text(os.path.join(first.data, 'Split-train', 'data.gz'),
                          'rows')
  mine = os.path.join(first.data, 'Split-mine', 'data.gz')
  os.mkdir(os.path.dirname(mine))
  with open(mine, 'w') as f:  # The user's, not through the run's writer.
    f.write('my rows')
  _, said = _warnings_of(command_layout.Layout(out).clear)
  return (os.path.exists(mine), os.path.exists(
      os.path.join(first.data, 'Split-train', 'data.gz')), said)


def test_a_killed_runs_clean_up_keeps_a_users_file_of_a_runs_name(team):
  """After a kill, `data/Split-mine/data.gz` (a run's file name, in a
  split folder the run does not write) stays, named once (on main:
  removed for its name)."""
  out = str(home(team, VICTIM) / 'out')
  mine_kept, runs_kept, said = as_user(VICTIM, _killed_then_mine, out)
  assert (mine_kept, runs_kept) == (True, False)
  assert [line for line in said if 'Split-mine' in line] == [
      f'{out}: kept data/Split-mine/data.gz, which the earlier run did not '
      'provably write (not a name a run gives its files, or changed since); '
      'a run removes only its own files. Delete it yourself if you do not '
      'need it.']


def _added_while_training(out: str):
  """A run that ends well; while it trained the user added run/notes.txt;
  the next run's clean-up."""
  first = command_layout.Layout(out)
  first.clear()
  atomic_files.write_text(os.path.join(first.run, 'history.json'), '{}')
  notes = os.path.join(first.run, 'notes.txt')
  with open(notes, 'w') as f:  # While it trains: the user's own write.
    f.write('mine')
  first.record()
  _, said = _warnings_of(command_layout.Layout(out).clear)
  return os.path.exists(notes), os.path.exists(
      os.path.join(first.run, 'history.json')), said


def test_a_file_the_user_adds_while_a_run_trains_is_not_the_runs(team):
  """`run/notes.txt`, added while a run trained: not recorded as the
  run's, so the next run keeps it and names it once (on main: recorded,
  then removed without a word)."""
  out = str(home(team, VICTIM) / 'out')
  notes_kept, history_kept, said = as_user(VICTIM, _added_while_training,
                                           out)
  assert (notes_kept, history_kept) == (True, False)
  assert [line for line in said if 'notes.txt' in line] == [
      f'{out}: kept run/notes.txt, which the earlier run did not provably '
      'write (not a name a run gives its files, or changed since); a run '
      'removes only its own files. Delete it yourself if you do not need '
      'it.']


def _publish(layout) -> None:
  serving, _ = paths.model_dirs(layout.publishing)
  atomic_files.write_text(os.path.join(serving, 'saved_model.pb'), 'model')
  layout.take_model()


def _model_replaced_by_a_copy(out: str):
  """Publishes a model; the user replaces model/ with a copy holding
  their NOTES.md (a new folder); the next run publishes."""
  first = command_layout.Layout(out)
  first.clear()
  _publish(first)
  first.record()
  copy = out + '/model.copy'
  os.mkdir(copy)
  atomic_files.copy(os.path.join(first.model, 'saved_model.pb'),
                    os.path.join(copy, 'saved_model.pb'))
  atomic_files.write_text(os.path.join(copy, 'NOTES.md'), 'my notes')
  os.unlink(os.path.join(first.model, 'saved_model.pb'))
  os.rmdir(first.model)
  os.rename(copy, first.model)
  second = command_layout.Layout(out)
  second.clear()
  _, said = _warnings_of(_publish, second)
  kept = [n for n in os.listdir(out) if n.startswith('model.kept-')]
  notes = [sorted(os.listdir(os.path.join(out, n))) for n in kept]
  return kept, notes, said


def test_a_model_folder_the_user_replaced_with_a_copy_is_kept_aside(team):
  """model/ replaced by the user's copy (a new inode, with NOTES.md): the
  next publication keeps it aside, whole, named once (on main: removed
  whole)."""
  out = str(home(team, VICTIM) / 'out')
  kept, notes, said = as_user(VICTIM, _model_replaced_by_a_copy, out)
  assert len(kept) == 1 and notes == [['NOTES.md', 'saved_model.pb']]
  assert [line for line in said if 'kept, with its files' in line] == [
      f'{out}: the folder in place of model/ was not one a run published (a '
      'copy you put there: a new folder, without the listing of what a run '
      f'published), so it was kept, with its files, in {out}/{kept[0]}. '
      'Delete it yourself if you do not need it.']


def _stage_under_umask_0(out: str, flags: pathlib.Path):
  """The victim's run in its output folder: user code lifts the umask
  (`os.umask(0)`) and writes the export by path, as TensorFlow does; the
  run waits for the teammate (`tampered`), then publishes. What
  `model/saved_model.pb` holds after, and the modes published."""
  with output_folder.hold(out):
    staged = StagedExport(os.path.join(out, '.publishing'),
                          keep_dir=os.path.join(out, 'run'))
    with staged.attempt():
      os.umask(0)  # User code (some libraries do).
      os.makedirs(os.path.join(staged.serving_dir, 'variables'))
      with open(os.path.join(staged.serving_dir, 'saved_model.pb'),
                'w') as f:
        f.write('weights')
      (flags / 'staged').touch()
      wait_for(flags / 'tampered')
    final = staged.publish()
  with open(os.path.join(final, 'saved_model.pb')) as f:
    published = f.read()
  return published, sorted({_mode(os.path.join(folder, name))
                            for folder, dirs, files in os.walk(final)
                            for name in dirs + files})


def _managed(steps) -> list:
  """The names of the (name, step) `steps` that ran without an OSError:
  what the teammate managed."""
  done = []
  for what, step in steps:
    try:
      step()
      done.append(what)
    except OSError:
      pass
  return done


def _tamper_with_staging(serving: str) -> list:
  """The teammate, as the export is staged: writes her weights into the
  staged `saved_model.pb` in place and adds a file; what she managed."""
  return _managed((
      ('changed saved_model.pb', lambda: open(
          os.path.join(serving, 'saved_model.pb'), 'w').write('hers')),
      ('added variables/hers', lambda: open(
          os.path.join(serving, 'variables', 'hers'), 'w').write('x'))))


def test_an_export_staged_under_user_codes_umask_0_is_the_runs_alone(team):
  """User code sets `os.umask(0)` and the export is written 0777/0666 by
  path; a teammate who can reach the output folder (a sticky team
  folder) writes her weights into the staged `saved_model.pb` while it is
  validated. The staging folder is the run's alone from birth (0700,
  whatever the umask): she cannot enter it, and what is published is the
  run's, no file of it writable by others (on main: her weights
  published)."""
  os.chmod(team, 0o3775)
  out = str(team / 'out')
  flags = home(team, VICTIM) / 'flags'
  as_user(VICTIM, os.mkdir, str(flags))
  wait = started_as(VICTIM, _stage_under_umask_0, out, flags)
  assert wait_for(flags / 'staged')
  serving, _ = paths.model_dirs(os.path.join(out, '.publishing', '.staging'))
  managed = as_user(TEAMMATE, _tamper_with_staging, serving)
  (flags / 'tampered').touch()
  published, modes = wait()
  assert (managed, published) == ([], 'weights')
  assert not [m for m in modes if m & 0o022]


def _checkpoint_under_umask_0(out: str, flags: pathlib.Path) -> str:
  """The victim's run: user code lifts the umask, then the run writes a
  checkpoint in a folder it makes (`atomic_files`, as the best-only
  checkpoint is written); it waits for the teammate (`tampered`) and
  reads the weights back, as a resume or a best-weights restore would."""
  with output_folder.hold(out):
    os.umask(0)  # User code (some libraries do).
    path = os.path.join(out, 'run', 'checkpoints', 'best.weights.h5')
    atomic_files.write_text(path, 'weights')
    (flags / 'written').touch()
    wait_for(flags / 'tampered')
    with open(path) as f:
      return f.read()


def _tamper_with_checkpoint(path: str) -> list:
  """The teammate, after the write: her weights in place of the run's,
  in the file and by a rename in its folder; what she managed."""
  return _managed((
      ('wrote into it', lambda: open(path, 'w').write('hers')),
      ('replaced it', lambda: (open(path + '.hers', 'w').write('hers'),
                               os.replace(path + '.hers', path)))))


def test_a_file_the_run_writes_after_user_codes_umask_0_is_not_others(team):
  """User code sets `os.umask(0)`; the run then writes its best
  checkpoint, in a folder it makes. A teammate who can reach the output
  folder cannot change the weights the run reads back: the file and the
  folders are made with the run's mode (0644, 0755), not the umask user
  code set (on main: 0666 in 0777 folders; her weights read back)."""
  os.chmod(team, 0o3775)
  out = str(team / 'out')
  flags = home(team, VICTIM) / 'flags'
  as_user(VICTIM, os.mkdir, str(flags))
  wait = started_as(VICTIM, _checkpoint_under_umask_0, out, flags)
  assert wait_for(flags / 'written')
  path = os.path.join(out, 'run', 'checkpoints', 'best.weights.h5')
  modes = [_mode(p) for p in (os.path.dirname(os.path.dirname(path)),
                              os.path.dirname(path), path)]
  managed = as_user(TEAMMATE, _tamper_with_checkpoint, path)
  (flags / 'tampered').touch()
  assert (wait(), managed, modes) == ('weights', [], [0o755, 0o755, 0o644])


def _resume_checkpoint_under_umask_0(out: str, flags: pathlib.Path) -> str:
  """The victim's run: user code lifts the umask, then the run writes a
  resume checkpoint (Keras writes its weights by path); it waits for the
  teammate (`tampered`) and reads the weights back, as a resume does."""
  with output_folder.hold(out):
    os.umask(0)  # User code (some libraries do).

    def write_files(folder):
      with open(os.path.join(folder, 'model.weights.h5'), 'w') as f:
        f.write('weights')  # By path, as Keras's save_weights writes.

    folder = resume.write_checkpoint(
        os.path.join(out, '.resume-k'), 1, write_files,
        {'step': 1, 'epoch': 1, 'batch': 0})
    (flags / 'written').touch()
    wait_for(flags / 'tampered')
    with open(os.path.join(folder, 'model.weights.h5')) as f:
      return f.read()


def test_a_resume_checkpoint_written_under_user_codes_umask_0_is_the_runs(
    team):
  """User code sets `os.umask(0)`; the run writes a resume checkpoint.
  A teammate who can reach the output folder cannot change the weights a
  resume reads back: the checkpoint's folder is made 0700 whatever the
  umask (on main: 0777, its weights 0666; her weights resumed)."""
  os.chmod(team, 0o3775)
  out = str(team / 'out')
  flags = home(team, VICTIM) / 'flags'
  as_user(VICTIM, os.mkdir, str(flags))
  wait = started_as(VICTIM, _resume_checkpoint_under_umask_0, out, flags)
  assert wait_for(flags / 'written')
  weights = os.path.join(out, '.resume-k', 'checkpoint-000000001',
                         'model.weights.h5')
  managed = as_user(TEAMMATE, _tamper_with_checkpoint, weights)
  (flags / 'tampered').touch()
  assert (wait(), managed) == ('weights', [])


def _publish_after_staging_replaced(out: str):
  """The victim's run stages its export; another process of the victim's
  (or root) renames the staging folder aside and puts one holding another
  model in its place; the run publishes."""
  staged = StagedExport(os.path.join(out, '.publishing'),
                        keep_dir=os.path.join(out, 'run'))
  staged.prepare()
  atomic_files.write_text(os.path.join(staged.serving_dir, 'saved_model.pb'),
                          'weights')
  os.rename(staged.root, staged.root + '.aside')
  atomic_files.write_text(os.path.join(staged.serving_dir, 'saved_model.pb'),
                          'other')
  try:
    staged.publish()
  finally:
    published = os.listdir(os.path.join(out, '.publishing'))
  return published


def test_a_staging_folder_replaced_since_it_was_made_is_not_published(team):
  """The staging folder is held by its identity: one put in its place
  since it was made (whoever could) is refused, naming it, and nothing
  is published (on main: the other model was published)."""
  out = str(home(team, VICTIM) / 'out')
  with pytest.raises(UnsafeFolderError) as info:
    as_user(VICTIM, _publish_after_staging_replaced, out)
  message = str(info.value)
  staging = os.path.join(out, '.publishing', '.staging')
  assert message.startswith(
      f'The export staged in {staging} is no longer the folder it made')
  assert_four_parts(message)
  assert sorted(os.listdir(os.path.join(out, '.publishing'))) == [
      '.staging', '.staging.aside']


def _data_replaced_by_the_user(out: str, killed: bool):
  """A run writes its split's `data.gz`; the user puts their own file of
  that name in its place (a new file: `cp mine.gz data.gz` after an
  `rm`), while the run trains or after it was killed; the next run's
  clean-up. (whether the user's file stays, the warnings)."""
  first = command_layout.Layout(out)
  first.clear()
  data = os.path.join(first.data, 'Split-train', 'data.gz')
  atomic_files.write_text(data, 'rows')
  os.unlink(data)
  with open(data, 'w') as f:
    f.write('my rows')
  if not killed:
    first.record()
  _, said = _warnings_of(command_layout.Layout(out).clear)
  kept = os.path.exists(data) and open(data).read() == 'my rows'
  return kept, [line for line in said if 'Split-train/data.gz' in line]


@pytest.mark.parametrize('killed', [False, True], ids=['ended', 'killed'])
def test_a_file_the_user_puts_in_place_of_the_runs_is_kept(team, killed):
  """The user replaces the run's `data/Split-train/data.gz` with a file
  of theirs, while it trains or after a kill: the run's journal noted
  the file it wrote there (its device and inode), so the user's, a
  run's name but not the run's file, stays and is named once (on main:
  recorded by its name, then removed without a word)."""
  out = str(home(team, VICTIM) / 'out')
  kept, said = as_user(VICTIM, _data_replaced_by_the_user, out, killed)
  assert kept
  assert said == [
      f'{out}: kept data/Split-train/data.gz, which the earlier run did not '
      'provably write (not a name a run gives its files, or changed since); '
      'a run removes only its own files. Delete it yourself if you do not '
      'need it.']



def _publish_under_umask_0(out: str, flags: pathlib.Path) -> str:
  """The victim's run: user code lifts the umask; the run publishes,
  pausing at the exact step the teammate's watch fires on (the new model
  moved into `.models/`, `ready`) until she is done (`swapped`). What
  `model/saved_model.pb` holds after."""
  real = manifest.write_listing

  def timed(path, folder, **kwargs):
    (flags / 'ready').touch()
    wait_for(flags / 'swapped')
    real(path, folder, **kwargs)

  manifest.write_listing = timed
  layout = command_layout.Layout(out)
  with output_folder.hold(out):
    layout.clear()
    os.umask(0)  # User code (some libraries do).
    _publish(layout)
    layout.record()
  with open(os.path.join(layout.model, 'saved_model.pb')) as f:
    return f.read()


def _put_her_model_in_models(models: str) -> list:
  """The teammate: the victim's new model in `.models/` renamed aside, a
  folder with her model in its place; what she managed."""
  try:
    new, = [n for n in os.listdir(models) if n.startswith('model-')]
    os.rename(os.path.join(models, new), os.path.join(models, 'aside'))
    os.mkdir(os.path.join(models, new))
    os.chmod(os.path.join(models, new), 0o777)  # The run may move it.
    with open(os.path.join(models, new, 'saved_model.pb'), 'w') as f:
      f.write('hers')
    return ['swapped']
  except OSError:
    return []


def test_a_model_published_under_user_codes_umask_0_cannot_be_swapped(team):
  """User code sets `os.umask(0)`; the run then makes `.models/` for the
  new model and exchanges it with `model/`. A teammate who can reach the
  output folder (a sticky team folder), timed at the move into `.models/`,
  cannot swap the model for hers: the run makes the folder with its own
  mode (0755), not the umask user code set (on main: 0777, her model
  published at `model/`, and the run then failed to seal it)."""
  os.chmod(team, 0o3775)
  out = str(team / 'out')
  flags = home(team, VICTIM) / 'flags'
  as_user(VICTIM, os.mkdir, str(flags))
  wait = started_as(VICTIM, _publish_under_umask_0, out, flags)
  assert wait_for(flags / 'ready')
  managed = as_user(TEAMMATE, _put_her_model_in_models,
                    os.path.join(out, '.models'))
  (flags / 'swapped').touch()
  try:
    wait()
    failed = None
  except OSError as e:  # On main: her folder published, then not sealable.
    failed = e
  with open(os.path.join(out, 'model', 'saved_model.pb')) as f:
    assert (f.read(), managed, failed) == ('model', [], None)


# The victim's pipeline step, as a real process of hers (`run_as`): the
# executor's Do on artifacts in her home, its Model and ModelRun folders
# under a pipeline root in the team folder, made as TFX's launcher makes
# them before Do.
_PIPELINE_STEP = '''
import os, sys
from tfx.types import standard_artifacts
from generic_trainer.component.executor import GenericExecutor
data, root, module = sys.argv[1:4]
examples = standard_artifacts.Examples()
examples.uri = os.path.join(data, 'examples')
examples.split_names = '["train", "eval"]'
schema = standard_artifacts.Schema()
schema.uri = os.path.join(data, 'schema')
model = standard_artifacts.Model()
model.uri = os.path.join(root, 'GenericTrainer', 'model', '1')
model_run = standard_artifacts.ModelRun()
model_run.uri = os.path.join(root, 'GenericTrainer', 'model_run', '1')
for uri in (model.uri, model_run.uri):
  os.makedirs(uri)
GenericExecutor().Do(
    {'examples': [examples], 'schema': [schema]},
    {'model': [model], 'model_run': [model_run]},
    {'train_args': '{"num_steps": 3}', 'eval_args': '{"num_steps": 1}',
     'custom_config': 'null', 'module_file': module})
'''


def _pipeline_root_of_hers(root: str) -> None:
  """The teammate: the victim's pipeline root renamed aside, one of hers
  (0777 all the way down to the Model folder) in its place."""
  os.rename(root, root + '.aside')
  for folder in ('', 'GenericTrainer', 'GenericTrainer/model',
                 'GenericTrainer/model/1', 'GenericTrainer/model_run',
                 'GenericTrainer/model_run/1'):
    os.mkdir(os.path.join(root, folder))
    os.chmod(os.path.join(root, folder), 0o777)


def test_a_pipeline_root_in_a_team_folder_cannot_be_swapped(team):
  """A pipeline's Model folder is written by its path (the `run_fn`
  saves there): with the pipeline root in a team's 2775 folder, a
  teammate who renames the root aside once staging appears and puts hers
  in its place gets the victim's model in her folder (on main: the run
  trained and saved its export into her folder, where she could read
  the weights; only its publication was refused, row 570). The executor refuses such a root before it makes
  anything, naming the team folder and the fix (`chmod +t`), as the
  command refuses such an output folder; nothing reaches her."""
  # pylint: disable=g-import-not-at-top
  import threading
  from conftest import PENGUIN_MODULE, write_penguin_artifacts
  from other_user import run_as, user_repo
  data = home(team, VICTIM) / 'data'
  write_penguin_artifacts(str(data))
  subprocess.run(['chown', '-R', f'{VICTIM}:{VICTIM}', str(data)],
                 check=True)
  root = str(team / 'pipeline')
  module = os.path.join(user_repo(), os.path.relpath(
      PENGUIN_MODULE, os.path.dirname(os.path.dirname(__file__))))
  done = {}
  step = threading.Thread(target=lambda: done.update(run=run_as(
      VICTIM, home(team, VICTIM), ['python', '-c', _PIPELINE_STEP,
                                   str(data), root, module], timeout=600)))
  step.start()
  staging = pathlib.Path(root, 'GenericTrainer', 'model', '1', '.staging')
  while step.is_alive() and not wait_for(staging, 0.05):
    pass
  if os.path.lexists(staging):
    as_user(TEAMMATE, _pipeline_root_of_hers, root)
  step.join()
  run = done['run']
  assert run.returncode != 0, run.stderr[-3000:]
  message = run.stderr
  assert (f'UnsafeFolderError: The pipeline output {root}/GenericTrainer/'
          f'model/1 is inside {team}, which is not safe to hold it: it is '
          'writable by group (mode 2775, no sticky bit)') in message, (
              message[-3000:])
  assert f'`chmod +t {team}`' in message
  assert 'Choose a pipeline root elsewhere' in message
  line = next(l for l in message.splitlines()
              if l.startswith('generic_trainer.errors.UnsafeFolderError'))
  assert_four_parts(line.partition(': ')[2])
  hers = [os.path.join(d, f) for d, _, files in os.walk(team)
          for f in files]
  assert hers == []  # No model of hers, nor of the victim's, anywhere.


def _killed_after_writing_by_path(out: str):
  """A run that writes its split through its writer and, as TensorFlow
  does, an event file and a checkpoint by path, then is killed outright
  (no record, no claim); the next run's clean-up."""
  first = command_layout.Layout(out)
  first.clear()
  atomic_files.write_text(os.path.join(first.data, 'Split-train', 'data.gz'),
                          'rows')
  by_path = [os.path.join(first.run, 'tensorboard', 'train',
                          'events.out.tfevents.1'),
             os.path.join(first.run, 'checkpoints', 'best.weights.h5')]
  for path in by_path:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
      f.write('by path')
  _, said = _warnings_of(command_layout.Layout(out).clear)
  return ([os.path.exists(p) for p in by_path], os.path.exists(
      os.path.join(first.data, 'Split-train', 'data.gz')), said)


def test_files_a_killed_run_wrote_by_path_are_kept_not_removed_by_name(team):
  """The victim's run killed outright after TensorFlow wrote an event
  file and a checkpoint by path: no record claims them, so the next run
  keeps them and names them once; what its journal noted (data.gz) goes
  (on main: removed for their names)."""
  out = str(home(team, VICTIM) / 'out')
  by_path_kept, noted_kept, said = as_user(
      VICTIM, _killed_after_writing_by_path, out)
  assert (by_path_kept, noted_kept) == ([True, True], False)
  assert [line for line in said if 'did not provably write' in line] == [
      f'{out}: kept run/checkpoints/best.weights.h5, '
      'run/tensorboard/train/events.out.tfevents.1, which the earlier run '
      'did not provably write (not a name a run gives its files, or changed '
      'since); a run removes only its own files. Delete them yourself if '
      'you do not need them.']
