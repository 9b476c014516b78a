"""A process's own peak memory (VmHWM), not getrusage's ru_maxrss.

At exec, Linux folds the peak of the memory the process had before it into
`ru_maxrss` (`setmax_mm_hiwater_rss` in fs/exec.c): a child forked by a
parent that holds 1.1 GB reports at least 1.1 GB, whatever it used itself.
The benchmark's parent writes the data sets with TensorFlow before it
starts the variants, so every variant reported its parent's 1,123 MB
(2026-11-29). VmHWM in /proc/PID/status is the high-water mark of the
process's own memory since its exec.
"""

import resource
from typing import Optional


def own_peak_mb() -> float:
  """This process's own peak resident memory, in MB (ru_maxrss where there
  is no /proc)."""
  peak = peak_mb('self')
  if peak is None:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  return peak


def peak_mb(pid) -> Optional[float]:
  """The peak resident memory so far of process `pid` ('self' or a
  number), in MB; None when /proc does not say (the process has ended, or
  no /proc)."""
  try:
    with open(f'/proc/{pid}/status') as f:
      for line in f:
        if line.startswith('VmHWM:'):
          return int(line.split()[1]) / 1024
  except (OSError, ValueError, IndexError):
    return None
  return None
