"""The output folder of a local run: this user's alone, one run at a time.

- One run per folder: a run holds an exclusive `flock` on
  `.generic-trainer.lock` in the folder from before it clears anything
  until it has published (`hold`). A second run into the same folder,
  started meanwhile, stops at once and says which process holds it: it
  would otherwise delete what the first is writing. The kernel drops the
  lock when its process dies, however it dies.
- This user's alone: a folder owned by another user, or writable by group
  or others without the sticky bit, is refused (`check`): whoever else can
  write it could swap the validated export before it is published, or put
  links where the run writes. So is one in a folder that others can write
  without the sticky bit, at any level above (`trust.check_ancestors`):
  whoever can write it could rename the checked folder aside after the
  lock and put theirs in its place, and the run, which TensorFlow makes
  write by path, would publish there. A folder the run creates is created 0755,
  or 0700 when an input is private (`mode_for`).
- As private as its inputs, whatever the umask. How private is one
  answer, `mode_for`, decided by who can read each input through its
  folders (a 0644 CSV in a 0700 home is private: issue 55), and every
  publisher asks it. While a run holds the folder, the process's umask
  is set from it (022, or 077 when an input is private: `umask_for`), so
  every file and folder it writes (the SavedModel TensorFlow writes,
  checkpoints, the schema, the record) is 0644/0755 or 0600/0700, never
  writable by the group, and a child process inherits it; the umask is
  given back after. User code may set another (`os.umask(0)`): so what
  is published is sealed (`seal`: the staged export before it is put in
  place, the whole folder when the run lets it go), its modes set
  explicitly, bits only taken away. An existing folder more open than an
  input private by its own mode (a 0755 folder, a 0600 CSV) is refused
  (`check_private`), not made private: a run does not change the
  permissions of a folder it did not create, which may share other files
  of yours on purpose; `chmod go-rwx` says you mean it.

The command checks the folder with its arguments (exit 2); the notebook
Estimator when it is built; `hold` checks again when it takes the lock.
"""

import contextlib
import os
import stat
from typing import Iterable, Iterator, List, Optional
import re

from generic_trainer.system import owner_lock
from generic_trainer.system import paths
from generic_trainer.system import trust
from generic_trainer.errors import FolderInUseError, UnsafeFolderError

LOCK_FILE = '.generic-trainer.lock'


def check(path: str, name: str = '--output-dir') -> None:
  """Raises UnsafeFolderError when the folder `path` holds a glob character,
  or exists and is not this user's alone; `name` names it in the message
  (the flag, or the argument)."""
  check_literal(path, name)
  trust.check_folder(path, name, 'could replace the model between its '
                     'validation and its publication, or put links where the '
                     'run writes')
  trust.check_ancestors(path, name)


def check_literal(path: str, name: str = '--output-dir') -> None:
  """Raises UnsafeFolderError when `path` holds `*`, `?` or `[`.

  TensorFlow reads some paths back as patterns that no caller can escape
  (a SavedModel's `variables/variables` prefix, checkpoint prefixes): under
  `exp[1]/` they would match `exp1/`. Refused, not escaped.
  """
  found = sorted({c for c in paths.GLOB_CHARS if c in path})
  if found:
    raise UnsafeFolderError(
        f'{name} holds the glob character(s) {" ".join(found)}: TensorFlow '
        'reads paths under it back as patterns (the SavedModel\'s '
        f'variables, the data files), which would match other folders '
        f"({os.path.basename(path.rstrip(os.sep))!r} matches "
        f"{_unglobbed(os.path.basename(path.rstrip(os.sep)))!r}). Expected "
        f'a folder path without *, ? or [. Received: {name}={path!r}. '
        'Choose a name without them.')


def _unglobbed(name: str) -> str:
  """What a glob of `name` may match instead: 'exp[1]' -> 'exp1'."""
  return re.sub(r'\[(.)[^\]]*\]', r'\1', name).replace('*', '').replace(
      '?', '_')


def mode_for(inputs: Iterable[str]) -> int:
  """The mode of a new output folder for the inputs `inputs`: 0755, less
  the read access to the folder of whoever may not read every input
  (`_readers`: through its folders, not by its own mode alone: a 0644
  CSV in a 0700 home is as private as a 0600 one, and gives a 0700
  folder). A folder counts with what it holds (a base model whose files
  are 0600 is private, whatever its folder's mode). The one answer to
  "how private": every publisher asks it (`seal`)."""
  mode = 0o755
  for path in _each_file(inputs):
    mode &= ~0o055 | _readers(path)
  return mode


