"""The run's journal: each file the package puts in place in the folders
a run writes, with its identity (device, inode, size and modification
time: an inode number is reused as soon as a file is removed), appended
as it is written (issue 55).

A name is no proof that a run wrote a file: a user who puts their own
`data/Split-train/data.gz` in place of the run's while it trains, or
after a kill, gave it a run's name. The journal says which file the run
wrote at that path; a file found there with another identity is not the
run's (`manifest` keeps it and names it once). Files that TensorFlow
writes by path (event files, SavedModels, a `run_fn`'s own) are not in
it as they are written; the run claims them as it ends (`claim`: its
last record, a SIGTERM's included), by one walk of its own folders, with
their identities. A file neither noted nor claimed (a run killed outright
wrote it, or it lies where others could have put it) is no run's,
whatever its name: it stays, named once.

The journal is `.generic-trainer.journal` in the output folder, JSON
lines, made when the first file is noted, removed when the run records
its end (`manifest.finish` keeps the identities): only a killed run
leaves one, for its successor. A child process of the run (the child
under the other Keras, a local worker) writes to it too: the folder and
the roots travel in `keys.JOURNAL_ENV`.
"""

import json
import os
import stat
from typing import Container, Dict, Iterable, List, Tuple

from generic_trainer.keys import JOURNAL_ENV
from generic_trainer.system import trust

NAME = '.generic-trainer.journal'
_APPEND = (os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW |
           os.O_CLOEXEC)


def begin(root: str, roots: Iterable[str]) -> None:
  """From now on, files put in place under the relative folders `roots`
  of `root` are noted; an earlier run's journal is dropped (read it
  first: `read`)."""
  root = os.path.abspath(root)
  _drop(root)
  os.environ[JOURNAL_ENV] = json.dumps([root, sorted(roots)])


def end(root: str) -> None:
  """Stops noting for `root` and removes its journal."""
  root = os.path.abspath(root)
  if _held() and _held()[0] == root:
    del os.environ[JOURNAL_ENV]
  _drop(root)


def note(path: str, info: os.stat_result) -> None:
  """Appends `path`, put in place with the identity of `info`, when it
  lies under a held run's roots; a failure to note is no failure to
  write (the names decide for it, as before the journal)."""
  held = _held()
  if not held:
    return
  root, roots = held
  rel = os.path.relpath(os.path.abspath(path), root)
  if not any(rel == r or rel.startswith(r + os.sep) for r in roots):
    return
  _append(root, [json.dumps({'path': rel, 'id': identity(info)})])


def claim(root: str, folders: Iterable[str],
          before: Container[str]) -> List[str]:
  """Notes, as the run ends, the files its own `folders` (relative to
  `root`) hold that were not there when it started (`before`, relative
  paths): what TensorFlow and a `run_fn` wrote there by path (event
  files, checkpoints, a `run_fn`'s own files), which `note` never saw.
  A folder is the run's own when it is no link and this user alone can
  write it (`trust.problems`): what a folder others can write holds may
  be theirs, and is left to what `note` saw. One walk, no link followed;
  the relative paths noted. Nothing when no run notes for `root`."""
  held = _held()
  root = os.path.abspath(root)
  if not held or held[0] != root:
    return []
  noted = read(root)
  lines, claimed = [], []
  for top in folders:
    for folder, dirs, files in os.walk(os.path.join(root, top)):
      try:
        info = os.lstat(folder)
      except OSError:
        dirs[:] = []
        continue
      if not stat.S_ISDIR(info.st_mode) or trust.problems(info):
        dirs[:] = []  # Not the run's own: only what `note` saw counts.
        continue
      for name in files:
        path = os.path.join(folder, name)
        rel = os.path.relpath(path, root)
        if rel in before or rel in noted:
          continue
        try:
          info = os.lstat(path)
        except OSError:
          continue
        if stat.S_ISREG(info.st_mode):
          lines.append(json.dumps({'path': rel, 'id': identity(info)}))
          claimed.append(rel)
  _append(root, lines)
  return claimed


def _append(root: str, lines: List[str]) -> None:
  """Appends `lines` to `root`'s journal, in one write; a failure to note
  is no failure of the run (what is not noted stays, named)."""
  if not lines:
    return
  try:
    fd = os.open(os.path.join(root, NAME), _APPEND, 0o600)
  except OSError:
    return
  try:
    os.write(fd, ''.join(line + '\n' for line in lines).encode('utf-8'))
  except OSError:
    pass
  finally:
    os.close(fd)


def identity(info: os.stat_result) -> Tuple[int, int, int, int]:
  """What a file noted is: (device, inode, size, modification time in
  ns), which a rename keeps."""
  return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def read(root: str) -> Dict[str, Tuple[int, int, int, int]]:
  """{relative path: `identity`} of the last file noted at each
  path in `root`'s journal; {} when there is none. A line cut short by a
  kill is skipped."""
  try:
    fd = os.open(os.path.join(os.path.abspath(root), NAME),
                 os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
  except OSError:
    return {}
  with os.fdopen(fd, encoding='utf-8', errors='replace') as f:
    found = {}
    for line in f:
      try:
        entry = json.loads(line)
        found[os.path.normpath(entry['path'])] = tuple(
            int(n) for n in entry['id'])
      except (ValueError, KeyError, TypeError):
        continue
  return found


def _held():
  """(root, roots) of the run that notes now, or None."""
  try:
    root, roots = json.loads(os.environ.get(JOURNAL_ENV, ''))
    return root, list(roots)
  except (ValueError, TypeError):
    return None


def _drop(root: str) -> None:
  try:
    os.unlink(os.path.join(root, NAME))
  except OSError:
    pass
