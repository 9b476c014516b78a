"""The benchmark runs end to end on tiny data (no timing is asserted)."""

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import REPO

VARIANTS = {'tfx_trainer', 'generic_trainer', 'train_spec', 'train_spec_jax',
            'compute_bound'}


@pytest.mark.slow
def test_benchmark_runs_every_comparison(tmp_path):
  """One run on tiny data writes every ratio, target and peak memory."""
  out = tmp_path / 'results'
  subprocess.run(
      [sys.executable, '-m', 'benchmarks.run', '--rows', '2000',
       '--eval-rows', '600', '--repeats', '1', '--epochs', '2',
       '--data-dir', str(tmp_path / 'data'), '--out', str(out)],
      cwd=REPO, check=True, timeout=900)
  with open(out / 'results.json') as f:
    report = json.load(f)
  assert set(report['targets']) == {
      'a_generic_over_tfx_execution_time',
      'b_train_spec_over_tutorial_throughput',
      'b_over_c_train_spec_over_compute_bound',
      'd_cli_first_step_over_tensorflow_import'}
  # JAX against TensorFlow is measured, with no target.
  assert set(report['ratios']) == set(report['targets']) | {
      'f_train_spec_jax_over_tensorflow_throughput'}
  for value in report['ratios'].values():
    assert math.isfinite(value) and value > 0
  assert set(report['peak_rss_mb']) == VARIANTS | {'tensorflow_import',
                                                   'cli_first_step'}
  assert all(v > 50 for v in report['peak_rss_mb'].values())
  runs = report['runs']
  assert runs['train_spec']['records'][0]['train_examples'] == 2 * 2000
  assert runs['train_spec_jax']['records'][0]['train_examples'] == 2 * 2000
  assert runs['tfx_trainer']['records'][0]['train_examples'] == (
      2000 // 256) * 256
  # The bound trains full batches only, the same steps every epoch.
  assert runs['compute_bound']['records'][0]['train_examples'] == (
      2 * (2000 // 256) * 256)
  assert set(report['cpu_steal']) == VARIANTS
  assert all(0.0 <= v <= 1.0 for v in report['cpu_steal'].values())
  assert report['machine']['device'].startswith(('CPU: ', 'GPU: '))
  table = (out / 'results.md').read_text()
  assert '| Comparison | Medians | Ratio | Target | Met |' in table
  assert table.count('\n| (') == 5
  assert os.path.isdir(out / 'work')
