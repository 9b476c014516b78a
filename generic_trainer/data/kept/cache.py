"""Parsed rows kept across trainings: the store of one training.

`SpanCache` holds one entry per TFRecord file of the spans it reads (the
entry's format: `kept_entry`; its key: `kept_key`): where entries are
(`folder`, local), where earlier ones may come from (`previous`: a
pipeline's ParsedRows input, whose hits are hard-linked, else copied,
into `folder`; fetched from an object store, `kept_remote`),
a size budget, and what it decided for each file (`decisions`: hit, or
miss and why; logged, written to `folder/decisions.json` and, in a
pipeline, recorded on the output artifact in ML Metadata).

Two trainings writing the same file's entry: the first rename wins, the
other discards its copy. A training holds a shared `flock` on the
manifests it reads for as long as it trains, and reads each entry's
blocks through the descriptor it checked (`kept_entry.Entry`); eviction
(least recently used first, past the budget) takes an exclusive one
without waiting, skips an entry in use, and renames an entry out of
place before removing it, so that a kill leaves it whole or out of
place. An unfinished write whose writer is gone (its owner lock is free),
or an entry out of place, is removed by the next store on the folder; an
entry left half removed (blocks, no manifest: an earlier version's
eviction cut short) is replaced by the next write and evicted first.

Nothing here is trusted that another user can write (`system.trust`):
the folder itself, when not this user's alone, is refused
(UnsafeFolderError, on entering); an entry that is not is a miss that
says why, and is replaced by this training's.

Nothing is removed that is not provably ours (`kept_folder`): the folder
carries our marker (a folder that holds anything else is refused on
entering), it is used through the descriptor opened then, and eviction
and the clean-up of killed writes remove only names of our format; what
else appears there meanwhile is left, and named once in the log.
"""

import contextlib
import errno
import fcntl
import itertools
import json
import os
import stat
import tempfile
import threading
from concurrent import futures
from typing import Any, Dict, List, Optional, Tuple

from generic_trainer.system import atomic_files
from generic_trainer.system import scratch
from generic_trainer.system import trust
from generic_trainer.system import paths
from generic_trainer.system import progress
from generic_trainer.system import removal
from generic_trainer.data.kept import read_before
from generic_trainer.data.kept import remote as kept_remote
from generic_trainer.data.kept import key as kept_key
from generic_trainer.data.kept.entry import BLOCKS, MANIFEST
from generic_trainer.data.kept.folder import DECISIONS
from generic_trainer.data.kept.entry import TEMP
from generic_trainer.data.kept import folder as kept_folder
from generic_trainer.data.kept.entry import Entry, EntryWriter
from generic_trainer.data.kept.entry import check_entry, lock
from generic_trainer.keys import PARSED_ROWS_DEFAULT_BUDGET_GB

DEFAULT_BUDGET_BYTES = PARSED_ROWS_DEFAULT_BUDGET_GB << 30


_WRITERS: Dict[int, EntryWriter] = {}  # Of the open stores, by number.
_NUMBERS = itertools.count()


def writer_of(number: int) -> Optional[EntryWriter]:
  """The writer numbered `number` (`SpanCache.writer`); None once its
  store was left."""
  return _WRITERS.get(number)


