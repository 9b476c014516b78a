"""What a run may trust on a shared machine: a file or folder that is
this user's alone.

One rule, for everything a run reads back, reuses or deletes (the parsed
rows cache's folder and entries, scratch folders, the output folder):
owned by this user, and not writable by group or others (a folder with
the sticky bit excepted, as /tmp: others may add names there, but not
rename or delete ours). Decided on what was opened (`os.fstat` of a
descriptor opened with O_NOFOLLOW, and O_DIRECTORY for a folder), never
on a path looked up again, so that no link and no swap between the check
and the use is followed.

Its own module, not `output_folder`'s: the cache (`data.kept`) and the
scratch folders need the rule without the output folder's lock and
layout, and a module holds one idea.
"""

import errno
import os
import stat
from typing import List, Optional, Tuple
import pwd

from generic_trainer.errors import UnsafeFolderError

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
  if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX:
    writable = []  # Others may add names, not rename or delete ours.
  return info.st_uid != os.geteuid(), writable


def check_folder(path: str, name: str, harm: str) -> None:
  """Raises UnsafeFolderError when the folder `path` (followed: the user
  named it) exists and is not this user's alone.

  Args:
    path: The folder.
    name: How the user named it ('--output-dir'), for the message.
    harm: What whoever else can write it could do, for the message.
  """
  try:
    info = os.stat(path)
  except FileNotFoundError:
    return
  if not stat.S_ISDIR(info.st_mode):
    return  # The caller says what a file in its place means.
  found = problems(info)
  if found:
    raise UnsafeFolderError(
        f'{name} {path} is not safe to write: {"; and ".join(found)}. '
        f'Whoever else can write it {harm}. Expected a folder that only you '
        f'own and can write. Received: {name}={path!r}. Choose a folder of '
        f'your own, or `chmod go-w {path}` if it is yours.')


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
