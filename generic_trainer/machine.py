"""What this machine can give a training: cores and free memory.

Read from the process's CPU affinity and `/proc/meminfo` (Linux), so a
container's CPU set counts, not the host's.
"""

import os
from typing import Optional


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
