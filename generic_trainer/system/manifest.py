"""What we wrote in a folder, so that the next writer removes that and
nothing else: the one mechanism behind "replace only what we wrote", for
the command's output folder (`command.layout`) and the notebook
Estimator's exports (`notebook.estimator`).

Two records, one format of entries (`identity`: its kind and inode, and a
file's size and modification time, keyed by the path relative to the
folder):

- a manifest, `.generic-trainer` (JSON) in the folder a run writes into,
  names what the run wrote there: as the run starts, after the earlier
  run's files are removed, the folders it writes (`roots`) and what is
  already in them that is not its own (`foreign`: files a user put there,
  which stay); as the run ends, failed or not, every file, link and folder
  under the roots that was not foreign and is provably the run's
  (`written`, with identities): a file only if the run's journal noted
  or claimed it at that path (`journal`) and it is still that file;
  folders and links by their names. The
  next run removes the `written` entries that it still finds as the run
  left them (a file the user put in place of one, or a link put in place
  of a folder, stays), files first, then the folders that are left empty;
  anything else stays. A run killed before its end recorded no `written`:
  the files its journal noted, still as noted, and the folders and links
  that are not foreign and are named as a run names what it writes (the
  writer's `named`) are removed; a file is never removed by its name. A folder written by a version before the
  manifest (a marker of plain text) is cleared by the names that version
  wrote (the writer's `legacy`). What stays is named by `left`.
- a listing (`write_listing`, `listing`) names what one folder held when
  it was written whole: a model folder the command published (`.models/
  listing-<inode>.json`), an Estimator's export (its marker file, inside
  it). A listing of an earlier Estimator is a JSON list of names (no
  identities): `listing` reads both, and a list reader reads the names of
  the other, so the files stay readable both ways.

The names a writer gives its files are the writer's (`command.layout`
spells the output folder's), never this module's.

Removal never passes through a link (`remove`): each folder on the way is
opened with O_NOFOLLOW from the output folder down, and each entry is
removed with `unlink`/`rmdir` relative to its folder's descriptor, so a
link put where a folder was (data -> the user's dataset) is neither
followed nor, as it is not what the run left there, removed.
"""

import fnmatch
import json
import os
import stat
from typing import Callable, Dict, Iterable, List, Optional, Set

from generic_trainer.system import atomic_files
from generic_trainer.system import journal

FILE = '.generic-trainer'


def read(root: str):
  """The manifest of `root`: a dict, 'legacy' (a marker of plain text), or
  None (no run wrote the folder)."""
  path = os.path.join(root, FILE)
  if not os.path.lexists(path):
    return None
  try:
    with open(path, encoding='utf-8') as f:
      record = json.load(f)
  except (OSError, ValueError):
    return 'legacy'
  return record if isinstance(record, dict) else 'legacy'


def entries(root: str, roots: Iterable[str]) -> Set[str]:
  """Every file, link and folder at or under the relative paths `roots` of
  `root`, relative to `root`; links are not followed."""
  found = set()
  for rel in roots:
    top = os.path.join(root, rel)
    if not os.path.lexists(top):
      continue
    found.add(os.path.normpath(rel))
    if os.path.islink(top) or not os.path.isdir(top):
      continue
    for folder, dirs, files in os.walk(top):
      for name in dirs + files:
        found.add(os.path.relpath(os.path.join(folder, name), root))
  return found


def identity(info: os.stat_result) -> List:
  """What an entry was: ['d', inode] for a folder, ['l', inode] for a
  link, ['f', inode, size, mtime_ns] for a file."""
  if stat.S_ISDIR(info.st_mode):
    return ['d', info.st_ino]
  if stat.S_ISLNK(info.st_mode):
    return ['l', info.st_ino]
  return ['f', info.st_ino, info.st_size, info.st_mtime_ns]


def identities(root: str, rels: Iterable[str]) -> Dict[str, List]:
  """{rel: identity} of the entries `rels` of `root` that exist."""
  found = {}
  for rel in rels:
    try:
      found[rel] = identity(os.lstat(os.path.join(root, rel)))
    except OSError:
      pass
  return found


