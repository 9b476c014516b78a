"""What this machine can give a training: cores, free memory and disk.

Read from the process's CPU affinity, `/proc/meminfo` and `/proc/mounts`
(Linux), so a container's CPU set counts, not the host's.
"""

import os
import re
import shutil
from typing import Optional

# Filesystems that keep their files in memory: no disk to spill onto.
MEMORY_FILESYSTEMS = ('tmpfs', 'ramfs')
_OCTAL_ESCAPE = re.compile(r'\\([0-7]{3})')  # /proc/mounts: '\040' is ' '.


def cores() -> int:
  """CPU cores this process may run on."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def available_memory() -> Optional[int]:
  """Bytes of memory available now (MemAvailable), or None if unknown."""
  try:
    with open('/proc/meminfo') as f:
      for line in f:
        if line.startswith('MemAvailable:'):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return None


def free_disk(path: str) -> Optional[int]:
  """Bytes free on the filesystem of `path`, None if unknown. (On tmpfs
  they are memory: see `memory_filesystem`.)"""
  try:
    return shutil.disk_usage(path).free
  except OSError:
    return None


def memory_filesystem(path: str) -> Optional[str]:
  """The type of the filesystem `path` is on ('tmpfs', 'ramfs') when that
  keeps its files in memory, else None: such a "disk" is no place to put
  what does not fit in memory."""
  kind = filesystem_type(path)
  return kind if kind in MEMORY_FILESYSTEMS else None


def filesystem_type(path: str) -> Optional[str]:
  """The type of the filesystem `path` is on ('ext4', 'tmpfs'...), from the
  longest mount point above it in `/proc/mounts`; None if unknown."""
  path = os.path.realpath(path)
  best, kind = '', None
  try:
    with open('/proc/mounts') as f:
      for line in f:
        fields = line.split()
        if len(fields) < 3:
          continue
        mount = _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)),
                                  fields[1])
        inside = path == mount or path.startswith(mount.rstrip('/') + '/')
        if inside and len(mount) >= len(best):
          best, kind = mount, fields[2]
  except OSError:
    return None
  return kind
