"""What this machine can give a training: cores, free memory and disk.

Read from the process's CPU affinity, `/proc/meminfo` and `/proc/mounts`
(Linux), so a container's CPU set counts, not the host's; and from the
container's cgroup limits (`cgroup`): in a Kubernetes pod with a memory
limit, the memory available is what is left under the limit, not the
node's, and a CPU quota of 2 cores is 2 cores however many the node has.
Everything that sizes itself to the machine (the cache decision, the local
workers' capacity, the input's parallelism) asks here.
"""

import glob
import math
import os
import shutil
from typing import List, NamedTuple, Optional

from generic_trainer.system import cgroup

# Filesystems that keep their files in memory: no disk to spill onto.
MEMORY_FILESYSTEMS = ('tmpfs', 'ramfs')
# Where /proc and /sys are read from; tests point it at fake files.
ROOT = '/'


class Memory(NamedTuple):
  """The memory a training may take now.

  Attributes:
    available: Bytes available (the lower of MemAvailable and what the
      cgroup's limit leaves), or None if unknown.
    limit: The cgroup memory limit in bytes when it is what bounds
      `available`, else None.
  """
  available: Optional[int]
  limit: Optional[int] = None

  def describe(self, size) -> str:
    """'the 20 GB available', or 'the 1.9 GB available under the 2.1 GB
    cgroup memory limit'; `size` formats a number of bytes."""
    text = f'the {size(self.available)} available'
    if self.limit is not None:
      text += f' under the {size(self.limit)} cgroup memory limit'
    return text


def cores(root: Optional[str] = None) -> int:
  """CPU cores this process may run on: its CPU affinity, and no more than
  the cgroup's CPU quota (rounded up)."""
  try:
    count = len(os.sched_getaffinity(0))
  except AttributeError:
    count = os.cpu_count() or 1
  quota = cgroup.limits(root or ROOT).cpus
  if quota is not None:
    count = min(count, max(1, math.ceil(quota)))
  return count


def memory(root: Optional[str] = None) -> Memory:
  """The memory available now: MemAvailable, or less where the cgroup's
  memory limit leaves less (`cgroup.Limits.memory_left`)."""
  root = root or ROOT
  available = _mem_available(root)
  limits = cgroup.limits(root)
  left = limits.memory_left
  if left is not None and (available is None or left < available):
    return Memory(left, limits.memory)
  return Memory(available)


def available_memory(root: Optional[str] = None) -> Optional[int]:
  """Bytes of memory available now, or None if unknown (see `memory`)."""
  return memory(root).available


def limits_note(root: Optional[str] = None) -> str:
  """' (this cgroup's limits: 2 cores, 2.1 GB of memory)' for a message
  that gives the machine's size, or '' without cgroup limits."""
  limits = cgroup.limits(root or ROOT)
  cpus = limits.cpus
  parts = ([f'{cpus:g} core{"" if cpus == 1 else "s"}'] if cpus is not None
           else []) + (
      [f'{limits.memory / 1e9:.1f} GB of memory']
      if limits.memory is not None else [])
  return f" (this cgroup's limits: {', '.join(parts)})" if parts else ''


def gpus(root: Optional[str] = None) -> List[str]:
  """The NVIDIA GPUs this machine shows, by name, as the driver lists them
  in /proc/driver/nvidia/gpus/*/information (no CUDA, no TensorFlow
  needed); [] without the driver or without GPUs passed to the container."""
  names = []
  for info in sorted(glob.glob(os.path.join(
      root or ROOT, 'proc/driver/nvidia/gpus/*/information'))):
    try:
      with open(info) as f:
        for line in f:
          if line.startswith('Model:'):
            names.append(line.split(':', 1)[1].strip())
    except OSError:
      continue
  return names


def describe(root: Optional[str] = None) -> str:
  """What a pod or container gives a training, for the executor's first
  log line: '2 cores, 3.9 GB of memory available (this cgroup's limits:
  2 cores, 4.0 GB of memory), GPUs: none'."""
  available = memory(root).available
  shown = (f'{available / 1e9:.1f} GB of memory available'
           if available is not None else 'memory unknown')
  names = gpus(root)
  count = cores() if root is None else cores(root)
  return (f'{count} core{"" if count == 1 else "s"}, {shown}'
          f'{limits_note(root)}, GPUs: {", ".join(names) or "none"}')


def _mem_available(root: str) -> Optional[int]:
  """MemAvailable of /proc/meminfo, in bytes, or None."""
  try:
    with open(os.path.join(root, 'proc', 'meminfo')) as f:
      for line in f:
        if line.startswith('MemAvailable:'):
          return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
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
        mount = cgroup.unescape(fields[1])
        inside = path == mount or path.startswith(mount.rstrip('/') + '/')
        if inside and len(mount) >= len(best):
          best, kind = mount, fields[2]
  except OSError:
    return None
  return kind