def ours(root: str, record, named: Callable[[str, str], bool],
         legacy: Callable[[str], bool]) -> Dict[str, Optional[List]]:
  """What the run of `record` (see `read`) wrote in `root`: {rel: its
  identity, or None where the record does not say}.

  Args:
    root: The folder.
    record: `read(root)`.
    named: Whether the entry `rel` of `root` (`named(root, rel)`), left by
      a run killed before its end, is named as a run names what it writes.
    legacy: Whether the entry `rel`, in a folder a version before the
      manifest wrote, is named as that version named what it wrote.
  """
  if record is None:
    return {}
  if record == 'legacy':
    tops = [n for n in os.listdir(root) if legacy(n)] if os.path.isdir(
        root) else []
    return {e: None for e in entries(root, tops) if legacy(e)}
  if record.get('state') == 'done':
    written = record.get('written', [])
    if isinstance(written, dict):
      return {rel: list(ident) for rel, ident in written.items()}
    return {rel: None for rel in written}  # Format 1: no identities.
  # Killed before its end: what is not foreign and provably the run's.
  left_there = entries(root, record.get('roots', [])) - set(
      record.get('foreign', []))
  return {e: None for e in _provably_ours(root, left_there, named)}


def _provably_ours(root: str, found: Iterable[str],
                   named: Optional[Callable[[str, str], bool]]) -> List[str]:
  """Of the entries `found` of `root`, those the run wrote: a file its
  journal noted (or claimed, `journal.claim`) at that path is the run's
  when it is still that file (`journal.identity`), whatever its name,
  and never otherwise (a user's file put in its place, during the run or
  after a kill). A file the journal does not name is no run's, whatever
  its name: it stays, named once (`left`). Folders and links, which the
  journal does not name, go by their names (`named`, see `ours`; all
  when None): a folder is removed only once empty, and removing a link
  leaves what it points to."""
  noted = journal.read(root)
  mine = []
  for rel in sorted(found):
    try:
      info = os.lstat(os.path.join(root, rel))
    except OSError:
      continue
    if rel in noted:
      if journal.identity(info) == noted[rel]:
        mine.append(rel)
    elif stat.S_ISREG(info.st_mode) and named is not None:
      continue  # Not noted: never removed by its name.
    elif named is None or named(root, rel):
      mine.append(rel)
  return mine


def named(rel: str, pattern: str) -> bool:
  """Whether `rel` is named as `pattern` says, one path part for one (a
  `*` never spans a `/`), and a last part `*` for all below."""
  parts, wanted = rel.split(os.sep), pattern.split('/')
  if wanted[-1] == '*':
    wanted = wanted[:-1]
    if len(parts) <= len(wanted):
      return False
    parts = parts[:len(wanted)]
  return len(parts) == len(wanted) and all(
      fnmatch.fnmatchcase(part, want) for part, want in zip(parts, wanted))


def left(root: str, record) -> List[str]:
  """What the run of `record` (`read`) left under its roots that is not
  its own and was not there before it: files and links only (a folder
  stays because of what it holds), each relative to `root`. Called after
  the removal of `ours`, to name them once."""
  if not isinstance(record, dict):
    return []
  found = entries(root, record.get('roots', [])) - set(
      record.get('foreign', []))
  return sorted(e for e in found
                if not os.path.isdir(os.path.join(root, e)) or
                os.path.islink(os.path.join(root, e)))


