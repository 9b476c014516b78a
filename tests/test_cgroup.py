"""Container-aware sizing: a cgroup's memory and CPU limits are the
machine's size (cache decision, local workers, parallelism). Read from fake
/proc and /sys files under a root folder."""

import os

import pytest

from generic_trainer.system import cgroup
from generic_trainer.system import machine

GIB = 1 << 30
MOUNTINFO_V2 = ('25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 '
                'rw,nsdelegate\n')
MOUNTINFO_V1 = (
    '32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n'
    '35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n'
    '41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n')


def _fake(root, files):
  """Writes {relative path: text} under `root`; returns it as a str."""
  for path, text in files.items():
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, 'w') as f:
      f.write(text)
  return str(root)


def _meminfo(available):
  return {'proc/meminfo': f'MemTotal: {available // 1024 * 2} kB\n'
                          f'MemAvailable: {available // 1024} kB\n'}


def _pod_v2(root, memory_max=str(2 * GIB), current='0', stat='',
            cpu_max='max 100000', machine_memory=24 * GIB):
  """A cgroup v2 container, /kubepods/pod1/c1, limits on c1."""
  leaf = 'sys/fs/cgroup/kubepods/pod1/c1'
  return _fake(root, {
      **_meminfo(machine_memory),
      'proc/self/cgroup': '0::/kubepods/pod1/c1\n',
      'proc/self/mountinfo': MOUNTINFO_V2,
      f'{leaf}/memory.max': memory_max + '\n',
      f'{leaf}/memory.current': current + '\n',
      f'{leaf}/memory.stat': stat,
      f'{leaf}/cpu.max': cpu_max + '\n'})


def test_cgroup_v2_memory_and_cpu_limits_are_read(tmp_path):
  """memory.max less the working set (usage less inactive file cache), and
  cpu.max's quota over its period, in cores."""
  root = _pod_v2(tmp_path, current=str(600 << 20),
                 stat=f'anon 1\ninactive_file {100 << 20}\n',
                 cpu_max='150000 100000')
  assert cgroup.limits(root) == cgroup.Limits(
      memory=2 * GIB, memory_left=2 * GIB - (500 << 20), cpus=1.5)


def test_cgroup_v2_without_limits_reads_as_none(tmp_path):
  """'max' in memory.max and cpu.max: no limit."""
  root = _pod_v2(tmp_path, memory_max='max')
  assert cgroup.limits(root) == cgroup.Limits(None, None, None)
  assert machine.memory(root) == machine.Memory(24 * GIB, None)


def test_a_parent_cgroup_limit_counts(tmp_path):
  """A pod's limit on a parent of the container's cgroup bounds it too."""
  root = _pod_v2(tmp_path, memory_max='max', cpu_max='max 100000')
  _fake(root, {'sys/fs/cgroup/kubepods/pod1/memory.max': str(GIB),
               'sys/fs/cgroup/kubepods/pod1/cpu.max': '50000 100000'})
  assert cgroup.limits(root) == cgroup.Limits(GIB, GIB, 0.5)


def test_cgroup_v1_limits_are_read_on_a_hybrid_host(tmp_path):
  """v1 controllers (memory, cpu) with an empty v2 hierarchy beside them:
  the limits come from v1's files; v1's 'unlimited' numbers are no limit."""
  files = {
      **_meminfo(24 * GIB),
      'proc/self/cgroup': ('4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n'
                           '0::/\n'),
      'proc/self/mountinfo': MOUNTINFO_V1,
      'sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes': str(3 * GIB),
      'sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes': str(GIB),
      'sys/fs/cgroup/memory/docker/abc/memory.stat': (
          f'cache 5\ntotal_inactive_file {GIB // 2}\n'),
      'sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712',
      'sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us': '200000',
      'sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us': '100000',
      'sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '-1',
      'sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000',
  }
  root = _fake(tmp_path, files)
  assert cgroup.limits(root) == cgroup.Limits(3 * GIB, 3 * GIB - GIB // 2,
                                              2.0)


