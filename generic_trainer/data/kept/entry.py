"""One entry of parsed rows kept across trainings: its format, writing it,
and checking it whole before any row is read.

An entry is a folder named after a TFRecord file (`kept_key.entry_name`):

- `blocks.bin`: the parsed blocks, in the order the parser made them (the
  block boundaries are the parser's: `PARSE_ROWS` records, the last block
  of the file shorter), each block its columns' raw bytes one after the
  other (C order, the byte order the key names);
- `manifest.json`, written last: the key (`kept_key`), the columns (name,
  dtype, shape of a row), the label, per block its rows and the CRC32 of
  its bytes, and whether the check before training read the file whole
  (`read_whole`: `data.kept.read_before`).

It is written in a temporary folder beside its place as the first epoch
parses the file (`EntryWriter`, holding an owner lock on the folder), then
fsynced and renamed into place whole (`kept_cache.SpanCache.put_in_place`).
Before any row of an entry is used, its manifest, key, size and every
block's CRC32 are checked (`check_entry`): a damaged, partial or foreign
entry is a miss, never a wrong row. Checking reads ~20 MB per 1M rows of
12 float features at memory speed (benchmarks/README.md, (j)).
"""

import contextlib
import errno
import fcntl
import functools
import json
import os
import tempfile
import threading
import time
import zlib
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from generic_trainer.system import atomic_files
from generic_trainer.system import owner_lock
from generic_trainer.system import trust
from generic_trainer.system import scratch
from generic_trainer.system import removal
from generic_trainer.data.kept import folder as kept_folder
from generic_trainer.data.kept import key as kept_key

MANIFEST = kept_folder.ENTRY_MANIFEST
BLOCKS = 'blocks.bin'
TEMP = atomic_files.TEMP_PREFIX + 'entry-'
OWNER = scratch.LOCK_FILE  # In an unfinished write: its writer's lock.
_READ_CHUNK = 8 << 20


class Entry:
  """A checked entry: its manifest, and its blocks file open as checked.

  The blocks are read through the descriptor that was checked
  (`blocks_path`: /proc/self/fd/N, which opens that inode again), so an
  entry evicted or replaced after its check is still the entry checked.
  `close` (the store, when it is left) closes it and drops the manifest's
  shared lock, when held.
  """

  def __init__(self, path: str, manifest: Dict[str, Any], blocks_fd: int,
               lock_fd: Optional[int] = None):
    self.path = path
    self.manifest = manifest
    self.blocks_fd = blocks_fd
    self.lock_fd = lock_fd  # The manifest's, holding a shared flock.
    info = os.fstat(blocks_fd)
    self.inode = (info.st_dev, info.st_ino)  # Of its blocks, as checked.

  @property
  def blocks_path(self) -> str:
    if os.path.isdir(_OPEN_FDS):
      return os.path.join(_OPEN_FDS, str(self.blocks_fd))
    return os.path.join(self.path, BLOCKS)  # No /proc: by path (macOS).

  @property
  def rows(self) -> int:
    return sum(rows for rows, _ in self.manifest['blocks'])

  def close(self) -> None:
    for fd in (self.blocks_fd, self.lock_fd):
      if fd is not None:
        os.close(fd)
    self.blocks_fd = self.lock_fd = None


_OPEN_FDS = '/proc/self/fd'


def row_bytes(columns: List[List[Any]]) -> int:
  """The bytes a row of `columns` ([name, dtype str, row shape] each)
  takes in an entry."""
  return sum(np.dtype(d).itemsize * int(np.prod(s, dtype=np.int64))
             for _, d, s in columns)


def check_entry(path: str, key: Optional[Dict[str, Any]],
                checked: Optional[Entry] = None, hold: bool = False
                ) -> Tuple[Optional[Entry], str]:
  """(the entry at `path`, '') when it is ours, whole and of `key` (None:
  of any key), else (None, why not). Its folder, manifest and blocks are
  each opened without following links and trusted on what was opened
  (`trust`: this user's, not writable by group or others), and read
  through those descriptors. Reads every byte once: the blocks' CRC32s;
  not when its blocks file is the file of `checked` (an entry checked
  whole, hard-linked here: the same inode, and entries are never written
  in place). `hold`: a shared flock on the manifest, held by the entry
  (eviction and replacement wait for it), the manifest found still in
  place once locked."""
  folder, why = trust.open_trusted(path, folder=True)
  if folder is None:
    return None, 'no entry' if why == 'missing' else f'its folder is {why}'
  try:
    return _checked(folder, path, key, checked, hold)
  finally:
    os.close(folder)