class SpanCache:
  """The entries one training reads and writes (see the module docstring).

  Use as a context manager: leaving releases the entries' locks, removes
  this training's unfinished writes, evicts the least recently used
  entries past the budget (with `evict`), and writes the decisions to
  `folder/decisions.json` (with `record`).

  Args:
    folder: Where entries are read and written (a local folder).
    previous: A folder of earlier entries (a pipeline's input artifact);
      a hit there is linked (else copied) into `folder`, or fetched from
      an object store (`kept_remote.fetch`).
    budget_bytes: The most bytes of entries `folder` may hold.
    evict: Whether leaving removes least recently used entries past the
      budget (the command's folder); a pipeline's output holds only this
      execution's files anyway.
    record: Whether leaving writes `decisions.json` into `folder`.
    writes: Whether misses are written (False: a worker that is not the
      chief, which reads what is kept and leaves the writing to the chief,
      who reads every file too).
    shown: Where the log says entries are kept (default: `folder`; the
      object store a scratch folder's entries are uploaded to).
  """

  def __init__(self, folder: str, previous: Optional[str] = None,
               budget_bytes: int = DEFAULT_BUDGET_BYTES, evict: bool = True,
               record: bool = True, writes: bool = True,
               shown: Optional[str] = None):
    self.folder = folder  # Once entered, the folder through its descriptor.
    self.shown = shown or folder
    self._given = folder
    self._fd: Optional[int] = None
    self.previous = previous if previous != folder else None
    self.budget_bytes = budget_bytes
    self.evict = evict
    self.record = record
    self.writes = writes
    self.temps = set()
    self.decisions: Dict[str, Dict[str, Any]] = {}
    self._entries: List[Entry] = []  # Held: read through, locked.
    self._kept_bytes = 0
    self._decided = threading.Lock()  # Writes finish on another thread.
    self._finishing: Optional[futures.ThreadPoolExecutor] = None
    self._finishes: List[futures.Future] = []
    self._writers: List[EntryWriter] = []

  def __enter__(self) -> 'SpanCache':
    """Makes the folder (0700, parents included) when missing, opens it
    once, marks it, and removes what killed trainings left; from here on
    `folder` names the folder through that descriptor (`trust.fd_path`).

    Raises:
      UnsafeFolderError: the folder is not this user's alone, or holds
        what is not ours (`kept_folder.open_marked`).
    """
    self._fd = kept_folder.open_marked(self._given,
                                       'The parsed rows cache folder')
    self.folder = trust.fd_path(self._fd, self._given)
    try:
      self._remove_stale_temps()
    except BaseException:
      self._close()
      raise
    return self

  def _close(self) -> None:
    if self._fd is not None:
      os.close(self._fd)
      self._fd = None
    self.folder = self._given

  def __exit__(self, *unused) -> None:
    for writer in self._writers:  # A pipeline read later writes nothing.
      writer.close()
      _WRITERS.pop(writer.number, None)
    self._writers.clear()
    self.wait_for_writes()
    for temp in list(self.temps):
      removal.remove_tree(temp, ignore_errors=True)
    self.temps.clear()
    for entry in self._entries:
      entry.close()
    self._entries.clear()
    try:
      if self.evict:
        self.evict_to_budget()
      if self.record:
        atomic_files.write_json(os.path.join(self.folder, DECISIONS),
                                self.summary(), indent=1)
    finally:
      self._close()

  # Looking up.

  def lookup(self, source: str, key: Dict[str, Any]) -> Optional[Entry]:
    """The checked entry of file `source` with `key`, locked for this
    training; else None, with the reason in `decisions`."""
    name = kept_key.entry_name(source)
    path = os.path.join(self.folder, name)
    entry, why = self._checked(path, key)
    if entry is None and self.previous:
      entry, why_there = self._from_previous(name, path, key)
      if entry is not None or why.startswith('no entry'):
        why = why_there
    if entry is None:
      self._decide(source, key, 'miss', why)
      return None
    with contextlib.suppress(OSError):
      os.utime(entry.lock_fd)  # Its last use, for eviction.
    with self._decided:
      self._kept_bytes += entry.manifest.get('bytes', 0)
    self._decide(source, key, 'hit', f'{entry.rows:,} rows')
    return entry

  def _checked(self, path: str, key, linked=None):
    """`check_entry` of `path`, the entry held until the store is left."""
    entry, why = check_entry(path, key, linked, hold=True)
    if entry is not None:
      self._entries.append(entry)
    return entry, why

  def _from_previous(self, name: str, path: str, key
                     ) -> Tuple[Optional[Entry], str]:
    """The previous folder's entry `name` carried into place at `path`
    and checked there: linked (else copied) from a local folder, fetched
    from an object store (`kept_remote.fetch`)."""
    source = os.path.join(self.previous, name)
    remote, earlier = paths.is_remote(source), None
    if not remote:
      earlier, why = check_entry(source, key)
      if earlier is None:
        return None, why
      earlier.close()  # Its inode, kept to compare, is all that is used.
    temp = tempfile.mkdtemp(prefix=f'{TEMP}carry-', dir=self.folder)
    self.temps.add(temp)
    try:
      if remote:
        why = kept_remote.fetch(source, key, temp)
        if why:
          return None, why
      else:
        for part in (BLOCKS, MANIFEST):
          try:
            os.link(os.path.join(source, part), os.path.join(temp, part))
          except OSError:  # Synced.
            atomic_files.copy(os.path.join(source, part),
                              os.path.join(temp, part))
      # A linked file is the earlier entry's, written and synced whole.
      self.put_in_place(temp, path, key, synced=not remote)
    except OSError as e:
      return None, f'the earlier entry could not be carried over ({e})'
    finally:
      removal.remove_tree(temp, ignore_errors=True)
      self.temps.discard(temp)
    return self._checked(path, key, linked=earlier)  # No CRC if linked.

  # Writing.

  def writer(self, source: str, key: Dict[str, Any],
             columns: List[List[Any]], label: Optional[str]) -> EntryWriter:
    """A writer of file `source`'s entry (see `EntryWriter`), closed when
    the store is left. Its `number` finds it (`writer_of`) from an input
    pipeline's function, which holds numbers, not objects."""
    writer = EntryWriter(self, source, key, columns, label, next(_NUMBERS),
                         read_before.read_whole(key))
    if not self.writes:
      writer.close()  # Not found by its number: it writes nothing.
      return writer
    _WRITERS[writer.number] = writer
    self._writers.append(writer)
    return writer

  def in_background(self, finish) -> None:
    """Runs `finish` (an entry's fsyncs and rename) on this store's
    writing thread, one at a time, off the input pipeline's threads."""
    if self._finishing is None:
      self._finishing = futures.ThreadPoolExecutor(
          1, thread_name_prefix='parsed-rows')
    self._finishes.append(self._finishing.submit(finish))

  def wait_for_writes(self) -> None:
    """Returns when every finished entry is in place (or discarded)."""
    if self._finishing is None:
      return
    self._finishing.shutdown(wait=True)
    self._finishing = None
    finishes, self._finishes = self._finishes, []
    for finish in finishes:
      finish.result()  # A bug in finishing raises here, not lost.

  def room(self) -> int:
    """The bytes a new entry may still take."""
    return self.budget_bytes - self._kept_bytes

  def put_in_place(self, temp: str, final: str, key,
                   synced: bool = False) -> bool:
    """Renames the complete entry folder `temp` to `final` (its files
    synced first, unless `synced`); False (and `temp` removed) when an
    entry of the same key is there already, or the one there is in use."""
    if not synced:
      for name in os.listdir(temp):
        atomic_files.sync_file(os.path.join(temp, name))
    atomic_files.sync_folder(temp)
    try:
      os.rename(temp, final)
    except OSError as e:
      if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
        raise
    else:
      atomic_files.sync_folder(self.folder)
      return True
    if _why_not(final, None).startswith('no entry'):
      # Half removed (blocks, no manifest), or gone since: nobody reads it.
      atomic_files.replace_folder(temp, final)
      return True
    fd = lock(os.path.join(final, MANIFEST), fcntl.LOCK_EX | fcntl.LOCK_NB)
    if fd is None:  # In use: it stays, ours goes.
      removal.remove_tree(temp, ignore_errors=True)
      return False
    try:
      if not _why_not(final, key):
        removal.remove_tree(temp, ignore_errors=True)
        return False
      atomic_files.replace_folder(temp, final)  # Damaged, foreign, other key.
      return True
    finally:
      os.close(fd)

  def written(self, source: str, nbytes: int, kept: bool) -> None:
    with self._decided:
      self._kept_bytes += nbytes
      decision = self.decisions.get(source)
      if decision is not None and not decision.get('written'):
        # Not kept: another training, or another dataset of this one on the
        # same file, put its entry in place first.
        decision['written'] = kept
        if not kept:
          decision['why'] += '; another writer put it in place first'

  def not_kept(self, source: str, why: str) -> None:
    with self._decided:
      decision = self.decisions.get(source)
      if decision is not None:
        decision['written'] = False
        decision['why'] += f'; not kept: {why}'
    progress.log().warning('parsed rows: the entry of %s is not kept: %s',
                           source, why)

  # Decisions.

  def _decide(self, source: str, key, decision: str, why: str) -> None:
    with self._decided:
      self.decisions[source] = {'decision': decision, 'why': why,
                                'key': kept_key.fingerprint(key)}

  def summary(self) -> Dict[str, Any]:
    """{'hits': n, 'misses': n, 'spans': {span folder: [decision per
    file]}}, for the log and ML Metadata."""
    spans: Dict[str, List[Dict[str, Any]]] = {}
    with self._decided:
      decisions = {s: dict(d) for s, d in self.decisions.items()}
    for source, decision in sorted(decisions.items()):
      spans.setdefault(_span(source), []).append(
          dict(decision, file=os.path.basename(source)))
    values = [d['decision'] for d in decisions.values()]
    return {'hits': values.count('hit'), 'misses': values.count('miss'),
            'spans': spans}

  def log_decisions(self) -> None:
    """One log line per span: 'parsed rows: hit for Examples/3/Split-train
    (2 files)', or 'parsing ... this run (part-0.gz: changed: the file's size
    (3,200 -> 3,456))'."""
    log = progress.log()
    for span, decisions in self.summary()['spans'].items():
      misses = [d for d in decisions if d['decision'] == 'miss']
      if not misses:
        log.info('parsed rows: hit for %s (%d files, kept in %s)', span,
                 len(decisions), self.shown)
      else:
        # Information, not an error: a first run keeps nothing yet.
        log.info('parsed rows: parsing %s this run (%s); the first epoch '
                 'parses %s', span, '; '.join(
                     f"{d['file']}: " + ('none kept yet' if d['why'] ==
                                         'no entry' else d['why'])
                     for d in misses),
                 f'and keeps them in {self.shown}' if self.writes else
                 'them (the chief keeps them)')

  # Eviction.

  def evict_to_budget(self) -> List[str]:
    """Removes the least recently used entries until the folder holds at
    most `budget_bytes`, entries left half removed (no manifest) first and
    always; entries in use (locked) are skipped. Only entries are removed
    (`kept_folder.is_entry`: our name format, a real folder), and only
    while the folder carries our marker; anything else found is left and
    named in the log. Returns the removed entries' names."""
    if self._fd is None:  # Not entered: the folder opened for this.
      fd = trust.open_folder(self.folder, 'The parsed rows cache folder',
                             kept_folder.UNSAFE_FOLDER_HARM)
      try:
        return self._evict(fd) if fd is not None else []
      finally:
        if fd is not None:
          os.close(fd)
    return self._evict(self._fd)

  def _evict(self, fd: int) -> List[str]:
    """`evict_to_budget` in the folder open as `fd`."""
    if not kept_folder.marked(fd):
      progress.log().warning(
          'parsed rows: nothing evicted from %s: it no longer carries the '
          'marker %s of a parsed rows cache, so nothing there is provably '
          'ours', self.shown, kept_folder.MARKER)
      return []
    entries, others = [], []
    for name in os.listdir(fd):
      if name in (kept_folder.MARKER, DECISIONS) or (
          kept_folder.is_temporary(name)):
        continue
      try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
      except OSError:
        continue
      if not (kept_folder.is_entry(name) and stat.S_ISDIR(info.st_mode)):
        others.append(name)
        continue
      path = os.path.join(self.folder, name)
      used = kept_folder.entry_used(fd, name)
      if used is None:  # No manifest of ours: a name is no proof.
        others.append(name)
        continue
      try:
        size = os.stat(os.path.join(name, BLOCKS), dir_fd=fd,
                       follow_symlinks=False).st_size
      except OSError:
        size = 0
      entries.append((used is not None, used or 0, size, name, path))
    if others:
      progress.log().warning(
          'parsed rows: %s in %s %s not an entry of ours, so eviction left '
          '%s; keep other files out of the cache folder',
          ', '.join(sorted(others)), self.shown,
          'is' if len(others) == 1 else 'are',
          'it' if len(others) == 1 else 'them')
    total = sum(e[2] for e in entries)
    removed = []
    for whole, _, size, name, path in sorted(entries):
      if whole and total <= self.budget_bytes:
        break
      lock_fd = None
      if whole:
        lock_fd = lock(os.path.join(path, MANIFEST),
                       fcntl.LOCK_EX | fcntl.LOCK_NB)
        if lock_fd is None:
          continue
      out = None
      try:
        out = tempfile.mkdtemp(prefix=_EVICTED, dir=self.folder)
        os.rename(name, os.path.join(os.path.basename(out), name),
                  src_dir_fd=fd, dst_dir_fd=fd)  # Whole, or out of place.
      except OSError:
        if out:
          removal.remove_tree(out, ignore_errors=True)
        continue
      finally:
        if lock_fd is not None:
          os.close(lock_fd)
      removal.remove_tree(out, ignore_errors=True)
      total -= size
      removed.append(name)
    if removed:
      progress.log().info('parsed rows: %d least recently used entries '
                          'removed from %s (budget %s bytes)', len(removed),
                          self.shown, f'{self.budget_bytes:,}')
    return removed

  def _remove_stale_temps(self) -> None:
    """Removes entries out of place (an eviction cut short) and unfinished
    writes no process holds: their writer died (`scratch.is_stale`). Both
    are our name format, real folders of this user alone."""
    for name in os.listdir(self._fd):
      path = os.path.join(self.folder, name)
      if name.startswith(_EVICTED):
        with contextlib.suppress(OSError):  # Another store removed it.
          info = os.stat(name, dir_fd=self._fd, follow_symlinks=False)
          if stat.S_ISDIR(info.st_mode) and not trust.why_not(info):
            removal.remove_tree(path, ignore_errors=True)
      elif name.startswith(TEMP) and scratch.is_stale(path):
        scratch.remove_unused(path)


_EVICTED = f'{TEMP}evicted-'  # An entry out of place, being removed.


def _why_not(path: str, key) -> str:
  """Why `path` holds no whole entry of `key` ('' when it does; checked,
  not held)."""
  entry, why = check_entry(path, key)
  if entry is not None:
    entry.close()
  return why


def _span(source: str) -> str:
  """'Examples/3/Split-train': the span folder of a file, for people."""
  parts = os.path.normpath(source).split(os.sep)
  return os.sep.join(parts[-4:-1]) if len(parts) > 3 else os.path.dirname(
      source)
