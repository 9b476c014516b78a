"""The parsed rows cache's folder: ours by proof, used through one
descriptor.

A folder may be given as the cache (`--parsed-rows-cache ws`) that holds
other things: a working folder with a thesis in it, the output of an
earlier run. Eviction removes what it finds there, so what it may remove
is decided by proof, never by what a folder lacks (an earlier version
took every subfolder without a manifest for a half-removed entry):

- the folder carries our marker, `MARKER` (a `CACHEDIR.TAG` of the Cache
  Directory Tagging convention, which backup tools honour, with our line
  in it), written when a training first uses the folder, and only when
  it is empty or holds nothing but what a cache of ours holds (one of an
  earlier version, before the marker);
- what may be removed has our name format (`is_entry`: a 40-hex entry
  folder; `atomic_files.TEMP_PREFIX` for unfinished writes and entries
  out of place), is a real folder (a link there is not ours), and an
  entry holds our manifest (`entry_used`: a folder of 40-hex-named
  folders, a model hub's `snapshots/` or a git object store, is not a
  cache; issue 55);
- a folder that holds anything else (`foreign`), or that holds or is held
  by the output folder or an input (`in_the_way`), is refused with a
  message naming what is in the way; what appears there later is left,
  and named once in the log (`kept_cache.SpanCache.evict_to_budget`).

The folder is opened once (`open_marked`: `trust.open_folder`, a link
someone else made refused, owner and mode checked on the descriptor) and
used through that descriptor from then on (`trust.fd_path`), so that a
folder swapped for a link between two steps is never the one emptied.
Missing folders are made 0700, parents included (`trust.make_private`),
whatever the umask.
"""

import os
import re
import stat
from typing import Iterable, List, Optional

from generic_trainer.errors import UnsafeFolderError
from generic_trainer.system import atomic_files
from generic_trainer.system import scratch
from generic_trainer.system import trust

MARKER = 'CACHEDIR.TAG'
MARKER_TEXT = (
    'Signature: 8a477f597d28d172789f06886806bc55\n'
    '# This file is a cache directory tag created by tfx-generic-trainer:\n'
    '# parsed rows kept across trainings. The trainer removes from this\n'
    '# folder only the entries it made; do not keep other files here.\n')
ENTRY_MANIFEST = 'manifest.json'  # In each entry (`kept_entry.MANIFEST`).
DECISIONS = 'decisions.json'  # A store's: what each file got (kept_cache).
_ENTRY = re.compile(r'[0-9a-f]{40}')  # `kept_key.entry_name`.
# Why a cache folder must be this user's alone (`trust.open_folder`).
UNSAFE_FOLDER_HARM = ('could put rows of its own choosing in an entry, which '
                      'a training would take for its data, or remove entries '
                      'as they are read')


def is_entry(name: str) -> bool:
  """Whether `name` has the format of an entry's folder."""
  return bool(_ENTRY.fullmatch(name))


def is_temporary(name: str) -> bool:
  """Whether `name` has the format of what a store writes for a moment:
  an unfinished entry, an entry out of place, a file written whole."""
  return name.startswith(atomic_files.TEMP_PREFIX)


def foreign(fd: int) -> List[str]:
  """What the cache folder open as `fd` holds that no store of ours made,
  by name and kind, sorted: a folder of another name, a file or link
  where an entry would be, a marker of another program; in a folder not
  marked yet, an entry-named folder without our manifest (`entry_used`).
  """
  found = []
  # Marked, a cache already: its entries are checked when read, and
  # evicted only with their manifest.
  proven = _our_marker(fd)
  for name in sorted(os.listdir(fd)):
    try:
      info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
      continue
    if name == MARKER:
      if not _our_marker(fd):
        found.append(f'{name} (not ours)')
      continue
    folder = stat.S_ISDIR(info.st_mode)
    if is_entry(name) and folder and (
        proven or entry_used(fd, name) is not None):
      continue
    if is_temporary(name) and not stat.S_ISLNK(info.st_mode):
      continue
    if name in (DECISIONS, scratch.LOCK_FILE) and stat.S_ISREG(info.st_mode):
      continue  # The lock: a scratch folder's (an object store's cache).
    found.append(name + ('/' if folder else ''))
  return found


def entry_used(fd: int, name: str) -> Optional[float]:
  """When the entry `name` of the cache folder open as `fd` was last
  used (its manifest's mtime), or None when it holds no manifest, a plain
  file, which every entry a store of ours made holds: a folder of 40 hex
  digits alone (a model hub's `snapshots/<sha>`, a git object store) is no
  proof that it is ours."""
  try:
    info = os.stat(os.path.join(name, ENTRY_MANIFEST), dir_fd=fd,
                   follow_symlinks=False)
  except OSError:
    return None
  return info.st_mtime if stat.S_ISREG(info.st_mode) else None