def _checked(folder: int, path: str, key, checked, hold):
  """`check_entry` of the entry folder open as `folder`."""
  manifest_fd, why = trust.open_trusted(MANIFEST, dir_fd=folder)
  if manifest_fd is None:
    if why != 'missing':
      return None, f'its manifest is {why}'
    try:
      os.stat(BLOCKS, dir_fd=folder, follow_symlinks=False)
    except OSError:
      return None, 'no entry'
    return None, ('no entry (blocks without a manifest, left by a removal '
                  'cut short)')
  entry = None
  try:
    if hold:
      fcntl.flock(manifest_fd, fcntl.LOCK_SH)
      if not (trust.same_file(manifest_fd, MANIFEST, dir_fd=folder) and
              trust.same_file(folder, path)):
        return None, 'it was removed or replaced as it was read'
    entry, why = _read_checked(folder, manifest_fd, path, key, checked)
    return entry, why
  finally:
    if entry is not None and hold:
      entry.lock_fd = manifest_fd
    else:
      os.close(manifest_fd)


def _read_checked(folder: int, manifest_fd: int, path: str, key, checked):
  try:
    with os.fdopen(os.dup(manifest_fd), 'rb') as f:
      manifest = json.loads(f.read().decode('utf-8'))
  except (OSError, ValueError) as e:
    return None, f'its manifest is unreadable ({e})'
  why = manifest_mismatch(manifest, key)
  if why:
    return None, why
  size_of_row = row_bytes(manifest['columns'])
  expected = sum(rows for rows, _ in manifest['blocks']) * size_of_row
  blocks, why = trust.open_trusted(BLOCKS, dir_fd=folder)
  if blocks is None:
    return None, ('damaged: no blocks' if why == 'missing' else
                  f'its blocks are {why}')
  entry = Entry(path, manifest, blocks)
  try:
    size = os.fstat(blocks).st_size
    if size != expected:
      entry.close()
      return None, (f'damaged: its blocks take {size:,} bytes, its manifest '
                    f'says {expected:,}')
    if checked is None or checked.inode != entry.inode:
      with os.fdopen(os.dup(blocks), 'rb', buffering=0) as f:
        # One buffer, read into again, not a new bytes object per block.
        buffer = memoryview(bytearray(min(_READ_CHUNK, max(
            [rows * size_of_row for rows, _ in manifest['blocks']] + [1]))))
        for index, (rows, crc) in enumerate(manifest['blocks']):
          if _crc(f, rows * size_of_row, buffer) != crc:
            entry.close()
            return None, f'damaged: block {index} fails its CRC32'
  except OSError as e:  # A failing disk.
    entry.close()
    return None, f'its blocks are unreadable ({e})'
  return entry, ''


def manifest_mismatch(manifest: Any, key: Optional[Dict[str, Any]]) -> str:
  """Why a read manifest is not of an entry of `key` ('' when it is)."""
  if not isinstance(manifest, dict) or not all(
      k in manifest for k in ('key', 'columns', 'blocks')):
    return 'its manifest is not one of ours'
  if key is None:
    return ''
  changed = kept_key.differences(manifest['key'], key)
  return 'changed: ' + '; '.join(changed) if changed else ''


def _crc(f, size: int, buffer: memoryview) -> int:
  """The CRC32 of the next `size` bytes of `f` (-1: it ends before)."""
  crc = 0
  while size:
    read = f.readinto(buffer[:min(size, len(buffer))])
    if not read:
      return -1
    crc = zlib.crc32(buffer[:read], crc)
    size -= read
  return crc


def _under_lock(method):
  """`method` holding the writer's lock: the pipeline writes, the store
  closes from its own thread."""

  @functools.wraps(method)
  def locked(self, *args):
    with self._lock:
      return method(self, *args)

  return locked


