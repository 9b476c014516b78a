"""The memory and CPU limits of this process's cgroup (a container's size).

`machine` asks here; nothing else should. A Kubernetes pod's or a Docker
container's limits are cgroup files:
  - cgroup v2: `memory.max` ('max' or bytes), `memory.current`,
    `memory.stat`, `cpu.max` ('max 100000' or '200000 100000': quota and
    period in microseconds);
  - cgroup v1: `memory.limit_in_bytes` (a huge number when unlimited),
    `memory.usage_in_bytes`, `memory.stat`, `cpu.cfs_quota_us` (-1 when
    unlimited) and `cpu.cfs_period_us`.
The process's cgroup is found from `/proc/self/cgroup` (a `0::/path` line
for v2, `N:memory:/path` for v1; a hybrid host has both, and a controller
counts where it is attached) and the hierarchy's mount from
`/proc/self/mountinfo` (else `/sys/fs/cgroup`). The limit of every cgroup
from the process's up to the mount counts: a pod's limit may sit on a
parent of the container's cgroup.

The memory left under a limit is the limit less the cgroup's working set:
its usage less the page cache the kernel can drop (`inactive_file`), as
the kubelet counts it for eviction.
"""

import os
import re
from typing import Dict, List, NamedTuple, Optional, Tuple

# cgroup v1 writes "no limit" as the largest page-aligned int64.
_UNLIMITED = 1 << 60
_OCTAL_ESCAPE = re.compile(r'\\([0-7]{3})')


class Limits(NamedTuple):
  """What the cgroup allows this process; None where there is no limit
  (or no cgroup, or it cannot be read).

  Attributes:
    memory: The memory limit in bytes that leaves the least.
    memory_left: Bytes left under that limit now (limit less working set).
    cpus: The CPU quota in cores (quota / period), the lowest on the path.
  """
  memory: Optional[int] = None
  memory_left: Optional[int] = None
  cpus: Optional[float] = None


def unescape(field: str) -> str:
  """A path as /proc/mounts and mountinfo write it ('\\040' is a space)."""
  return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def limits(root: str = '/') -> Limits:
  """The cgroup limits of this process, read under `root` (tests give a
  folder of fake /proc and /sys files)."""
  memory = _memory(_folders(root, 'memory'))
  return Limits(memory[0], memory[1], _cpus(_folders(root, 'cpu')))


def _memory(folders: List[Tuple[str, int]]) -> Tuple[Optional[int],
                                                     Optional[int]]:
  """(limit, left) at the level of `folders` that leaves the least."""
  best = (None, None)
  for folder, version in folders:
    names = (('memory.max', 'memory.current', 'inactive_file') if version == 2
             else ('memory.limit_in_bytes', 'memory.usage_in_bytes',
                   'total_inactive_file'))
    limit = _number(os.path.join(folder, names[0]))
    if limit is None or limit >= _UNLIMITED:
      continue
    used = _number(os.path.join(folder, names[1])) or 0
    used -= min(used, _stat(os.path.join(folder, 'memory.stat'), names[2]))
    left = max(0, limit - used)
    if best[1] is None or left < best[1]:
      best = (limit, left)
  return best


def _cpus(folders: List[Tuple[str, int]]) -> Optional[float]:
  """The lowest CPU quota, in cores, of `folders`."""
  lowest = None
  for folder, version in folders:
    if version == 2:
      fields = (_read(os.path.join(folder, 'cpu.max')) or '').split()
      quota, period = (fields + ['max', '100000'])[:2] if fields else (
          'max', '100000')
    else:
      quota = _read(os.path.join(folder, 'cpu.cfs_quota_us'))
      period = _read(os.path.join(folder, 'cpu.cfs_period_us'))
    try:
      cores = int(quota) / int(period)
    except (TypeError, ValueError, ZeroDivisionError):
      continue  # 'max', -1 (negative below) or unreadable: no quota here.
    if cores > 0 and (lowest is None or cores < lowest):
      lowest = cores
  return lowest


def _folders(root: str, controller: str) -> List[Tuple[str, int]]:
  """[(folder, cgroup version)] of this process's cgroup for `controller`
  and its parents up to the hierarchy's mount, innermost first."""
  membership = _membership(root)
  if controller in membership:
    path, version = membership[controller], 1
  elif '' in membership:
    path, version = membership[''], 2
  else:
    return []
  mount = _mount(root, controller, version)
  if mount is None:
    return []
  mount_root, mount_point = mount
  relative = os.path.relpath(path, mount_root)
  if relative.startswith('..'):
    relative = '.'  # Another namespace's path: the mount is ours.
  folders, parts = [], [] if relative == '.' else relative.split('/')
  while True:
    folders.append((os.path.join(root, mount_point.lstrip('/'), *parts),
                    version))
    if not parts:
      return folders
    parts.pop()


def _membership(root: str) -> Dict[str, str]:
  """{controller: cgroup path} from /proc/self/cgroup; '' for v2."""
  found = {}
  text = _read(os.path.join(root, 'proc', 'self', 'cgroup')) or ''
  for line in text.splitlines():
    fields = line.split(':', 2)
    if len(fields) != 3:
      continue
    _, controllers, path = fields
    for name in controllers.split(',') if controllers else ['']:
      found.setdefault(name, path)
  return found


def _mount(root: str, controller: str,
           version: int) -> Optional[Tuple[str, str]]:
  """(root of the hierarchy, mount point) of `controller`'s hierarchy,
  from mountinfo; else the usual place under /sys/fs/cgroup."""
  text = _read(os.path.join(root, 'proc', 'self', 'mountinfo')) or ''
  for line in text.splitlines():
    before, _, after = line.partition(' - ')
    fields, kind = before.split(), after.split()
    if len(fields) < 5 or len(kind) < 3:
      continue
    options = kind[2].split(',')
    if (version == 2 and kind[0] == 'cgroup2') or (
        version == 1 and kind[0] == 'cgroup' and controller in options):
      return unescape(fields[3]), unescape(fields[4])
  usual = '/sys/fs/cgroup' + ('' if version == 2 else f'/{controller}')
  if os.path.isdir(os.path.join(root, usual.lstrip('/'))):
    return '/', usual
  return None


def _read(path: str) -> Optional[str]:
  try:
    with open(path) as f:
      return f.read().strip()
  except OSError:
    return None


def _number(path: str) -> Optional[int]:
  """The integer in `path`; None for 'max', a missing or unreadable file."""
  text = _read(path)
  try:
    return int(text) if text is not None else None
  except ValueError:
    return None


def _stat(path: str, key: str) -> int:
  """The value of `key` in a memory.stat file, 0 if absent."""
  for line in (_read(path) or '').splitlines():
    name, _, value = line.partition(' ')
    if name == key and value.strip().isdigit():
      return int(value)
  return 0