def _readers(path: str) -> int:
  """Who may read `path` through its folders: 0o050 the group (of this
  process: the output folder's), 0o005 others; both when unknown (a path
  not there: nothing to protect). A folder on the way lets the group
  pass when others may pass, or when it is the group's and the group
  may; the file likewise."""
  try:
    info = os.stat(path)
  except OSError:
    return 0o055
  who = _may(info, stat.S_IRGRP, stat.S_IROTH)
  folder = os.path.dirname(os.path.realpath(path))
  while who:
    try:
      info = os.stat(folder)
    except OSError:
      break
    who &= _may(info, stat.S_IXGRP, stat.S_IXOTH)
    if folder == os.path.dirname(folder):
      break
    folder = os.path.dirname(folder)
  return who


def _own_readers(path: str) -> int:
  """Who may read `path` by its own mode (`_readers` without its
  folders); both when it is not there."""
  try:
    return _may(os.stat(path), stat.S_IRGRP, stat.S_IROTH)
  except OSError:
    return 0o055


def _may(info: os.stat_result, group_bit: int, others_bit: int) -> int:
  """0o050 when this process's group may (`group_bit`) on the file of
  `info`, 0o005 when others may (`others_bit`)."""
  others = bool(info.st_mode & others_bit)
  group = others or bool(info.st_mode & group_bit and
                         info.st_gid == os.getegid())
  return (0o050 if group else 0) | (0o005 if others else 0)


def _each_file(inputs: Iterable[str]) -> Iterator[str]:
  """`inputs`, with every file and folder inside those that are folders
  (a SavedModel, an Examples artifact): local paths only."""
  for path in inputs:
    if not path or paths.is_remote(path):
      continue
    yield path
    if os.path.isdir(path):
      for folder, dirs, files in os.walk(path):
        for name in dirs + files:
          yield os.path.join(folder, name)


def umask_for(mode: int) -> int:
  """The umask under which what a run writes is no more open than the
  folder mode `mode` (`mode_for`): 022, 027 or 077."""
  return 0o022 | (0o077 & ~mode)


def create(path: str, mode: int = 0o755) -> None:
  """Creates the folder `path`, and its missing parents, with `mode`
  (whatever the umask) when it is missing."""
  trust.make_private(path, mode)


def check_private(path: str, inputs: Iterable[str],
                  name: str = '--output-dir') -> None:
  """Raises UnsafeFolderError when the existing folder `path` can be read
  by someone whom one of the files `inputs` keeps out by its own mode (a
  0600 CSV: a clear wish). An input private only by its folders (a 0644
  CSV in a 0700 home) leaves the folder as it is: what the run writes in
  it is as private as `mode_for` says (the umask, `seal`)."""
  try:
    info = os.stat(path)
  except OSError:
    return
  folder_mode = stat.S_IMODE(info.st_mode)
  for source in _each_file(inputs):
    allowed = 0o755 & (~0o055 | _own_readers(source))
    extra = folder_mode & 0o077 & ~allowed
    if not extra:
      continue
    who = ' and '.join(w for w, bits in (('group', 0o070), ('others', 0o007))
                       if extra & bits)
    source_mode = stat.S_IMODE(os.stat(source).st_mode)
    raise UnsafeFolderError(
        f'{name} {path} can be read by {who} (mode {folder_mode:04o}), but '
        f'the input {source} is private (mode {source_mode:04o}): what the '
        'run writes there (the data, the model, its checkpoints) would be '
        f'open to {who} through the folder. A run makes a folder it creates '
        'as private as its inputs, but does not change the permissions of '
        'one that exists (it may share other files on purpose). Expected a '
        f'new folder, or one no more open than the inputs ({allowed:04o}). '
        f'Received: {name}={path!r} (mode {folder_mode:04o}). Run '
        f'`chmod go-rwx {path}`, or choose a new output folder. Nothing was '
        'changed.')


def seal(path: str, mode: Optional[int] = None) -> None:
  """Makes `path` and everything under it no more open than the folder
  mode `mode` (default: `publishing_mode`): bits only taken away, never
  added, and none writable by group or others, whatever the umask user
  code set (`os.umask(0)`: a world-writable model another user could
  change in place). Each entry is opened relative to its folder's
  descriptor without following a link, and changed through its own
  descriptor (`os.fchmod`): a folder a teammate swapped for a link to
  yours, inside one user code made 0777, is not followed. Local paths
  only."""
  if paths.is_remote(path):
    return
  keep = (publishing_mode() if mode is None else mode) & ~0o022
  try:
    fd = os.open(path, _NOFOLLOW)
  except OSError:
    return  # A link (not followed), or gone.
  _seal_fd(fd, keep)


