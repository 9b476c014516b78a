"""The benchmark runs end to end on tiny data (no timing is asserted)."""

import json
import math
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

MAIN = {'tfx_trainer', 'generic_trainer', 'train_spec', 'compute_bound',
        'train_spec_stream', 'train_spec_disk', 'train_spec_jax'}
GROWTH = {'tfx_trainer', 'train_spec', 'train_spec_stream', 'train_spec_disk'}
WIDE = {'tfx_trainer', 'train_spec', 'compute_bound', 'train_spec_stream'}
TARGETS = {
    'a_generic_over_tfx_execution_time',
    'b_train_spec_over_tutorial_throughput',
    'b_over_c_train_spec_over_compute_bound',
    'b_over_c_min_over_quiet_rounds',
    'd_cli_first_step_over_tensorflow_import',
    'f_stream_over_compute_bound', 'f_stream_over_tutorial_throughput',
    'g_train_spec_throughput_growth', 'g_stream_throughput_growth',
    'g_tutorial_throughput_growth', 'g_stream_peak_memory_growth',
    'g_disk_throughput_growth'}
REPORTED = {
    'g_tutorial_peak_memory_growth', 'g_disk_peak_memory_growth',
    'f_disk_over_compute_bound', 'f_disk_over_stream_throughput',
    'g_train_spec_memory_growth_over_parsed_rows',
    'h_train_spec_over_tutorial_throughput',
    'h_stream_over_tutorial_throughput', 'h_train_spec_over_compute_bound',
    'h_stream_over_compute_bound',
    'i_train_spec_jax_over_tensorflow_throughput',
    'd_warm_cli_first_step_over_tensorflow_import'}


