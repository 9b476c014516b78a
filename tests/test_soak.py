"""Soak: 20 penguin pipeline runs back to back on one metadata store.

Run it with `make soak` (about 6 minutes; not part of `make test`). It checks
that every run succeeds, that the store records them all, and that after
the first runs (imports, caches, Beam's worker pools) neither the resident
memory nor the open file descriptors keep growing.
"""

import os
import resource

import pytest

RUNS = 20
WARM_UP = 3
MAX_RSS_GROWTH_MB = 300  # After warm-up, over the remaining 17 runs.
MAX_FD_GROWTH = 10


def _rss_mb() -> float:
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) / 1024
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _open_fds() -> int:
  return len(os.listdir('/proc/self/fd'))


@pytest.mark.soak
def test_twenty_runs_on_one_store(tmp_path):
  """20 runs succeed on one SQLite store, without growing memory or fds."""
  from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
  from pipelines import penguin_pipeline_local  # pylint: disable=g-import-not-at-top
  samples = []
  for run in range(RUNS):
    result = penguin_pipeline_local.run(str(tmp_path), train_steps=20)
    assert result['blessed'] and result['pushed_model'], (run, result)
    samples.append((_rss_mb(), _open_fds()))
    print(f'run {run + 1}: rss={samples[-1][0]:.0f} MB fds={samples[-1][1]}')
  config = metadata.sqlite_metadata_connection_config(
      result['metadata_path'])
  with metadata.Metadata(config) as m:
    assert len(m.store.get_artifacts_by_type('Model')) == RUNS
    assert len(m.store.get_artifacts_by_type('PushedModel')) == RUNS
  (rss_warm, fds_warm), (rss_end, fds_end) = samples[WARM_UP - 1], samples[-1]
  assert rss_end - rss_warm < MAX_RSS_GROWTH_MB, samples
  assert fds_end - fds_warm <= MAX_FD_GROWTH, samples
