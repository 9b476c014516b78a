"""What a run may trust on a shared machine: a file or folder that is
this user's alone.

One rule, for everything a run reads back, reuses or deletes (the parsed
rows cache's folder and entries, scratch folders, the output folder):
owned by this user, and not writable by group or others (a folder with
the sticky bit excepted, as /tmp: others may add names there, but not
rename or delete ours; and a group that holds no one but its owner, the
user-private group Debian, Ubuntu and Fedora make for each user, whose
umask 002 leaves every folder they make group-writable to no one else). Decided on what was opened (`os.fstat` of a
descriptor opened with O_NOFOLLOW, and O_DIRECTORY for a folder), never
on a path looked up again, so that no link and no swap between the check
and the use is followed.

A folder is opened once (`open_folder`: a link in its place is followed
only when this user or root made it) and used through that descriptor
(`fd_path`, `dir_fd=`); the folders a run makes for itself are made with
their mode whatever the umask, parents included (`make_private`). A
folder that holds this user's folders, as TMPDIR does, may be root's or
have the sticky bit (`parent_problems`), but no one else may write it.

Its own module, not `output_folder`'s: the cache (`data.kept`) and the
scratch folders need the rule without the output folder's lock and
layout, and a module holds one idea.
"""

import errno
import functools
import grp
import os
import stat
from typing import List, Optional, Set, Tuple
import pwd

from generic_trainer.errors import UnsafeFolderError
from generic_trainer.keys import VERIFIED_FOLDERS_ENV

# O_NONBLOCK: a FIFO put in a file's place opens without waiting.
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def problems(info: os.stat_result) -> List[str]:
  """Why the file or folder of `info` is not this user's alone, one
  phrase each ('it is owned by nobody (uid 65534), not by root (uid 0)
  who runs this'); empty when it is."""
  foreign, writable = _faults(info)
  found = []
  if foreign:
    found.append(f'it is owned by {user(info.st_uid)}, not by '
                 f'{user(os.geteuid())} who runs this')
  if writable:
    found.append(f'it is writable by {" and ".join(writable)} (mode '
                 f'{stat.S_IMODE(info.st_mode):04o}'
                 f'{", no sticky bit" if stat.S_ISDIR(info.st_mode) else ""})')
  return found


def why_not(info: os.stat_result) -> str:
  """`problems` in short, for a log line ('owned by uid 65534, not you';
  'writable by group (mode 0664)'); '' when trusted."""
  foreign, writable = _faults(info)
  found = [f'owned by uid {info.st_uid}, not you'] if foreign else []
  if writable:
    found.append(f'writable by {" and ".join(writable)} (mode '
                 f'{stat.S_IMODE(info.st_mode):04o})')
  return '; '.join(found)


def _faults(info: os.stat_result) -> Tuple[bool, List[str]]:
  """The rule: (owned by another user, who else may write it)."""
  writable = [who for who, bit in (('group', stat.S_IWGRP),
                                   ('others', stat.S_IWOTH))
              if info.st_mode & bit]
  if 'group' in writable and owners_group_alone(info.st_gid, info.st_uid):
    writable.remove('group')  # Writable by its owner's group of one.
  if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX:
    writable = []  # Others may add names, not rename or delete ours.
  return info.st_uid != os.geteuid(), writable


@functools.lru_cache(maxsize=None)
def owners_group_alone(gid: int, uid: int) -> bool:
  """Whether group `gid` holds no one but user `uid`: it is that user's
  primary group, lists no other member, and no other user has it as
  theirs (a user-private group, as `useradd` makes by default). A group
  the system does not name, or a user it does not know, is not."""
  try:
    owner = pwd.getpwuid(uid)
    group = grp.getgrgid(gid)
  except KeyError:
    return False
  if owner.pw_gid != gid or any(m != owner.pw_name for m in group.gr_mem):
    return False
  return all(p.pw_gid != gid or p.pw_uid == uid for p in pwd.getpwall())


def parent_problems(info: os.stat_result) -> List[str]:
  """Why a folder that holds this user's folders (TMPDIR) lets someone
  else rename them and put their own in their place, one phrase each;
  empty when it does not. The rule of `problems`, but a folder of root's
  is fine (root may do anything anyway), and so is one with the sticky
  bit (as /tmp: others may add names, not rename or delete ours). In a
  user namespace (the local workers') root's folders show as owned by the
  overflow uid, as every other user's do: such a folder is fine when the
  process that started this one found it so (`verified_env`)."""
  found = []
  if info.st_uid not in (os.geteuid(), 0) and not _verified_outside(info):
    found.append(f'it is owned by {user(info.st_uid)}, not by '
                 f'{user(os.geteuid())} who runs this')
  _, writable = _faults(info)
  if writable:
    found.append(f'it is writable by {" and ".join(writable)} (mode '
                 f'{stat.S_IMODE(info.st_mode):04o}, no sticky bit)')
  return found