_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _seal_fd(fd: int, keep: int) -> None:
  """The file or folder open as `fd` (closed here), and what a folder
  holds, with mode bits outside `keep` taken away."""
  try:
    info = os.fstat(fd)
    folder = stat.S_ISDIR(info.st_mode)
    if not (folder or stat.S_ISREG(info.st_mode)):
      return
    bits = stat.S_IMODE(info.st_mode)
    kept = bits & (keep | 0o1000 | (0o2000 if folder else 0))
    if kept != bits:
      os.fchmod(fd, kept)
    if not folder:
      return
    for name in os.listdir(fd):
      try:
        child = os.open(name, _NOFOLLOW, dir_fd=fd)
      except OSError:
        continue  # A link (not followed), or gone.
      _seal_fd(child, keep)
  finally:
    os.close(fd)


def publishing_mode() -> int:
  """The folder mode of what this process publishes now: `mode_for` of
  the inputs of the run that holds its folder (`hold`, `as_private_as`);
  0755 outside one."""
  return _PUBLISHING[-1] if _PUBLISHING else 0o755


def held_umask() -> int:
  """The umask of the run that holds this process's folder (`umask_for`
  its `publishing_mode`), which user code's `os.umask(0)` does not
  lift for what the package writes (`atomic_files`); 0 outside one."""
  return umask_for(_PUBLISHING[-1]) if _PUBLISHING else 0


# The modes of the runs this process holds now, the innermost last.
_PUBLISHING: List[int] = []


@contextlib.contextmanager
def _publishing(mode: int) -> Iterator[None]:
  """`publishing_mode` is `mode` while the block runs."""
  _PUBLISHING.append(mode)
  try:
    yield
  finally:
    _PUBLISHING.pop()


@contextlib.contextmanager
def as_private_as(inputs: Iterable[str], outputs: Iterable[str]
                  ) -> Iterator[None]:
  """While the block runs, what it writes is as private as `inputs`
  (`umask_for`), and the folders `outputs` (a pipeline's Model and
  ModelRun artifact folders, made for this execution: local ones only)
  are made or set to `mode_for(inputs)`. The pipeline's executor, whose
  output folders TFX makes with the umask's mode, as the command's
  `hold` does for its folder.

  A local output folder is written by its path (TensorFlow and the
  `run_fn` write there by path), so, as the command's output folder, no
  folder above it may be one that others can write without the sticky
  bit (a pipeline root in a team's 2775 folder): a member could rename
  the Model folder's parent aside and put hers in its place, and the run
  would train into her folder (`trust.check_ancestors`). Checked before
  anything is made or changed there.

  Raises:
    UnsafeFolderError: a folder above a local output lets others rename
      what it holds (row 561).
  """
  mode = mode_for(list(inputs))
  outputs = list(outputs)
  for folder in outputs:
    if folder and not paths.is_remote(folder):
      trust.check_ancestors(
          folder, 'The pipeline output', 'a pipeline root elsewhere (under '
          'your home, or a folder only you can write)')
  for folder in outputs:
    if folder and not paths.is_remote(folder):
      create(folder, mode)
      fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                   os.O_CLOEXEC)
      try:
        os.fchmod(fd, mode)
      finally:
        os.close(fd)
  try:
    with _umask_of(mode), _publishing(mode):
      yield
  finally:
    for folder in outputs:
      if folder and os.path.isdir(folder):
        seal(folder, mode)


@contextlib.contextmanager
def _umask_of(mode: int) -> Iterator[None]:
  """The process's umask set for files as private as a folder of `mode`
  (`umask_for`) while the block runs, then put back."""
  mask = os.umask(umask_for(mode))
  try:
    yield
  finally:
    os.umask(mask)


@contextlib.contextmanager
def hold(path: str, name: str = '--output-dir',
         inputs: Iterable[str] = ()) -> Iterator[None]:
  """Creates and checks the folder `path` (if new, as private as the files
  `inputs`: `mode_for`), and holds its lock while the block runs, with the
  process's umask set so that what the block writes is as private
  (`umask_for`).

  Raises:
    UnsafeFolderError: see `check` and `check_private`.
    FolderInUseError: another process holds the lock; the message says
      which.
  """
  inputs = list(inputs)
  mode = mode_for(inputs)
  trust.check_ancestors(path, name)  # Before anything is made there.
  create(path, mode)
  check(path, name)
  check_private(path, inputs, name)
  lock = owner_lock.OwnerLock(os.path.join(path, LOCK_FILE))
  if not lock.acquire():
    raise FolderInUseError(
        f'{name} {path} is in use by another run: {lock.holder()}. Expected '
        'one run per output folder at a time: this run would delete what '
        f'that one is writing. Received: {name}={path!r}. Wait for that run '
        'to end, or choose another output folder. Nothing was changed.')
  try:
    with _umask_of(mode), _publishing(mode):
      yield
  finally:
    try:
      seal(path, mode)
    finally:
      lock.release()

