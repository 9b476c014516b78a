"""Run as its users run it (issue 55): the real command and the notebook
Estimator as ordinary uids, not root, on this machine's real /tmp.

The victim (uid 2001) trains; a teammate in the victim's group (uid 2002)
and everyone else try to read or change what the victim's run wrote, or to
move the folders the run uses. Each runs as a real process of that user
(`other_user.run_as`: setpriv, a HOME of its own under /tmp, TMPDIR
unset), so the kernel, not root's privilege, decides what each may do.
"""

import os
import pathlib
import shutil
import stat
import threading

import pytest

from conftest import REPO
from other_user import TEAM, TEAMMATE, VICTIM, command, home_of, run_as
from other_user import as_user, reachable_folder, team_folder, user_repo
from other_user import wait_for

# In this checkout, and in the copy the users can read (`user_repo`).
SPEC_MODULE = os.path.join('module_files', 'penguin_spec.py')


@pytest.fixture
def victim_home(penguin_csvs):
  """The victim's HOME, 0700 (as on Fedora and RHEL), with the penguin
  CSVs in it, 0644 each (the victim's umask 022)."""
  with home_of(VICTIM) as home:
    for source, name in zip(penguin_csvs, ('train.csv', 'eval.csv')):
      shutil.copy(source, home / name)
      os.chown(home / name, VICTIM, VICTIM)
      os.chmod(home / name, 0o644)
    yield home


@pytest.fixture
def published(victim_home):
  """A folder of the victim's that everyone may enter (0755), where the
  victim publishes models for others to serve."""
  path = victim_home.parent / f'{victim_home.name}-published'
  path.mkdir(mode=0o755)
  os.chown(path, VICTIM, VICTIM)
  try:
    yield path
  finally:
    shutil.rmtree(path, ignore_errors=True)


def _train(home: pathlib.Path, out: pathlib.Path, *more: str,
           module: str = ''):
  """The command, as the victim, on the CSVs in `home`, into `out`, with
  `module` (default: the penguin TrainSpec)."""
  module = module or os.path.join(user_repo(), SPEC_MODULE)
  done = run_as(VICTIM, home, command(
      '--module-file', module, '--train-data', str(home / 'train.csv'),
      '--eval-data', str(home / 'eval.csv'), '--output-dir', str(out),
      *more))
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
  return done


def _as_teammate(*argv: str):
  """`argv` as the teammate (in the victim's group): its output."""
  with home_of(TEAMMATE) as home:
    return run_as(TEAMMATE, home, argv, groups=[TEAM])


def _open_to_others(out: pathlib.Path):
  """What under `out` group or others may read or write: {path: mode}."""
  found = {}
  for path in [out, *out.rglob('*')]:
    if path.is_symlink():
      continue
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
      found[str(path.relative_to(out.parent))] = f'{mode:04o}'
  return found


@pytest.mark.slow
def test_a_local_worker_group_trains_as_an_ordinary_user(victim_home):
  """--num-workers 2 as an ordinary user with TMPDIR unset (/tmp, root's
  and sticky) trains to the end: the workers, in a user namespace where
  root's /tmp shows as owned by the overflow uid, take the parent's
  verdict on it (it was refused: 'owned by nobody (uid 65534)')."""
  done = _train(victim_home, victim_home / 'out', '--num-workers', '2')
  assert 'export validated' in done.stdout + done.stderr
  assert (victim_home / 'out' / 'model' / 'saved_model.pb').is_file()