def check_ancestors(path: str, name: str,
                    elsewhere: str = 'a folder elsewhere (under your home)'
                    ) -> None:
  """Raises UnsafeFolderError when a folder above `path` (as written, and
  where its links lead), up to /, lets someone else rename what it holds
  (`parent_problems`): a team member who can write a parent without the
  sticky bit (a team's 2775 folder) could rename it aside, with `path` in
  it, and put a folder of theirs in its place; a folder of this user's is
  then still used by its path (TensorFlow writes there by path) and would
  be theirs after the swap. Folders not made yet are not checked (the run
  makes them, private). The folders found safe are recorded for this
  process's children (`verified_env`). `name` names `path` in the
  message ('TMPDIR', '--output-dir'); `elsewhere` says where else to
  put it ('a pipeline root elsewhere ...')."""
  for folder in _folders_above(path):
    try:
      info = os.stat(folder)
    except OSError:
      continue  # Not made yet, or gone meanwhile: the use that follows says so.
    found = parent_problems(info)
    if found:
      raise UnsafeFolderError(
          f'{name} {path} is inside {folder}, which is not safe to hold it: '
          f'{"; and ".join(found)}. Whoever else can write {folder} could '
          f'rename what it holds, with {path} in it, aside and put a folder '
          'of their own in its place. Expected every folder above it owned '
          'by you or root and writable by no one else, or with the sticky '
          f'bit as /tmp has. Received: {name}={path!r}. Choose {elsewhere}, '
          f'or ask the owner of {folder} to '
          f'`chmod +t {folder}` (or `chmod go-w {folder}` if it is yours).')
    _VERIFIED.add((info.st_dev, info.st_ino))


def _folders_above(path: str) -> List[str]:
  """Every folder above `path` as written and above where its links lead,
  nearest first, each once."""
  above = []
  for start in (os.path.abspath(path), os.path.realpath(path)):
    folder = os.path.dirname(start)
    while folder not in above:
      above.append(folder)
      if folder == os.path.dirname(folder):
        break
      folder = os.path.dirname(folder)
  return above


def record_verified(info: os.stat_result) -> None:
  """Records the folder of `info`, found safe to hold this user's
  folders (`parent_problems`), for this process's children."""
  _VERIFIED.add((info.st_dev, info.st_ino))


def verified_env() -> str:
  """The folders this process found safe to hold this user's folders
  (`check_ancestors`, and those its parent found), for
  `keys.VERIFIED_FOLDERS_ENV` of a child: 'dev:inode,...'."""
  return ','.join(f'{dev}:{ino}' for dev, ino in sorted(
      _VERIFIED | _inherited()))


def _verified_outside(info: os.stat_result) -> bool:
  """Whether the folder of `info`, owned by the overflow uid, is one the
  process that started this one found safe (outside the user namespace
  this runs in, where its owner is known: root)."""
  return (info.st_uid == _overflow_uid() and
          (info.st_dev, info.st_ino) in _inherited())


def _inherited() -> Set[Tuple[int, int]]:
  """The folders `keys.VERIFIED_FOLDERS_ENV` names."""
  found = set()
  for pair in os.environ.get(VERIFIED_FOLDERS_ENV, '').split(','):
    dev, _, ino = pair.partition(':')
    if dev.isdigit() and ino.isdigit():
      found.add((int(dev), int(ino)))
  return found


def _overflow_uid() -> int:
  """The uid a user namespace shows for users it does not map."""
  try:
    with open('/proc/sys/kernel/overflowuid') as f:
      return int(f.read())
  except (OSError, ValueError):
    return 65534


# The folders this process found safe to hold its folders: (dev, inode).
_VERIFIED: Set[Tuple[int, int]] = set()


def check_folder(path: str, name: str, harm: str) -> None:
  """Raises UnsafeFolderError when the folder `path` exists and is not this
  user's alone (`open_folder`, whose descriptor is closed again)."""
  fd = open_folder(path, name, harm)
  if fd is not None:
    os.close(fd)


