"""What a run wrote in its output folder, so that the next run removes that
and nothing else.

A run writes into folders of its own (`run/`, `data/`, `schema/`...), but a
user may later put a file of theirs in one (`data/raw/labels.csv`). The
manifest, `.generic-trainer` (JSON), names what the run wrote:

- as the run starts, after the earlier run's files are removed: the folders
  it writes (`roots`) and what is already in them that is not its own
  (`foreign`: files a user put there, which stay);
- as the run ends, failed or not: every file, link and folder under the
  roots that was not foreign (`written`).

The next run removes the `written` entries (a run killed before its end:
everything under its roots but the foreign entries), files first, then the
folders that are left empty; anything else stays. A folder written by a
version before the manifest (a marker of plain text) is cleared by the
names that version wrote (`LEGACY_NAMES`).
"""

import fnmatch
import json
import os
from typing import Iterable, List, Optional, Set

from generic_trainer.system import atomic_files
from generic_trainer.data import statistics

FILE = '.generic-trainer'
# What versions before the manifest wrote, as patterns of relative paths.
LEGACY_NAMES = ('run', 'run/*', 'data', 'data/Split-*', 'data/Split-*/*',
                'schema', 'schema/schema.pbtxt', 'hyperparameters',
                'hyperparameters/hyperparameters.json', '.publishing',
                '.publishing/*', '.base-model', '.base-model/*', '.resume-*',
                '.resume-*/*')


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
    found.add(rel)
    if os.path.islink(top) or not os.path.isdir(top):
      continue
    for folder, dirs, files in os.walk(top):
      for name in dirs + files:
        found.add(os.path.relpath(os.path.join(folder, name), root))
  return found


def ours(root: str, record) -> Set[str]:
  """What the run of `record` (see `read`) wrote in `root`."""
  if record is None:
    return set()
  if record == 'legacy':
    names = [n for n in os.listdir(root)] if os.path.isdir(root) else []
    tops = [n for n in names if any(
        fnmatch.fnmatchcase(n, p) for p in LEGACY_NAMES if '/' not in p)]
    return {e for e in entries(root, tops) if any(
        fnmatch.fnmatchcase(e, p) for p in LEGACY_NAMES) or
            e.startswith(('run/', '.publishing/', '.base-model/',
                          '.resume-')) or _under_split(e)}
  if record.get('state') == 'done':
    return set(record.get('written', []))
  return entries(root, record.get('roots', [])) - set(record.get('foreign', []))


def remove(root: str, paths: Iterable[str], keep: Optional[str] = None
           ) -> None:
  """Removes the relative `paths` of `root` (not `keep`, nor what is in
  it): files and links first, then folders that are left empty; a folder
  that still holds something else stays, with it."""
  keep_rel = os.path.relpath(keep, root) if keep else None
  for rel in sorted(paths, key=lambda p: (-p.count(os.sep), p)):
    if keep_rel and (rel == keep_rel or rel.startswith(keep_rel + os.sep)):
      continue
    if rel.startswith(('..', os.sep)):
      continue  # Never outside the folder.
    path = os.path.join(root, rel)
    try:
      if os.path.islink(path) or not os.path.isdir(path):
        os.unlink(path)
      else:
        os.rmdir(path)
    except OSError:
      pass  # Gone already, or a folder that holds a user's file.


def start(root: str, roots: List[str], foreign: Set[str]) -> None:
  """Records the run that starts: its roots and what in them is not its."""
  atomic_files.write_json(os.path.join(root, FILE), {
      'format': 1, 'state': 'running', 'pid': os.getpid(),
      'roots': sorted(roots), 'foreign': sorted(foreign)}, indent=1)


def finish(root: str, roots: List[str], foreign: Set[str]) -> None:
  """Records what the run wrote: all under its roots that is not foreign."""
  written = entries(root, roots) - foreign
  atomic_files.write_json(os.path.join(root, FILE), {
      'format': 1, 'state': 'done', 'roots': sorted(roots),
      'written': sorted(written)}, indent=1)


def _under_split(rel: str) -> bool:
  parts = rel.split(os.sep)
  return len(parts) >= 2 and parts[0] == 'data' and (
      statistics.is_split_folder(parts[1]))