def marked(fd: int) -> bool:
  """Whether the folder open as `fd` carries our marker."""
  return _our_marker(fd)


def _our_marker(fd: int) -> bool:
  marker, _ = trust.open_trusted(MARKER, dir_fd=fd)
  if marker is None:
    return False
  with os.fdopen(marker, encoding='utf-8', errors='replace') as f:
    return f.read(len(MARKER_TEXT) + 1) == MARKER_TEXT


def in_the_way(folder: str, outputs: Iterable[Optional[str]] = (),
               inputs: Iterable[Optional[str]] = ()) -> List[str]:
  """What in `outputs` (folders a run writes and replaces) or `inputs`
  (files and folders a run reads) holds the cache folder `folder` or
  lies in it, as phrases ('the output folder /w/out lies in it')."""
  found = []
  folder = os.path.realpath(folder)
  for kind, given in (('output folder', outputs), ('input', inputs)):
    for path in filter(None, given):
      real = os.path.realpath(path)
      if os.path.commonpath([real, folder]) == folder:
        found.append(f'the {kind} {path} lies in it')
      elif os.path.commonpath([real, folder]) == real and (
          kind == 'output folder' or os.path.isdir(real)):
        found.append(f'it lies in the {kind} {path}')
  return found


def refuse(name: str, path: str, what: List[str]) -> UnsafeFolderError:
  """The error of a cache folder `path` (named `name`) that holds what is
  not ours, or holds or is held by an output or input (`what`)."""
  shown = ', '.join(what[:8]) + (f' and {len(what) - 8} more'
                                 if len(what) > 8 else '')
  return UnsafeFolderError(
      f'{name} {path} is not a folder of parsed rows alone: {shown}. A '
      'cache folder is evicted (its least recently used entries removed) '
      'and must hold nothing else: what is not an entry there is never '
      'removed, and a run never keeps its cache where it writes or reads its '
      'own files. Expected a new or empty folder, or one a training keeps '
      f'parsed rows in (it holds {MARKER}). Received: {name}={path!r}. '
      'Choose a folder of its own (leave the option out for the default '
      'one), or move what is named out of it.')


def open_marked(path: str, name: str, outputs=(), inputs=()) -> int:
  """The cache folder `path`, made (0700, parents included) when missing,
  opened once and checked (`trust.check_ancestors`, `trust.open_folder`,
  `foreign`, `in_the_way`),
  with our marker written when missing; its descriptor.

  Raises:
    UnsafeFolderError: see `trust.check_ancestors`, `trust.open_folder`
      and `refuse`; or `path` is
      a file.
  """
  what = in_the_way(path, outputs, inputs)
  if what:
    raise refuse(name, path, what)
  trust.check_ancestors(path, name)
  fd = _opened(path, name, make=True)
  if fd is None:
    raise refuse(name, path, ['it is a file'])
  try:
    what = foreign(fd)
    if what:
      raise refuse(name, path, what)
    if not marked(fd):
      atomic_files.write_text(os.path.join(trust.fd_path(fd, path), MARKER),
                              MARKER_TEXT, mode=0o600)
  except BaseException:
    os.close(fd)
    raise
  return fd


def check(path: str, name: str, outputs=(), inputs=()) -> None:
  """`open_marked`'s checks of an existing folder, before a training
  (the command's flags, the Estimator's arguments), without making or
  marking anything."""
  what = in_the_way(path, outputs, inputs)
  if what:
    raise refuse(name, path, what)
  trust.check_ancestors(path, name)
  fd = _opened(path, name)
  if fd is None:
    return
  try:
    what = foreign(fd)
  finally:
    os.close(fd)
  if what:
    raise refuse(name, path, what)


def _opened(path: str, name: str, make: bool = False) -> Optional[int]:
  """`trust.open_folder` of the cache folder `path` (made first when
  `make`), with a folder this user may not enter or make (another user's
  cache, 0700) said as our error, not a PermissionError's traceback."""
  try:
    if make:
      trust.make_private(path)
    return trust.open_folder(path, name, UNSAFE_FOLDER_HARM)
  except PermissionError as e:
    raise UnsafeFolderError(
        f'{name} {path} cannot be used: {e.strerror} ({e.filename}), '
        'so it is another user\'s, or in a folder of theirs. A cache folder '
        'must be yours alone: another user\'s could hold rows of their '
        'choosing. Expected a folder that you own and only you can write. '
        f'Received: {name}={path!r}. Choose a folder of your own (leave the '
        'option out for the default one, in your home).') from e