def remove(root: str, paths, keep: Optional[str] = None) -> None:
  """Removes the relative `paths` of `root` (not `keep`, nor what is in
  it): files and links first, then folders that are left empty; a folder
  that still holds something else stays, with it. `paths` may map each to
  its `identity`: an entry found otherwise (replaced by a user's file, a
  link in place of a folder) stays.

  No link is followed: every folder on the way is opened with O_NOFOLLOW
  from `root` down, and the entry is removed relative to its folder.
  """
  expected = paths if isinstance(paths, dict) else dict.fromkeys(paths)
  keep_rel = os.path.relpath(keep, root) if keep else None
  try:
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
  except OSError:
    return
  try:
    for rel in sorted(expected, key=lambda p: (-p.count(os.sep), p)):
      rel = os.path.normpath(rel)
      if keep_rel and (rel == keep_rel or rel.startswith(keep_rel + os.sep)):
        continue
      parts = rel.split(os.sep)
      if rel.startswith(os.sep) or '..' in parts or rel == '.':
        continue  # Never outside the folder.
      _remove_at(root_fd, parts, expected[rel])
  finally:
    os.close(root_fd)


def _remove_at(root_fd: int, parts: List[str], ident: Optional[List]):
  """Removes `parts` below the folder `root_fd`, found without following
  a link, if it is still `ident` (any, when None)."""
  fds = []
  try:
    folder = root_fd
    for name in parts[:-1]:
      try:
        folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                         os.O_CLOEXEC, dir_fd=folder)
      except OSError:
        return  # Gone, or a link or a file in place of a folder.
      fds.append(folder)
    name = parts[-1]
    try:
      info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError:
      return
    if ident is not None and identity(info) != list(ident):
      return  # Not what the run left there.
    if ident is None and len(parts) == 1 and stat.S_ISLNK(info.st_mode):
      return  # A run's top folders are folders: a link there is a user's.
    try:
      if stat.S_ISDIR(info.st_mode):
        os.rmdir(name, dir_fd=folder)
      else:
        os.unlink(name, dir_fd=folder)
    except OSError:
      pass  # Gone already, or a folder that holds a user's file.
  finally:
    for fd in fds:
      os.close(fd)


def start(root: str, roots: List[str], foreign: Set[str]) -> None:
  """Records the run that starts: its roots and what in them is not its;
  from now on, what the package writes under them is noted in its
  journal (`journal.begin`: an earlier run's is dropped, so read it
  first, with `ours`)."""
  atomic_files.write_json(os.path.join(root, FILE), {
      'format': 2, 'state': 'running', 'pid': os.getpid(),
      'roots': sorted(roots), 'foreign': sorted(foreign)}, indent=1)
  journal.begin(root, roots)


def finish(root: str, roots: List[str], foreign: Set[str],
           named: Optional[Callable[[str, str], bool]] = None) -> None:
  """Records what the run wrote: all under its roots that is not foreign
  and, with `named` (see `ours`), is named as a run names what it writes
  (a file a user added to run/ or a split folder while the run trained is
  not the run's: it stays, and is named once by the next run), with each
  entry's identity."""
  found = _provably_ours(root, entries(root, roots) - foreign, named)
  written = identities(root, found)
  atomic_files.write_json(os.path.join(root, FILE), {
      'format': 2, 'state': 'done', 'roots': sorted(roots),
      'foreign': sorted(foreign), 'written': written}, indent=1)
  journal.end(root)  # Its identities are in `written` now.


def write_listing(path: str, folder: str, **kwargs) -> None:
  """Writes at `path` what `folder` holds now: {rel: identity} of every
  file, link and folder under it (links not followed). `kwargs` go to
  `atomic_files.write_json`."""
  atomic_files.write_json(
      path, identities(folder, entries(folder, os.listdir(folder))), **kwargs)


def listing(path: str) -> Dict[str, Optional[List]]:
  """The listing at `path` (`write_listing`): {rel: identity}, or
  {rel: None} for a list of names (an Estimator's export before
  identities).

  Raises:
    OSError: no file at `path`, or unreadable.
    ValueError: not a listing (not JSON, or neither a dict nor a list).
  """
  with open(path, encoding='utf-8') as f:
    record = json.load(f)
  if isinstance(record, dict):
    return {rel: list(ident) if isinstance(ident, list) else None
            for rel, ident in record.items()}
  if isinstance(record, list) and all(isinstance(r, str) for r in record):
    return dict.fromkeys(record)
  raise ValueError(f'{path} is not a listing')