class EntryWriter:
  """Writes one file's entry as its blocks are parsed: `start` (a fresh
  temporary folder; an unfinished one is dropped), `append` per block,
  `finish` (the entry handed to the store, which checks it into place in
  the background: its fsyncs leave the pipeline's thread), and `close`
  when the store is left (an unfinished write dropped, nothing written
  after). Never raises: a failed write (disk full) drops the entry and says
  why in the store's decision for the file.

  Args:
    store: The store the entry goes into.
    source: The TFRecord file it is of.
    key: Its key (`kept_key`).
    columns: [name, dtype str, row shape] of each column, in the order a
      block's bytes hold them.
    label: The label the parser pops, or None (in the manifest).
    number: What finds it from an input pipeline (`kept_cache.writer_of`).
    read_whole: Whether the check before training read the file to its
      end and found it whole (`data.kept.read_before`; in the manifest).
  """

  def __init__(self, store, source: str,
               key: Dict[str, Any], columns: List[List[Any]],
               label: Optional[str], number: int, read_whole: bool = False):
    self.store = store
    self.read_whole = read_whole
    self.number = number
    self.source = source
    self.key = key
    self.columns = columns
    self.label = label
    self._lock = threading.Lock()  # The pipeline's thread, the store's.
    self.final = os.path.join(store.folder, kept_key.entry_name(source))
    self._write: Optional[_Write] = None
    self._blocks: List[List[int]] = []
    self._row_size = row_bytes(columns)
    self._bytes = 0
    self.done = False

  @_under_lock
  def start(self) -> None:
    """Opens a fresh entry, dropping an unfinished one; nothing once the
    entry is finished, failed or closed."""
    self.abandon()
    if self.done:
      return
    write = _Write()
    self._write = write
    try:
      write.temp = tempfile.mkdtemp(
          prefix=f'{TEMP}{os.path.basename(self.final)[:12]}-',
          dir=self.store.folder)
      self.store.temps.add(write.temp)
      # Held until the entry is renamed in: no other training removes it.
      write.owner = scratch.locked(write.temp)
      # The folder is the unit made atomic (`SpanCache.put_in_place`):
      # its files are written in it as they are, and synced with it.
      write.fd = os.open(os.path.join(write.temp, BLOCKS),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND |
                         os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
      self._fail(e)

  @_under_lock
  def append(self, arrays) -> None:
    """One block: its columns' arrays, in the order of `columns`."""
    if self._write is None or self._write.fd is None:
      return
    views = [memoryview(np.ascontiguousarray(a)).cast('B') for a in arrays]
    nbytes = sum(v.nbytes for v in views)
    rows = nbytes // self._row_size
    crc = 0
    for view in views:
      crc = zlib.crc32(view, crc)
    try:
      _write_all(self._write.fd, views)
      self._bytes += nbytes
      if self._bytes > self.store.room():
        raise _OverBudget()
    except (OSError, _OverBudget) as e:
      self._fail(e)
      return
    self._blocks.append([rows, crc])

  @_under_lock
  def finish(self) -> None:
    """Hands the complete entry to the store (`SpanCache.in_background`),
    which puts it in place, or discards it: another training put one of
    the same key there first."""
    write = self._write
    if write is None or write.fd is None:
      return
    manifest = {
        'key': self.key, 'columns': self.columns, 'label': self.label,
        'blocks': self._blocks, 'bytes': self._bytes,
        'read_whole': self.read_whole,
        'written': time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}
    self._write, self._blocks, self._bytes = None, [], 0
    self.done = True
    self.store.in_background(lambda: self._put_in_place(write, manifest))

  def _put_in_place(self, write: '_Write', manifest) -> None:
    try:
      os.close(write.fd)
      write.fd = None
      fd = os.open(os.path.join(write.temp, MANIFEST), os.O_WRONLY |
                   os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o600)
      with os.fdopen(fd, 'w', encoding='utf-8') as f:
        json.dump(manifest, f)
      # The owner lock is held through the rename (`_Write.discard`
      # releases it): a sweep meanwhile finds the folder in use.
      kept = self.store.put_in_place(write.temp, self.final, self.key)
      if kept:
        with contextlib.suppress(OSError):  # The lock file came along.
          os.unlink(os.path.join(self.final, OWNER))
    except OSError as e:
      write.discard(self.store)
      self.store.not_kept(self.source, _why(e))
      return
    self.store.temps.discard(write.temp)
    write.temp = None
    write.discard(self.store)
    self.store.written(self.source, manifest['bytes'] if kept else 0, kept)

  @_under_lock
  def close(self) -> None:
    """Drops an unfinished write; nothing is written after (the store is
    being left)."""
    self.abandon()
    self.done = True

  def abandon(self) -> None:
    """Drops an unfinished write (ours only)."""
    if self._write is not None:
      self._write.discard(self.store)
      self._write = None
    self._blocks, self._bytes = [], 0

  def _fail(self, error: BaseException) -> None:
    self.abandon()
    self.done = True
    self.store.not_kept(self.source, _why(error))


def _write_all(fd: int, views: List[memoryview]) -> None:
  """Writes `views` to `fd`: one system call per `_IOV_MAX` of them (a
  block's columns), and more only when one wrote part (a full disk
  raises)."""
  for start in range(0, len(views), _IOV_MAX):
    _write_some(fd, views[start:start + _IOV_MAX])


_IOV_MAX = os.sysconf('SC_IOV_MAX')  # Buffers one writev takes (1024).


def _write_some(fd: int, views: List[memoryview]) -> None:
  written = os.writev(fd, views)
  for view in views:
    if written >= view.nbytes:
      written -= view.nbytes
      continue
    view = view[written:]
    written = 0
    while view:
      view = view[os.write(fd, view):]


class _Write:
  """An unfinished entry: its temporary folder, the owner lock held on it
  and the open blocks file."""

  def __init__(self):
    self.temp: Optional[str] = None
    self.fd: Optional[int] = None
    self.owner: Optional[owner_lock.OwnerLock] = None

  def discard(self, store) -> None:
    """Closes what is open and removes the folder (when still set)."""
    if self.fd is not None:
      os.close(self.fd)
      self.fd = None
    if self.temp:
      removal.remove_tree(self.temp, ignore_errors=True)
      store.temps.discard(self.temp)
      self.temp = None
    if self.owner is not None:
      self.owner.release()
      self.owner = None


def _why(error: BaseException) -> str:
  if isinstance(error, _OverBudget):
    return 'over the cache\'s budget'
  if getattr(error, 'errno', None) in (errno.ENOSPC, errno.EDQUOT,
                                       errno.EFBIG):
    return 'the disk is full'
  return str(error)


class _OverBudget(Exception):
  """The entry would take the store past its budget."""


def lock(path: str, how: int) -> Optional[int]:
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
