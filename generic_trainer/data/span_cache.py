"""Parsed rows kept across trainings: one entry per TFRecord file of a span.

An entry is a folder named after the file (`span_key.entry_name`):

- `blocks.bin`: the parsed blocks, in the order the parser made them (the
  block boundaries are the parser's: `PARSE_ROWS` records, the last block
  of the file shorter), each block its columns' raw bytes one after the
  other (C order, the byte order the key names);
- `manifest.json`, written last: the key (`span_key`), the columns (name,
  dtype, shape of a row), the label, and per block its rows and the CRC32
  of its bytes.

It is written in a temporary folder beside its place, as the first epoch
parses the file (`EntryWriter`), fsynced and renamed into place whole; a
training whose iterator stops early leaves an unfinished folder, never an
entry, and removes it when it ends. Two trainings writing the same file:
the first rename wins, the other discards its copy. Before any row of an
entry is used, its manifest, key, size and every block's CRC32 are checked
(`SpanCache.lookup`): a damaged, partial or foreign entry is a miss, never
a wrong row. A training holds a shared `flock` on the manifests it reads
for as long as it trains; eviction takes an exclusive one without waiting
and skips an entry in use.

`SpanCache` is the store of one training: where entries are (`folder`),
where earlier ones may come from (`previous`: the input artifact of a
pipeline, whose hits are hard-linked, or copied, into `folder`), a size
budget, and what it decided for each file (`decisions`, logged and, in a
pipeline, recorded on the output artifact).
"""

import contextlib
import errno
import fcntl
import json
import os
import shutil
import tempfile
import time
import zlib
from typing import Any, Dict, List, Optional, Tuple

from generic_trainer import atomic_files
from generic_trainer import owner_lock
from generic_trainer import progress
from generic_trainer import scratch
from generic_trainer.data import span_key

MANIFEST = 'manifest.json'
BLOCKS = 'blocks.bin'
DECISIONS = 'decisions.json'  # In a pipeline's output: what each file got.
DEFAULT_BUDGET_BYTES = 20 << 30
_TEMP = atomic_files.TEMP_PREFIX + 'entry-'
_READ_CHUNK = 8 << 20
_OWNER = scratch.LOCK_FILE  # In an unfinished write: its writer's lock.


class Entry:
  """A checked entry: its manifest, and where its blocks are."""

  def __init__(self, path: str, manifest: Dict[str, Any]):
    self.path = path
    self.manifest = manifest

  @property
  def blocks_path(self) -> str:
    return os.path.join(self.path, BLOCKS)

  @property
  def rows(self) -> int:
    return sum(rows for rows, _ in self.manifest['blocks'])

  def block_arrays(self):
    """Yields each block as [array per column], read from disk in order
    (the CRCs were checked by `lookup`; the entry is locked and never
    written in place)."""
    import numpy as np  # pylint: disable=g-import-not-at-top
    columns = [(np.dtype(d), tuple(s)) for _, d, s in self.manifest['columns']]
    row_bytes = [d.itemsize * int(np.prod(s, dtype=np.int64))
                 for d, s in columns]
    with open(self.blocks_path, 'rb') as f:
      for rows, _ in self.manifest['blocks']:
        data = f.read(rows * sum(row_bytes))
        arrays, offset = [], 0
        for (dtype, shape), width in zip(columns, row_bytes):
          size = rows * width
          arrays.append(np.frombuffer(data, dtype, rows * width //
                                      dtype.itemsize, offset).reshape(
                                          (rows,) + shape))
          offset += size
        yield arrays


def _row_bytes(manifest) -> int:
  import numpy as np  # pylint: disable=g-import-not-at-top
  return sum(np.dtype(d).itemsize * int(np.prod(s, dtype=np.int64))
             for _, d, s in manifest['columns'])