def test_a_tmpdir_a_teammate_can_rename_a_parent_of_is_refused():
  """TMPDIR=team/alice/tmp, the team folder 2775: the teammate can rename
  team/alice aside and put hers in its place, so TMPDIR is refused,
  naming the team folder and the fix (only TMPDIR itself was checked)."""
  with reachable_folder('team', 0o2775, group=TEAM) as team:
    os.chown(team, VICTIM, TEAM)
    os.chmod(team, 0o2775)
    mine = team / 'alice' / 'tmp'
    mine.mkdir(parents=True)
    for path in (team / 'alice', mine):
      os.chown(path, VICTIM, VICTIM)
      os.chmod(path, 0o700)
    with home_of(VICTIM) as home:
      done = run_as(VICTIM, home, [
          'python', '-c', 'from generic_trainer.system import scratch\n'
          'with scratch.folder("probe") as path: print(path)'],
                     env={'TMPDIR': str(mine)})
    assert done.returncode != 0, done.stdout
    assert (f'UnsafeFolderError: TMPDIR {mine} is inside {team}, which is '
            'not safe to hold it: it is writable by group (mode 2775, no '
            f'sticky bit).') in done.stderr, done.stderr[-3000:]
    assert f'`chmod +t {team}`' in done.stderr
    # What it keeps off: the teammate can rename the victim's folder aside.
    moved = _as_teammate('mv', str(team / 'alice'), str(team / 'aside'))
    assert moved.returncode == 0, moved.stderr


@pytest.mark.slow
def test_data_in_a_private_home_is_not_published_to_others(victim_home,
                                                           published):
  """0644 CSVs in a 0700 home, the output in a 0755 folder others can
  enter: the data copies and the model are the victim's alone, and the
  teammate cannot read the rows (she decoded them: data.gz was 0644)."""
  out = published / 'penguins'
  _train(victim_home, out)
  assert _open_to_others(out) == {}
  for leak in ('data/Split-train/data.gz', 'model/saved_model.pb'):
    read = _as_teammate('cat', str(out / leak))
    assert read.returncode != 0 and 'Permission denied' in read.stderr, leak


@pytest.mark.slow
def test_user_codes_umask_0_publishes_nothing_others_can_change(
    victim_home, published):
  """A module that sets umask 0 (as some libraries do), its CSVs shared
  (0644 in a 0755 folder): the model is published readable, but nothing
  is group- or world-writable, and the teammate cannot change the
  weights (she did: the model was 0777/0666)."""
  shared = published / 'data'
  shared.mkdir(mode=0o755)
  for name in ('train.csv', 'eval.csv'):
    shutil.move(str(victim_home / name), shared / name)
  os.chown(shared, VICTIM, VICTIM)
  with open(os.path.join(REPO, SPEC_MODULE)) as f:
    spec = f.read()
  module = published / 'umask_spec.py'
  module.write_text('import os\nos.umask(0)\n' + spec)
  out = published / 'penguins'
  _train(shared, out, module=str(module))
  writable = {path: mode for path, mode in _open_to_others(out).items()
              if int(mode, 8) & 0o022}
  assert writable == {}
  assert stat.S_IMODE((out / 'model' / 'saved_model.pb').stat().st_mode
                      ) == 0o644
  weights = out / 'model' / 'variables' / 'variables.index'
  change = _as_teammate('sh', '-c', f'echo x >> {weights}')
  assert change.returncode != 0 and 'Permission denied' in change.stderr


_EXPORT = '''
import sys
sys.path.insert(0, {tests!r})
from spec_fixtures import PenguinSpec
from generic_trainer.notebook.estimator import Estimator
estimator = Estimator(PenguinSpec, model_dir={model_dir!r},
                      parsed_rows_cache=False)
estimator.train({train!r}, {eval!r})
print(estimator.export({export!r}))
'''


