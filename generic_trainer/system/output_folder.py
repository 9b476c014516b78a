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
- As private as its inputs, whatever the umask: while a run holds the
  folder, the process's umask is set from the inputs (022, or 077 when an
  input is private: `umask_for`), so every file and folder it writes
  (the SavedModel TensorFlow writes, checkpoints, the schema, the record)
  is 0644/0755 or 0600/0700, never writable by the group, and a child
  process inherits it; the umask is given back after. An existing folder
  more open than a private input (a 0755 folder, a 0600 CSV) is refused
  (`check_private`), not made private: a run does not change the
  permissions of a folder it did not create, which may share other files
  of yours on purpose; `chmod go-rwx` says you mean it.

The command checks the folder with its arguments (exit 2); the notebook
Estimator when it is built; `hold` checks again when it takes the lock.
"""

import contextlib
import os
import stat
from typing import Iterable, Iterator
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
  the read access to the folder of whoever may not read every input (a
  0600 CSV gives a 0700 folder: what is made of it is as private). A
  folder counts with what it holds (a base model whose files are 0600
  is private, whatever its folder's mode)."""
  mode = 0o755
  for path in _each_file(inputs):
    try:
      bits = os.stat(path).st_mode
    except OSError:
      continue
    for read, access in ((stat.S_IRGRP, 0o050), (stat.S_IROTH, 0o005)):
      if not bits & read:
        mode &= ~access
  return mode


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
  by someone who may not read one of the files `inputs`."""
  try:
    info = os.stat(path)
  except OSError:
    return
  folder_mode = stat.S_IMODE(info.st_mode)
  for source in _each_file(inputs):
    allowed = mode_for([source])
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


@contextlib.contextmanager
def as_private_as(inputs: Iterable[str], outputs: Iterable[str]
                  ) -> Iterator[None]:
  """While the block runs, what it writes is as private as `inputs`
  (`umask_for`), and the folders `outputs` (a pipeline's Model and
  ModelRun artifact folders, made for this execution: local ones only)
  are made or set to `mode_for(inputs)`. The pipeline's executor, whose
  output folders TFX makes with the umask's mode, as the command's
  `hold` does for its folder."""
  mode = mode_for(list(inputs))
  for folder in outputs:
    if folder and not paths.is_remote(folder):
      create(folder, mode)
      fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                   os.O_CLOEXEC)
      try:
        os.fchmod(fd, mode)
      finally:
        os.close(fd)
  with _umask_of(mode):
    yield


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
    with _umask_of(mode):
      yield
  finally:
    lock.release()