def check_entry(path: str, key: Dict[str, Any]) -> Tuple[Optional[Entry], str]:
  """(the entry at `path`, '') when it is whole and of `key`, else (None,
  why not). Reads every byte once: the blocks' CRC32s."""
  try:
    with open(os.path.join(path, MANIFEST), encoding='utf-8') as f:
      manifest = json.load(f)
  except FileNotFoundError:
    return None, 'no entry'
  except (OSError, ValueError) as e:
    return None, f'its manifest is unreadable ({e})'
  if not isinstance(manifest, dict) or not all(
      k in manifest for k in ('key', 'columns', 'blocks')):
    return None, 'its manifest is not one of ours'
  changed = span_key.differences(manifest['key'], key)
  if changed:
    return None, 'changed: ' + '; '.join(changed)
  expected = sum(rows for rows, _ in manifest['blocks']) * _row_bytes(
      manifest)
  blocks = os.path.join(path, BLOCKS)
  try:
    size = os.path.getsize(blocks)
  except OSError as e:
    return None, f'its blocks are unreadable ({e})'
  if size != expected:
    return None, (f'damaged: its blocks take {size:,} bytes, its manifest '
                  f'says {expected:,}')
  row_bytes = _row_bytes(manifest)
  with open(blocks, 'rb') as f:
    for index, (rows, crc) in enumerate(manifest['blocks']):
      if _crc(f, rows * row_bytes) != crc:
        return None, f'damaged: block {index} fails its CRC32'
  return Entry(path, manifest), ''


def _crc(f, size: int) -> int:
  crc = 0
  while size:
    chunk = f.read(min(size, _READ_CHUNK))
    if not chunk:
      return -1
    crc = zlib.crc32(chunk, crc)
    size -= len(chunk)
  return crc


