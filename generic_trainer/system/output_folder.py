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
  links where the run writes. A folder the run creates is created 0755
  (less the umask), or 0700 when an input is private (`mode_for`).

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
_HELD = set()  # The real paths of the folders this process holds.


def check(path: str, name: str = '--output-dir') -> None:
  """Raises UnsafeFolderError when the folder `path` holds a glob character,
  or exists and is not this user's alone; `name` names it in the message
  (the flag, or the argument)."""
  check_literal(path, name)
  trust.check_folder(path, name, 'could replace the model between its '
                     'validation and its publication, or put links where the '
                     'run writes')

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
  """The mode of a new output folder for the files `inputs`: 0755, less
  the read access to the folder of whoever may not read every input (a
  0600 CSV gives a 0700 folder: what is made of it is as private)."""
  mode = 0o755
  for path in inputs:
    try:
      bits = os.stat(path).st_mode
    except OSError:
      continue
    for read, access in ((stat.S_IRGRP, 0o050), (stat.S_IROTH, 0o005)):
      if not bits & read:
        mode &= ~access
  return mode


def create(path: str, mode: int = 0o755) -> None:
  """Creates the folder `path` (`mode` less the umask) when it is missing."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  try:
    os.mkdir(path, mode)
  except FileExistsError:
    pass


@contextlib.contextmanager
def hold(path: str, name: str = '--output-dir',
         inputs: Iterable[str] = ()) -> Iterator[None]:
  """Creates and checks the folder `path` (if new, as private as the files
  `inputs`: `mode_for`), and holds its lock while the block runs.

  Raises:
    UnsafeFolderError: see `check`.
    FolderInUseError: another process holds the lock; the message says
      which.
  """
  real = os.path.realpath(path)
  if real in _HELD:  # This process holds it already (the command, then run).
    yield
    return
  create(path, mode_for(inputs))
  check(path, name)
  lock = owner_lock.OwnerLock(os.path.join(path, LOCK_FILE))
  if not lock.acquire():
    raise FolderInUseError(
        f'{name} {path} is in use by another run: {lock.holder()}. Expected '
        'one run per output folder at a time: this run would delete what '
        f'that one is writing. Received: {name}={path!r}. Wait for that run '
        'to end, or choose another output folder. Nothing was changed.')
  _HELD.add(real)
  try:
    yield
  finally:
    _HELD.discard(real)
    lock.release()