def open_folder(path: str, name: str, harm: str) -> Optional[int]:
  """A descriptor of the folder `path`, opened once, when it is this
  user's alone; None when nothing is there, or a file (the caller says
  what a file in its place means).

  A link at `path` is followed only when this user (or root) made it: the
  user named it. One that someone else made (in a folder they can write,
  put in place of the folder) is refused; what it points to is opened
  without following a link again, and its owner and mode are checked on
  the descriptor (`os.fstat`), which the caller then uses (`fd_path`,
  `dir_fd=`), never the path looked up again.

  Args:
    path: The folder.
    name: How the user named it ('--output-dir'), for the message.
    harm: What whoever else can write it could do, for the message.

  Raises:
    UnsafeFolderError: a link someone else made, or a folder that is not
      this user's alone.
  """
  target = path
  try:
    info = os.lstat(path)
  except FileNotFoundError:
    return None
  if stat.S_ISLNK(info.st_mode):
    if info.st_uid not in (os.geteuid(), 0):
      raise UnsafeFolderError(
          f'{name} {path} is a link to {os.readlink(path)!r} made by '
          f'{user(info.st_uid)}, not by {user(os.geteuid())} who runs this: '
          'whoever can put a link there chooses the folder a run writes, '
          'reads back and removes from. Expected a folder, or a link you '
          f'made. Received: {name}={path!r}. Remove the link, and check who '
          f'else can write {os.path.dirname(os.path.abspath(path))}.')
    target = os.path.realpath(path)  # Once; the target is not followed.
  try:
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                 os.O_CLOEXEC)
  except FileNotFoundError:
    return None
  except OSError as e:
    if e.errno == errno.ENOTDIR:
      return None  # A file: the caller says what a file there means.
    if e.errno == errno.ELOOP:  # Made a link since the lstat above.
      raise UnsafeFolderError(
          f'{name} {path} became a link while it was opened. Expected a '
          f'folder that only you own and can write. Received: '
          f'{name}={path!r}. Check who else can write '
          f'{os.path.dirname(os.path.abspath(path))}.') from e
    raise
  found = problems(os.fstat(fd))
  if found:
    os.close(fd)
    raise UnsafeFolderError(
        f'{name} {path} is not safe to write: {"; and ".join(found)}. '
        f'Whoever else can write it {harm}. Expected a folder that only you '
        f'own and can write. Received: {name}={path!r}. Choose a folder of '
        f'your own, or `chmod go-w {path}` if it is yours.')
  return fd


def fd_path(fd: int, path: str) -> str:
  """A path that names the folder open as `fd` itself, not what `path`
  names by then: `/proc/self/fd/N` (the kernel resolves it to the opened
  folder); `path` where there is no /proc (macOS)."""
  via = os.path.join(_OPEN_FDS, str(fd))
  return via if os.path.isdir(_OPEN_FDS) else path


_OPEN_FDS = '/proc/self/fd'


def make_private(path: str, mode: int = 0o700) -> None:
  """Creates the folder `path` and its missing parents, each `mode` (0700)
  whatever the umask (under umask 002, `os.makedirs` would make the
  parents 0775: a group member could put a link in place of the folder).
  Folders that exist are left as they are."""
  path = os.path.abspath(path)
  missing = []
  while not os.path.lexists(path):
    missing.append(path)
    path = os.path.dirname(path)
  for folder in reversed(missing):
    try:
      os.mkdir(folder, mode)
    except FileExistsError:
      continue  # Made meanwhile, by us or another: checked by its user.
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                 os.O_CLOEXEC)
    try:
      os.fchmod(fd, mode)  # The folder made, not a link put there since.
    finally:
      os.close(fd)


def open_trusted(path: str, folder: bool = False,
                 dir_fd: Optional[int] = None) -> Tuple[Optional[int], str]:
  """(a read-only descriptor of `path`, '') when it is this user's alone;
  else (None, why not). A link is not followed; `folder`: it must be a
  folder; `dir_fd`: `path` is relative to that folder's descriptor."""
  flags = _OPEN | (os.O_DIRECTORY if folder else 0)
  try:
    fd = os.open(path, flags, dir_fd=dir_fd)
  except FileNotFoundError:
    return None, 'missing'
  except OSError as e:  # ENOTDIR: a file for a folder.
    if e.errno == errno.ELOOP:
      return None, 'a link (not followed)'
    return None, f'unreadable ({e})'
  info = os.fstat(fd)
  why = why_not(info)
  if not why and not folder and not stat.S_ISREG(info.st_mode):
    why = 'not a plain file'
  if why:
    os.close(fd)
    return None, why
  return fd, ''


def same_file(fd: int, path: str, dir_fd: Optional[int] = None) -> bool:
  """Whether `path` (not followed) still names the file open as `fd`."""
  try:
    now = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
  except OSError:
    return False
  held = os.fstat(fd)
  return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def user(uid: int) -> str:
  """'alice (uid 1000)', or 'uid 1000' for a uid without a name."""
  try:
    return f'{pwd.getpwuid(uid).pw_name} (uid {uid})'
  except (ImportError, KeyError):
    return f'uid {uid}'