def test_a_cgroup_namespace_path_outside_the_mount_root_reads_the_mount(
    tmp_path):
  """In a container whose /proc/self/cgroup names a host path that is not
  under the mount's root, the mount itself is the process's cgroup."""
  root = _fake(tmp_path, {
      **_meminfo(24 * GIB),
      'proc/self/cgroup': '0::/../../host/slice\n',
      'proc/self/mountinfo': ('25 1 0:22 /kubepods/pod1 /sys/fs/cgroup rw - '
                              'cgroup2 cgroup2 rw\n'),
      'sys/fs/cgroup/memory.max': str(GIB)})
  assert cgroup.limits(root).memory == GIB


def test_without_mountinfo_the_usual_place_is_read(tmp_path):
  """No mountinfo: /sys/fs/cgroup, as most containers mount it."""
  root = _fake(tmp_path, {**_meminfo(24 * GIB), 'proc/self/cgroup': '0::/\n',
                          'sys/fs/cgroup/memory.max': str(GIB),
                          'sys/fs/cgroup/cpu.max': '100000 100000'})
  assert cgroup.limits(root) == cgroup.Limits(GIB, GIB, 1.0)


def test_no_cgroup_at_all_means_no_limits(tmp_path):
  """Nothing to read (not Linux, or /proc hidden): no limits, no error."""
  assert cgroup.limits(str(tmp_path)) == cgroup.Limits()
  assert machine.memory(str(tmp_path)) == machine.Memory(None)


def test_the_machine_is_as_big_as_its_cgroup(tmp_path):
  """Memory: the lower of MemAvailable and what the limit leaves; cores: no
  more than the CPU quota, rounded up."""
  root = _pod_v2(tmp_path, cpu_max='50000 100000')
  assert machine.memory(root) == machine.Memory(2 * GIB, 2 * GIB)
  assert machine.available_memory(root) == 2 * GIB
  assert machine.cores(root) == 1
  big = _pod_v2(tmp_path / 'big', memory_max=str(64 * GIB))
  assert machine.memory(big) == machine.Memory(24 * GIB, None)
  assert machine.Memory(2 * GIB, 2 * GIB).describe(lambda n: f'{n >> 30}G') == (
      'the 2G available under the 2G cgroup memory limit')


def test_cache_decision_in_a_2_gib_cgroup_on_a_24_gib_machine(
    tmp_path, monkeypatch):
  """1 GB of parsed rows would fit in a quarter of 24 GiB; in a 2 GiB
  cgroup they do not, and the reason names the limit."""
  from generic_trainer.data import input_pipeline  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import parsed_size  # pylint: disable=g-import-not-at-top
  data = tmp_path / 'data.gz'
  data.write_bytes(b'')
  monkeypatch.setattr(parsed_size, 'estimate', lambda files, config: (
      parsed_size.Estimate(rows=10**6, row_bytes=1000.0,
                           parsed_bytes=10**9)))
  monkeypatch.setattr(machine, 'ROOT', _fake(tmp_path / 'host',
                                             _meminfo(24 * GIB)))
  fit = input_pipeline.cache_fit([str(data)], {})
  assert fit.where == 'memory'
  assert fit.reason == ('1.0 GB of parsed rows (~1.0M rows) fit in a '
                        'quarter of the 26 GB available')
  monkeypatch.setattr(machine, 'ROOT', _pod_v2(tmp_path / 'pod'))
  fit = input_pipeline.cache_fit([str(data)], {})
  assert fit.where is None
  assert fit.reason == ('1.0 GB of parsed rows (~1.0M rows) do not fit in a '
                        'quarter of the 2.1 GB available under the 2.1 GB '
                        'cgroup memory limit')


def test_local_worker_capacity_counts_the_cgroup(tmp_path, monkeypatch):
  """One core and 2 GiB of cgroup on a big machine: two workers, and the
  refusal names the cgroup's limits."""
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(machine, 'ROOT', _pod_v2(tmp_path,
                                               cpu_max='100000 100000'))
  local_cluster.check_capacity(2)
  with pytest.raises(InvalidArgumentError, match=(
      r'which can run about 2: 1 core\(s\) and 2.0 GiB of free memory '
      r"\(this cgroup's limits: 1 core, 2.1 GB of memory\), at two workers")):
    local_cluster.check_capacity(3)