class EntryWriter:
  """Writes one file's entry as its blocks are parsed: `start` (a fresh
  temporary folder; an unfinished one is dropped), `append` per block,
  `finish` (checked into place). Never raises: a failed write (disk full)
  drops the entry and says why in the store's decision for the file."""

  def __init__(self, store: 'SpanCache', source: str, key: Dict[str, Any]):
    self.store = store
    self.source = source
    self.key = key
    self.final = os.path.join(store.folder, span_key.entry_name(source))
    self._temp: Optional[str] = None
    self._fd: Optional[int] = None
    self._stack = contextlib.ExitStack()
    self._owner: Optional[owner_lock.OwnerLock] = None
    self._blocks: List[List[int]] = []
    self._columns = None
    self._bytes = 0
    self.done = False

  def start(self) -> None:
    self.abandon()
    if self.done:
      return
    try:
      self._temp = tempfile.mkdtemp(
          prefix=f'{_TEMP}{os.path.basename(self.final)[:12]}-',
          dir=self.store.folder)
      self.store.temps.add(self._temp)
      self._owner = owner_lock.OwnerLock(os.path.join(self._temp, _OWNER))
      self._owner.acquire()  # While held, no other training removes it.
      temp = self._stack.enter_context(atomic_files.replacing_path(
          os.path.join(self._temp, BLOCKS)))
      self._fd = os.open(temp, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    except OSError as e:
      self._fail(e)

  def append(self, names: List[str], arrays) -> None:
    """One block: its columns (`names`, in the element's order)."""
    if self._fd is None:
      return
    columns = [[n, a.dtype.str, list(a.shape[1:])] for n, a in
               zip(names, arrays)]
    if self._columns is None:
      self._columns = columns
    crc = 0
    try:
      for array in arrays:
        view = memoryview(array).cast('B')
        crc = zlib.crc32(view, crc)
        while view:
          view = view[os.write(self._fd, view):]
      self._bytes += sum(a.nbytes for a in arrays)
      if self._bytes > self.store.room():
        raise _OverBudget()
    except (OSError, _OverBudget) as e:
      self._fail(e)
      return
    self._blocks.append([int(arrays[0].shape[0]), crc])

  def finish(self, label: Optional[str]) -> None:
    """Puts the complete entry in place (or discards it: another training
    put one of the same key there first)."""
    if self._fd is None:
      return
    temp = self._temp
    try:
      os.close(self._fd)
      self._fd = None
      self._stack.close()
      os.unlink(os.path.join(temp, _OWNER))
      atomic_files.write_json(os.path.join(temp, MANIFEST), {
          'key': self.key, 'columns': self._columns or [], 'label': label,
          'blocks': self._blocks, 'bytes': self._bytes,
          'written': time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())})
      kept = self.store.put_in_place(temp, self.final, self.key)
    except OSError as e:
      self._fail(e)
      return
    self.store.temps.discard(temp)
    self._temp = None
    self._owner.release()
    self.done = True
    self.store.written(self.source, self._bytes if kept else 0, kept)

  def abandon(self) -> None:
    """Drops an unfinished write (ours only)."""
    if self._fd is not None:
      os.close(self._fd)
      self._fd = None
    with contextlib.suppress(OSError):
      self._stack.close()
    if self._temp:
      shutil.rmtree(self._temp, ignore_errors=True)
      self.store.temps.discard(self._temp)
      self._temp = None
    if self._owner is not None:
      self._owner.release()
      self._owner = None
    self._blocks, self._columns, self._bytes = [], None, 0

  def _fail(self, error: BaseException) -> None:
    self.abandon()
    self.done = True
    why = ('over the cache\'s budget' if isinstance(error, _OverBudget) else
           'the disk is full' if getattr(error, 'errno', None) in (
               errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else str(error))
    self.store.not_kept(self.source, why)


class _OverBudget(Exception):
  """The entry would take the store past its budget."""


class SpanCache:
  """The entries one training reads and writes (see the module docstring).

  Use as a context manager: leaving releases the entries' locks, removes
  this training's unfinished writes, evicts the least recently used
  entries past the budget (with `evict`), and writes the decisions to
  `folder/decisions.json` (with `record`).

  Args:
    folder: Where entries are read and written (a local folder).
    previous: A folder of earlier entries (a pipeline's input artifact);
      a hit there is linked (else copied) into `folder`.
    budget_bytes: The most bytes of entries `folder` may hold.
    evict: Whether leaving removes least recently used entries past the
      budget (the command's folder); a pipeline's output holds only this
      execution's files anyway.
    record: Whether leaving writes `decisions.json` into `folder`.
  """

  def __init__(self, folder: str, previous: Optional[str] = None,
               budget_bytes: int = DEFAULT_BUDGET_BYTES, evict: bool = True,
               record: bool = True):
    self.folder = folder
    self.previous = previous if previous != folder else None
    self.budget_bytes = budget_bytes
    self.evict = evict
    self.record = record
    self.temps = set()
    self.decisions: Dict[str, Dict[str, Any]] = {}
    self._locks: Dict[str, int] = {}
    self._kept_bytes = 0

  def __enter__(self) -> 'SpanCache':
    os.makedirs(self.folder, exist_ok=True)
    self._remove_stale_temps()
    return self

  def __exit__(self, *unused) -> None:
    for temp in list(self.temps):
      shutil.rmtree(temp, ignore_errors=True)
    self.temps.clear()
    for fd in self._locks.values():
      os.close(fd)
    self._locks.clear()
    if self.evict:
      self.evict_to_budget()
    if self.record:
      atomic_files.write_json(os.path.join(self.folder, DECISIONS),
                              self.summary(), indent=1)

  # Looking up.

  def lookup(self, source: str, key: Dict[str, Any]) -> Optional[Entry]:
    """The checked entry of file `source` with `key`, locked for this
    training; else None, with the reason in `decisions`."""
    name = span_key.entry_name(source)
    path = os.path.join(self.folder, name)
    entry, why = self._checked(path, key)
    if entry is None and self.previous:
      earlier, why_there = self._checked(
          os.path.join(self.previous, name), key, lock=False)
      if earlier is not None:
        entry, why = self._carry(earlier, path, key)
      elif why == 'no entry':
        why = why_there
    if entry is None:
      self._decide(source, key, 'miss', why)
      return None
    with contextlib.suppress(OSError):
      os.utime(os.path.join(path, MANIFEST))  # Its last use, for eviction.
    self._kept_bytes += entry.manifest.get('bytes', 0)
    self._decide(source, key, 'hit', f'{entry.rows:,} rows')
    return entry

  def _checked(self, path: str, key, lock: bool = True):
    fd = None
    if lock:
      fd = _lock(os.path.join(path, MANIFEST), fcntl.LOCK_SH)
      if fd is None:
        return self._explain(path, key)
    entry, why = check_entry(path, key)
    if entry is None:
      if fd is not None:
        os.close(fd)
      return None, why
    if fd is not None:
      self._locks[path] = fd
    return entry, ''

  def _explain(self, path, key):
    if not os.path.exists(os.path.join(path, MANIFEST)):
      return None, 'no entry'
    return check_entry(path, key)

  def _carry(self, earlier: Entry, path: str, key) -> Tuple[Optional[Entry],
                                                            str]:
    """`earlier` (the previous folder's) linked, else copied, into place
    at `path`, then checked again there."""
    temp = tempfile.mkdtemp(prefix=f'{_TEMP}carry-', dir=self.folder)
    self.temps.add(temp)
    try:
      for name in (BLOCKS, MANIFEST):
        source = os.path.join(earlier.path, name)
        try:
          os.link(source, os.path.join(temp, name))
        except OSError:
          atomic_files.copy(source, os.path.join(temp, name))
      self.put_in_place(temp, path, key)
    except OSError as e:
      return None, f'the earlier entry could not be carried over ({e})'
    finally:
      shutil.rmtree(temp, ignore_errors=True)
      self.temps.discard(temp)
    return self._checked(path, key)

  # Writing.

  def writer(self, source: str, key: Dict[str, Any]) -> EntryWriter:
    return EntryWriter(self, source, key)

  def room(self) -> int:
    """The bytes a new entry may still take."""
    return self.budget_bytes - self._kept_bytes

  def put_in_place(self, temp: str, final: str, key) -> bool:
    """Renames the complete entry folder `temp` to `final`; False (and
    `temp` removed) when an entry of the same key is there already, or the
    one there is in use."""
    for name in os.listdir(temp):
      atomic_files.sync_file(os.path.join(temp, name))
    try:
      os.rename(temp, final)
    except OSError as e:
      if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
        raise
    else:
      atomic_files.sync_folder(self.folder)
      return True
    fd = _lock(os.path.join(final, MANIFEST), fcntl.LOCK_EX | fcntl.LOCK_NB)
    if fd is None:  # In use: it stays, ours goes.
      shutil.rmtree(temp, ignore_errors=True)
      return False
    try:
      same = check_entry(final, key)[0] is not None
      if same:
        shutil.rmtree(temp, ignore_errors=True)
        return False
      atomic_files.replace_folder(temp, final)
      return True
    finally:
      os.close(fd)

  def written(self, source: str, nbytes: int, kept: bool) -> None:
    self._kept_bytes += nbytes
    decision = self.decisions.get(source)
    if decision is not None:
      decision['written'] = kept
      if not kept:
        decision['why'] += '; another training wrote it first'

  def not_kept(self, source: str, why: str) -> None:
    decision = self.decisions.get(source)
    if decision is not None:
      decision['written'] = False
      decision['why'] += f'; not kept: {why}'
    progress.log().warning('parsed rows: the entry of %s is not kept: %s',
                           source, why)

  # Decisions.

  def _decide(self, source: str, key, decision: str, why: str) -> None:
    self.decisions[source] = {'decision': decision, 'why': why,
                              'key': span_key.fingerprint(key)}

  def summary(self) -> Dict[str, Any]:
    """{'hits': n, 'misses': n, 'spans': {span folder: [decision per
    file]}}, for the log and ML Metadata."""
    spans: Dict[str, List[Dict[str, Any]]] = {}
    for source, decision in sorted(self.decisions.items()):
      spans.setdefault(_span(source), []).append(
          dict(decision, file=os.path.basename(source)))
    values = [d['decision'] for d in self.decisions.values()]
    return {'hits': values.count('hit'), 'misses': values.count('miss'),
            'spans': spans}

  def log_decisions(self) -> None:
    """One log line per span: 'parsed rows: hit for Examples/3/Split-train
    (2 files)', or 'miss for ... (part-0.gz: changed: the file's size
    (3,200 -> 3,456))'."""
    log = progress.log()
    for span, decisions in self.summary()['spans'].items():
      misses = [d for d in decisions if d['decision'] == 'miss']
      if not misses:
        log.info('parsed rows: hit for %s (%d files, kept in %s)', span,
                 len(decisions), self.folder)
      else:
        log.info('parsed rows: miss for %s (%s); the first epoch parses '
                 'and keeps them in %s', span, '; '.join(
                     f"{d['file']}: {d['why']}" for d in misses),
                 self.folder)

  # Eviction.

  def evict_to_budget(self) -> List[str]:
    """Removes the least recently used entries until the folder holds at
    most `budget_bytes`; entries in use (locked) are skipped. Returns the
    removed entries' names."""
    entries = []
    for name in os.listdir(self.folder):
      path = os.path.join(self.folder, name)
      try:
        used = os.stat(os.path.join(path, MANIFEST)).st_mtime
        size = os.path.getsize(os.path.join(path, BLOCKS))
      except OSError:
        continue
      entries.append((used, size, name, path))
    total = sum(e[1] for e in entries)
    removed = []
    for _, size, name, path in sorted(entries):
      if total <= self.budget_bytes:
        break
      fd = _lock(os.path.join(path, MANIFEST), fcntl.LOCK_EX | fcntl.LOCK_NB)
      if fd is None:
        continue
      try:
        shutil.rmtree(path, ignore_errors=True)
      finally:
        os.close(fd)
      total -= size
      removed.append(name)
    if removed:
      progress.log().info('parsed rows: %d least recently used entries '
                          'removed from %s (budget %s bytes)', len(removed),
                          self.folder, f'{self.budget_bytes:,}')
    return removed

  def _remove_stale_temps(self) -> None:
    """Removes unfinished writes no process holds: their writer died."""
    for name in os.listdir(self.folder):
      path = os.path.join(self.folder, name)
      if name.startswith(_TEMP) and not owner_lock.in_use(
          os.path.join(path, _OWNER)):
        shutil.rmtree(path, ignore_errors=True)


def store(fn_args):
  """The `SpanCache` of `fn_args.parsed_rows_dir` (a context manager),
  or a null context (None) when it is unset."""
  folder = getattr(fn_args, 'parsed_rows_dir', None)
  if not folder:
    return contextlib.nullcontext()
  previous = getattr(fn_args, 'parsed_rows_from', None)
  budget = getattr(fn_args, 'parsed_rows_budget', None)
  return SpanCache(folder, previous=previous,
                   budget_bytes=budget or DEFAULT_BUDGET_BYTES)


def _lock(path: str, how: int) -> Optional[int]:
  """An fd of `path` holding flock `how`; None when it is missing or (non
  blocking) taken."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
  except OSError:
    return None
  try:
    fcntl.flock(fd, how)
  except OSError:
    os.close(fd)
    return None
  return fd


def _span(source: str) -> str:
  """'Examples/3/Split-train': the span folder of a file, for people."""
  parts = os.path.normpath(source).split(os.sep)
  return os.sep.join(parts[-4:-1]) if len(parts) > 3 else os.path.dirname(
      source)