@pytest.mark.slow
def test_the_estimators_export_is_as_private_as_its_data(victim_home,
                                                         published):
  """A model trained on a 0600 CSV, exported by `Estimator.export` into a
  folder others can enter: the export (its weights, its warm-up file of
  real eval rows) is the victim's alone (it was 0755/0644)."""
  for name in ('train.csv', 'eval.csv'):
    os.chmod(victim_home / name, 0o600)
  export = published / 'export'
  done = run_as(VICTIM, victim_home, ['python', '-c', _EXPORT.format(
      tests=os.path.join(user_repo(), 'tests'), model_dir=str(victim_home / 'est'),
      train=str(victim_home / 'train.csv'),
      eval=str(victim_home / 'eval.csv'), export=str(export))])
  assert done.returncode == 0, done.stderr[-6000:]
  assert _open_to_others(export) == {}
  warmup = export / 'assets.extra' / 'tf_serving_warmup_requests'
  assert warmup.is_file()
  read = _as_teammate('cat', str(warmup))
  assert read.returncode != 0 and 'Permission denied' in read.stderr


# The Estimator's export, with a flag at the exact step a teammate's
# inotify watch would fire on: the sealed export beside `export_dir`, just
# before it is put in place (`ready`); the run goes on once she is done.
_EXPORT_TIMED = '''
import os, sys, time
sys.path.insert(0, {tests!r})
from spec_fixtures import PenguinSpec
from generic_trainer.notebook.estimator import Estimator
from generic_trainer.system import atomic_files
real = atomic_files.replace_folder
def timed(new, target):
  open({flags!r} + '/ready', 'w').close()
  while not os.path.exists({flags!r} + '/swapped'):
    time.sleep(0.01)
  real(new, target)
atomic_files.replace_folder = timed
estimator = Estimator(PenguinSpec, model_dir={model_dir!r},
                      parsed_rows_cache=False)
estimator.train({train!r}, {eval!r})
print(estimator.export({export!r}))
'''


def _put_hers_in_place_of(export: str) -> None:
  """The teammate: the victim's sealed export beside `export` renamed
  aside, a folder of hers with her model in its place."""
  folder = os.path.dirname(export)
  new, = [n for n in os.listdir(folder)
          if n.startswith(os.path.basename(export) + '.new-')]
  os.rename(os.path.join(folder, new), os.path.join(folder, new + '.aside'))
  os.mkdir(os.path.join(folder, new), 0o755)
  with open(os.path.join(folder, new, 'saved_model.pb'), 'w') as f:
    f.write('hers')


@pytest.mark.slow
def test_an_export_into_a_team_folder_cannot_be_swapped_before_it_is_in_place(
    victim_home):
  """`Estimator.export` into a team's 2775 folder: the teammate, timed at
  the sealed export beside `export_dir`, swaps it for a folder of hers.
  The export is refused before anything is made there, naming the team
  folder and the fix (on main: her model was the export, exit 0)."""
  flags = victim_home / 'flags'
  flags.mkdir()
  os.chown(flags, VICTIM, VICTIM)
  with team_folder() as team:
    export = team / 'export'
    done_event = threading.Event()

    def teammate():
      while not done_event.is_set():
        if wait_for(flags / 'ready', 0.2):
          as_user(TEAMMATE, _put_hers_in_place_of, str(export))
          (flags / 'swapped').touch()
          return

    watcher = threading.Thread(target=teammate)
    watcher.start()
    try:
      done = run_as(VICTIM, victim_home, ['python', '-c', _EXPORT_TIMED.format(
          tests=os.path.join(user_repo(), 'tests'), flags=str(flags),
          model_dir=str(victim_home / 'est'),
          train=str(victim_home / 'train.csv'),
          eval=str(victim_home / 'eval.csv'), export=str(export))])
    finally:
      done_event.set()
      watcher.join()
    assert not (export / 'saved_model.pb').exists() or (
        export / 'saved_model.pb').read_text() != 'hers'
    assert done.returncode != 0, done.stdout
    assert (f'UnsafeFolderError: export_dir {export} is inside {team}, which '
            'is not safe to hold it: it is writable by group (mode 2775, no '
            'sticky bit).') in done.stderr, done.stderr[-3000:]
    assert f'`chmod +t {team}`' in done.stderr
    assert os.listdir(team) == []