@pytest.mark.slow
def test_benchmark_runs_every_comparison(tmp_path):
  """One run on tiny data writes every ratio, target and peak memory; each
  data set's variants of the round share a process, to keep it short."""
  out = tmp_path / 'results'
  subprocess.run(
      [sys.executable, '-m', 'benchmarks.run', '--rows', '2000',
       '--growth-rows', '3000', '--wide-rows', '600', '--wide-features', '10',
       '--eval-rows', '600', '--repeats', '1', '--growth-repeats', '1',
       '--wide-repeats', '1', '--epochs', '2', '--one-process',
       '--data-dir', str(tmp_path / 'data'), '--out', str(out)],
      cwd=REPO, check=True, timeout=900)
  with open(out / 'results.json') as f:
    report = json.load(f)
  assert set(report['targets']) == TARGETS
  assert set(report['ratios']) == TARGETS | REPORTED
  for name, value in report['ratios'].items():
    if name != 'b_over_c_min_over_quiet_rounds' or value is not None:
      assert math.isfinite(value), name
    if not name.endswith('over_parsed_rows'):
      assert value is None or value > 0, name
  peaks = report['peak_rss_mb']
  assert {n: set(p) for n, p in peaks.items()} == {
      'main': MAIN, 'growth': GROWTH, 'wide': WIDE,
      'first_step': {'tensorflow_import', 'cli_first_step',
                     'tensorflow_import_warm', 'cli_first_step_warm'}}
  assert all(v > 50 for p in peaks.values() for v in p.values())
  runs = report['runs']
  main = {v: runs['main'][v]['records'][0] for v in MAIN}
  assert main['train_spec']['train_examples'] == 2 * 2000
  assert main['train_spec_stream']['train_examples'] == 2 * 2000
  assert main['train_spec_jax']['train_examples'] == 2 * 2000
  assert main['tfx_trainer']['train_examples'] == (2000 // 256) * 256
  # The bound trains full batches only, the same steps every epoch.
  assert main['compute_bound']['train_examples'] == 2 * (2000 // 256) * 256
  assert runs['growth']['train_spec']['records'][0]['train_examples'] == (
      2 * 3000)
  # The TrainSpec logs its cache decisions, with their reasons.
  # The row count is an estimate from the start of the first file.
  line = main['train_spec']['cache'][0]
  estimate = re.match(r'cache: in memory for Split-train \(1\d\d kB of '
                      r'parsed rows \(~(\d),(\d{3}) rows\) fit in ', line)
  assert estimate, line
  assert 1900 <= int(''.join(estimate.groups())) <= 2100, line
  assert main['train_spec_stream']['cache'][0] == (
      'cache: off for Split-train (TrainSpec.cache=False); every epoch reads '
      'and parses the files')
  assert main['train_spec_disk']['cache'][0].startswith(
      'cache: on disk for Split-train, in ')
  assert main['train_spec_disk']['train_examples'] == 2 * 2000
  for data_set in ('main', 'growth', 'wide'):
    for run in runs[data_set].values():
      record = run['records'][0]
      assert 0.0 <= record['cpu_steal'] <= 1.0
      assert 0.0 <= record['cpu_others'] <= os.cpu_count()
  assert report['rounds']['f_stream_over_compute_bound'][0]['round'] == 1
  # (d): each side once per start, timed to its own line; the yardstick's
  # exit (TensorFlow's teardown) kept apart. The page cache is dropped
  # only by root; the table says which.
  first = runs['first_step']
  for start in ('', '_warm'):
    (imported,) = first['tensorflow_import' + start]['records']
    (cli,) = first['cli_first_step' + start]['records']
    assert 0 < imported['wall_s'] < imported['exit_s']
    assert cli['first_step_s'] > 0
    # When each of its lines came, the first step's the last.
    assert cli['lines'][-1][0] == pytest.approx(cli['first_step_s'], abs=0.01)
    assert cli['lines'][-1][1].startswith('first training step after')
    assert [t for t, _ in cli['lines']] == sorted(t for t, _ in cli['lines'])
  may_drop = os.access('/proc/sys/vm/drop_caches', os.W_OK)
  assert first['cli_first_step']['page_cache_dropped'] == may_drop
  assert ('the page cache dropped before each process' in
          (out / 'results.md').read_text()) == may_drop
  assert report['machine']['device'].startswith(('CPU: ', 'GPU: '))
  table = (out / 'results.md').read_text()
  assert '| Comparison | Medians | Ratio | Target | Met |' in table
  assert table.count('\n| (') == len(TARGETS | REPORTED)
  assert os.path.isdir(out / 'work')


@pytest.mark.slow
def test_continuous_training_benchmark_runs(tmp_path):
  """(j) on tiny spans, two executions of a window of two, in one process:
  the second reads the span both windows share back, and every number the
  targets read is there."""
  out = tmp_path / 'j.json'
  subprocess.run(
      [sys.executable, '-m', 'benchmarks.continuous', '--span-rows', '600',
       '--executions', '2', '--window', '2', '--one-process',
       '--data-dir', str(tmp_path / 'data'), '--work', str(tmp_path / 'work'),
       '--out', str(out)], cwd=REPO, check=True, timeout=600)
  report = json.loads(out.read_text())
  first, second = report['executions']
  assert (first['hits'], first['misses']) == (0, 8)
  assert (second['hits'], second['misses']) == (4, 4)
  for record in [report['today'], first, second]:
    for name in ('execution_s', 'input_cpu_s', 'check_cpu_s', 'rows_cpu_s',
                 'datasets_cpu_s',
                 'throughput_vs_c', 'peak_rss_mb'):
      assert math.isfinite(record[name]) and record[name] > 0, name
  assert second['cache_bytes'] > 0
  assert math.isfinite(report['first_vs_today'])
  assert [len(r) for r in report['first_repeats'].values()] == [2, 2]
  assert math.isfinite(second['input_cpu_vs_first'])


@pytest.mark.slow
def test_first_read_benchmark_runs(tmp_path):
  """The breakdown of a first read, on 4,000 rows: every part is measured,
  and the kept rows take their parsed size (56 bytes a row)."""
  out = tmp_path / 'first.json'
  subprocess.run(
      [sys.executable, '-m', 'benchmarks.first_read', '--rows', '4000',
       '--data-dir', str(tmp_path / 'data'), '--out', str(out)], cwd=REPO,
      check=True, timeout=600)
  report = json.loads(out.read_text())
  for name in ('inflate', 'framing_crc', 'gzip_read', 'parse_example',
               'read_back'):
    value = report[f'{name}_per_1m_rows_s']
    assert math.isfinite(value) and value > 0, name
  assert report['kept_bytes'] == 4000 * 56
  assert math.isfinite(report['read_back_one_more_file_s_per_1m_rows'])


def test_first_word_benchmark_runs(tmp_path):
  """The seconds to the command's first word, measured once: the header
  mistake's one error names all three mistakes, exits 1, and a clean run's
  first line says TensorFlow is loading."""
  out = tmp_path / 'first-word.json'
  subprocess.run([sys.executable, '-m', 'benchmarks.first_word', '--repeats',
                  '1', '--out', str(out)], cwd=REPO, check=True, timeout=300,
                 capture_output=True)
  report = json.loads(out.read_text())
  assert report['mistake_status'] == 1
  assert report['mistake_message'].startswith(
      'generic-trainer: InputArtifactError: 3 mistakes in the CSV data')
  assert report['loading_line'].startswith('Loading TensorFlow')
  for name in ('mistake_first_line_s', 'mistake_error_s',
               'loading_first_line_s'):
    assert math.isfinite(report[name]) and report[name] > 0, name


def test_profile_splits_the_host_cpu(tmp_path):
  """The profile of a TrainSpec's host CPU, on 4,096 rows: every stage is
  measured, and the ratios that say where the time goes are finite."""
  out = tmp_path / 'profile.json'
  subprocess.run([sys.executable, '-m', 'benchmarks.profile', '--rows',
                  '4096', '--epochs', '2', '--repeats', '2', '--data-dir',
                  str(tmp_path / 'data'), '--json', str(out)], cwd=REPO,
                 check=True, timeout=300, capture_output=True)
  report = json.loads(out.read_text())
  stages = {s['stage']: s for s in report['stages']}
  assert list(stages) == ['read', 'tf_parse', 'parse', 'batch', 'bound_input',
                          'keras_step', 'train_spec', 'train_spec_stream']
  for name, stage in stages.items():
    assert stage['cpu_s'] > 0 and stage['wall_s'] > 0, name
  assert stages['train_spec']['batches'] == 4096 // 256
  for name in ('keras_step', 'train_spec', 'train_spec_stream'):
    assert stages[name]['first_epoch_wall_s'] > 0, name
    assert stages[name]['first_epoch_cpu_s'] > 0, name
  assert len(report['ratios']) == 10
  assert [len(s['rounds']) for s in report['stages']] == [2] * 8
  assert len(report['ratios_per_round']) == 2
  assert all(math.isfinite(v) for v in report['ratios'].values())
  # On 4,096 rows the first epoch's floor is noise.
  assert all(v > 0 for k, v in report['ratios'].items()
             if 'first epoch' not in k)


def test_handler_cost_times_each_handler(tmp_path):
  """The cost of each built-in handler at batch ends, on 4,096 rows, with
  Keras's own TensorBoard beside ours: each is timed at every execution's
  end (no time is asserted)."""
  out = tmp_path / 'handlers.json'
  subprocess.run([sys.executable, '-m', 'benchmarks.handler_cost', '--rows',
                  '4096', '--epochs', '2', '--data-dir',
                  str(tmp_path / 'data'), '--json', str(out)], cwd=REPO,
                 check=True, timeout=300, capture_output=True)
  report = json.loads(out.read_text())
  handlers = report['handlers']
  assert {'NaNGuard', 'LogLines', 'EpochTensorBoard', 'TensorBoard',
          'PreemptionStop'} <= set(handlers)
  executions = report['steps'] // report['steps_per_execution']
  assert all(h['calls'] == executions for h in handlers.values())
  assert all(h['mean_us'] > 0 and 0 <= h['share_of_fit'] < 1
             for h in handlers.values())
  # Every hook too: the resume checkpoint after each epoch, in the sum.
  assert handlers['ResumeCheckpoint']['every_hook_ms']['on_epoch_end'] > 0
  assert all(h['every_hook_share_of_fit'] >= h['share_of_fit']
             for h in handlers.values())
  assert 0 < report['built_ins_share_of_fit'] < 1


def test_gc_passes_lists_the_commands_full_collections(tmp_path):
  """The command of (d) on 4,096 rows, each of its full collections
  recorded with its time and the objects it scanned; the first step is
  marked, and the objects the command froze are counted apart (no time is
  asserted)."""
  out = tmp_path / 'passes.json'
  subprocess.run([sys.executable, '-m', 'benchmarks.gc_passes', '--rows',
                  '4096', '--data-dir', str(tmp_path / 'data'), '--json',
                  str(out)], cwd=REPO, check=True, timeout=300,
                 capture_output=True)
  report = json.loads(out.read_text())
  assert report['first_step_s'] > 0
  passes = report['collections']
  assert all(p['took_s'] >= 0 and p['tracked'] > 0 for p in passes)
  # The command imports its training with the collector paused, then
  # freezes: no pass before the first step scans the imports' objects.
  assert all(p['frozen'] > 100_000 for p in passes
             if p['before_first_step']), passes


def test_worker_entry_benchmark_runs(tmp_path):
  """What entering the private network adds to a worker's start, measured
  once: both starts timed, and the program ran through the entry."""
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  if private_network.available():
    pytest.skip(f'no private network here: {private_network.available()}')
  out = tmp_path / 'worker-entry.json'
  subprocess.run([sys.executable, '-m', 'benchmarks.worker_entry',
                  '--repeats', '1', '--out', str(out)], cwd=REPO, check=True,
                 timeout=300, capture_output=True)
  report = json.loads(out.read_text())
  for name in ('plain_start_s', 'entered_start_s'):
    assert math.isfinite(report[name]) and report[name] > 0, name
