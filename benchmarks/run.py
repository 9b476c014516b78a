"""Runs every comparison of the benchmark in one go; writes JSON and Markdown.

    python -m benchmarks.run                    # the full run (~75 min here)
    python -m benchmarks.run --only a,b,c,d,f   # 1M rows only (~22 min)
    python -m benchmarks.run --rows 2000 --growth-rows 4000 --wide-rows 1000 \\
        --wide-features 10 --repeats 1 --one-process   # a smoke run

Three synthetic data sets (`synthetic_data`): 'main', `--rows` (1M) rows
of the narrow table (12 floats); 'growth', `--growth-rows` (10M) rows of
it; 'wide', `--wide-rows` (200k) rows of the wide table (200 features:
floats, int and string categoricals). The comparisons (`--only` picks
some; all by default):
  (a) trainer execution time: GenericTrainer / tfx.components.Trainer, the
      same tutorial-style run_fn, data and steps (target <= 1.0);
  (b) training throughput: TrainSpec / tutorial run_fn (target >= 2.0);
  (c) the compute-only bound: the TrainSpec's model on rows already in
      memory; TrainSpec / bound (target >= 0.85, in the medians and in
      every round with under 5% CPU steal);
  (d) the command's time to its first training step / TensorFlow's own
      import, each in a fresh process, from a cold page cache (target
      <= 1.2) and a warm one (reported; `benchmarks.first_step`);
  (e) the peak memory (max RSS) of each variant's process (always);
  (f) streaming: the TrainSpec with cache=False, which reads and parses the
      gzip files every epoch, / the bound (target >= 0.65) and / the
      tutorial run_fn (target >= 3.0);
  (g) growth: throughput at `--growth-rows` / at `--rows` of the TrainSpec
      cached and uncached and of the tutorial run_fn (target >= 0.9 each);
      the uncached TrainSpec's peak memory, the same (target <= 1.1); the
      cached one's memory growth over its parsed rows' growth (reported);
  (h) the wide table: the TrainSpec cached and uncached against the
      tutorial run_fn and the bound (reported, no targets);
  (i) JAX: the TrainSpec's throughput on Keras's JAX backend / on
      TensorFlow, the same spec, data and epochs (reported, no target:
      which is faster, and why, is in benchmarks/README.md).
Each variant runs in a process of its own, once per round; a round runs
every data set's variants, the two of a ratio one after the other and in
turns first, so that a slow spell of a shared machine hits both sides of a
ratio alike. Medians are reported, and ratios of medians from this one run,
since absolute times drift on shared machines; with them, per round, the
CPU steal and the other processes' CPU while each variant ran. Nothing is
asserted: the targets are reported.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from benchmarks import first_step
from benchmarks import synthetic_data
from benchmarks.model import BATCH_SIZE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPARISONS = 'abcdfghi'
# The variants each comparison needs, per data set, in the order of a round
# (the next round runs them in reverse).
ORDER = ['tfx_trainer', 'generic_trainer', 'train_spec', 'compute_bound',
         'train_spec_stream', 'train_spec_disk', 'train_spec_jax']
NEEDS = {
    'a': {'main': ['tfx_trainer', 'generic_trainer']},
    'b': {'main': ['train_spec', 'tfx_trainer']},
    'c': {'main': ['train_spec', 'compute_bound']},
    'f': {'main': ['train_spec_stream', 'train_spec_disk', 'compute_bound',
                   'tfx_trainer']},
    'g': {'main': ['train_spec', 'train_spec_stream', 'train_spec_disk',
                   'tfx_trainer'],
          'growth': ['train_spec', 'train_spec_stream', 'train_spec_disk',
                     'tfx_trainer']},
    'h': {'wide': ['tfx_trainer', 'train_spec', 'compute_bound',
                   'train_spec_stream']},
    'i': {'main': ['train_spec', 'train_spec_jax']},
}
# (letter, ratio, data set, numerator, denominator, measure, op, target);
# each is also read round by round. `growth` ratios set the growth data
# set's median over the main one's; op None: reported, no target.
RATIOS = [
    ('a', 'a_generic_over_tfx_execution_time', 'main', 'generic_trainer',
     'tfx_trainer', 'execution_s', '<=', 1.0),
    ('b', 'b_train_spec_over_tutorial_throughput', 'main', 'train_spec',
     'tfx_trainer', 'examples_per_s', '>=', 2.0),
    ('c', 'b_over_c_train_spec_over_compute_bound', 'main', 'train_spec',
     'compute_bound', 'examples_per_s', '>=', 0.85),
    ('f', 'f_stream_over_compute_bound', 'main', 'train_spec_stream',
     'compute_bound', 'examples_per_s', '>=', 0.65),
    ('f', 'f_stream_over_tutorial_throughput', 'main', 'train_spec_stream',
     'tfx_trainer', 'examples_per_s', '>=', 3.0),
    ('f', 'f_disk_over_compute_bound', 'main', 'train_spec_disk',
     'compute_bound', 'examples_per_s', None, None),
    ('f', 'f_disk_over_stream_throughput', 'main', 'train_spec_disk',
     'train_spec_stream', 'examples_per_s', None, None),
    ('g', 'g_train_spec_throughput_growth', 'growth', 'train_spec',
     'train_spec', 'examples_per_s', '>=', 0.9),
    ('g', 'g_stream_throughput_growth', 'growth', 'train_spec_stream',
     'train_spec_stream', 'examples_per_s', '>=', 0.9),
    ('g', 'g_disk_throughput_growth', 'growth', 'train_spec_disk',
     'train_spec_disk', 'examples_per_s', '>=', 0.9),
    ('g', 'g_tutorial_throughput_growth', 'growth', 'tfx_trainer',
     'tfx_trainer', 'examples_per_s', '>=', 0.9),
    ('h', 'h_train_spec_over_tutorial_throughput', 'wide', 'train_spec',
     'tfx_trainer', 'examples_per_s', None, None),
    ('h', 'h_stream_over_tutorial_throughput', 'wide', 'train_spec_stream',
     'tfx_trainer', 'examples_per_s', None, None),
    ('h', 'h_train_spec_over_compute_bound', 'wide', 'train_spec',
     'compute_bound', 'examples_per_s', None, None),
    ('h', 'h_stream_over_compute_bound', 'wide', 'train_spec_stream',
     'compute_bound', 'examples_per_s', None, None),
    ('i', 'i_train_spec_jax_over_tensorflow_throughput', 'main',
     'train_spec_jax', 'train_spec', 'examples_per_s', None, None),
]
QUIET_STEAL = 0.05  # Rounds under this CPU steal are read one by one.


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog='\n'.join(__doc__.splitlines()[6:]))
  parser.add_argument('--rows', type=int, default=1_000_000,
                      help='train rows of the main data set (default 1M)')
  parser.add_argument('--growth-rows', type=int, default=10_000_000,
                      help='train rows of the growth data set (default 10M)')
  parser.add_argument('--wide-rows', type=int, default=200_000,
                      help='train rows of the wide table (default 200k)')
  parser.add_argument('--wide-features', type=int, default=200,
                      help='features of the wide table (default 200)')
  parser.add_argument('--eval-rows', type=int, default=10_000)
  parser.add_argument('--repeats', type=int, default=5,
                      help='rounds of the main data set, and of (d)')
  parser.add_argument('--growth-repeats', type=int, default=3)
  parser.add_argument('--wide-repeats', type=int, default=3)
  parser.add_argument('--epochs', type=int, default=5,
                      help='epochs of the TrainSpec and the bound')
  parser.add_argument('--steps', type=int, default=None,
                      help='steps of the run_fn variants (default: one pass '
                      'over the train rows)')
  parser.add_argument('--only', default=COMPARISONS,
                      help='the comparisons to run, e.g. "a,b,c,d,f" or "g" '
                      '(default: all)')
  parser.add_argument('--one-process', action='store_true',
                      help="a data set's variants of a round in one process "
                      '(smoke runs: less start-up; peak memory is shared)')
  parser.add_argument('--data-dir', default=synthetic_data.DATA_DIR)
  parser.add_argument('--out', default=os.path.join(ROOT, 'benchmarks',
                                                    'results'))
  args = parser.parse_args(argv)
  only = sorted(set(args.only) - {',', ' ', 'e'})
  unknown = [c for c in only if c not in COMPARISONS]
  if unknown or not only:
    parser.error(f'--only takes letters of {COMPARISONS}. Received: '
                 f'--only={args.only}.')
  os.makedirs(args.out, exist_ok=True)
  work = os.path.join(args.out, 'work')
  os.makedirs(work, exist_ok=True)

  started = time.monotonic()
  sets = _data_sets(args, only)
  for name, data in sets.items():
    print(f'data {name}: {data["root"]} ({time.monotonic() - started:.0f}s)',
          flush=True)
  runs = {name: {v: {'records': [], 'peak_rss_mb': 0.0}
                 for v in data['variants']} for name, data in sets.items()}
  durations = {name: 0.0 for name in sets}
  for repeat in range(max([d['repeats'] for d in sets.values()] + [0])):
    for name, data in sets.items():
      if repeat < data['repeats']:
        durations[name] += _round(args, name, data, repeat, runs[name], work)
  if 'd' in only:
    first_started = time.monotonic()
    runs['first_step'] = first_step.measure(sets['main'], work, args.repeats,
                                            _cpu_ticks, _contention)
    durations['first_step'] = time.monotonic() - first_started

  report = _report(args, list(sys.argv[1:] if argv is None else argv), only,
                   sets, runs, durations)
  with open(os.path.join(args.out, 'results.json'), 'w') as f:
    json.dump(report, f, indent=1)
  table = markdown(report)
  with open(os.path.join(args.out, 'results.md'), 'w') as f:
    f.write(table)
  print(table)
  print(f'Written to {args.out}/results.json and results.md '
        f'({time.monotonic() - started:.0f}s).')
  return 0


def _data_sets(args, only):
  """{name: data set}: the paths, rows, steps, rounds and variants of each
  data set the comparisons `only` need, written if not there yet."""
  specs = {'main': (args.rows, 'narrow', args.repeats, 'rows'),
           'growth': (args.growth_rows, 'narrow', args.growth_repeats,
                      'rows'),
           'wide': (args.wide_rows, f'wide-{args.wide_features}',
                    args.wide_repeats, f'wide-{args.wide_features}-rows')}
  wanted = {}
  for letter in only:
    for name, variants in NEEDS.get(letter, {}).items():
      wanted.setdefault(name, set()).update(variants)
  if 'd' in only:
    wanted.setdefault('main', set())
  sets = {}
  for name, (rows, table, repeats, prefix) in specs.items():
    if name not in wanted:
      continue
    data = synthetic_data.write(
        os.path.join(args.data_dir, f'{prefix}-{rows}-{args.eval_rows}'),
        rows, args.eval_rows, table=table)
    sets[name] = dict(
        data, rows=rows, table=table, repeats=repeats if wanted[name] else 0,
        variants=[v for v in ORDER if v in wanted[name]],
        steps=args.steps or max(1, rows // BATCH_SIZE),
        eval_steps=max(1, args.eval_rows // BATCH_SIZE))
  return sets


def _round(args, name, data, repeat, runs, work):
  """Runs round `repeat` of data set `name`; adds to `runs`. Seconds."""
  started = time.monotonic()
  order = data['variants'] if repeat % 2 == 0 else data['variants'][::-1]
  groups = [order] if args.one_process else [[v] for v in order]
  for group in groups:
    label = f'{name}-{"+".join(group)}-{repeat}'
    result = os.path.join(work, f'{label}.json')
    before = _cpu_ticks()
    seconds, cpu_s = _run_child(
        [sys.executable, '-m', 'benchmarks.variants', *group,
         '--data', data['root'], '--work', os.path.join(work, name),
         '--result', result, '--repeats', '1', '--steps', str(data['steps']),
         '--eval-steps', str(data['eval_steps']), '--epochs',
         str(args.epochs)], os.path.join(work, f'{label}.log'))
    steal, others = _contention(before, _cpu_ticks(), cpu_s)
    with open(result) as f:
      child = json.load(f)
    for variant in group:
      run = runs[variant]
      run['device'] = child['device']
      records = child['results'][variant]
      run['records'] += [dict(r, round=repeat + 1, cpu_steal=steal,
                              cpu_others=others) for r in records]
      # Its own VmHWM (`peak_memory`): the wait's ru_maxrss would be at
      # least this process's peak, folded into the child's at exec.
      peak = max(r['process_peak_rss_mb'] for r in records)
      run['peak_rss_mb'] = max(run['peak_rss_mb'], peak)
      print(f'round {repeat + 1}, {name}, {variant}: {seconds:.0f}s, peak '
            f'{peak:.0f} MB, CPU steal {steal:.0%}, others {others:.2f} '
            f'cores, {records[0]}', flush=True)
  return time.monotonic() - started


def _run_child(command, log_path, env=None):
  """Runs `command` to its end; returns (seconds, CPU seconds)."""
  started = time.monotonic()
  with open(log_path, 'w') as log:
    process = subprocess.Popen(command, cwd=ROOT, stdout=log,
                               stderr=subprocess.STDOUT, env=env)
    _, status, usage = os.wait4(process.pid, 0)
  process.returncode = os.waitstatus_to_exitcode(status)
  if process.returncode:
    raise RuntimeError(f'{" ".join(command)} failed with exit code '
                       f'{process.returncode}; see {log_path}.')
  return time.monotonic() - started, usage.ru_utime + usage.ru_stime


def _cpu_ticks():
  """(steal, busy, total) CPU ticks of the machine so far (/proc/stat), or
  None. Busy counts user, nice, system, irq and softirq time."""
  try:
    with open('/proc/stat') as f:
      ticks = [int(t) for t in f.readline().split()[1:9]]
  except (OSError, ValueError):
    return None
  ticks += [0] * (8 - len(ticks))
  user, nice, system, _, _, irq, softirq, steal = ticks
  return steal, user + nice + system + irq + softirq, sum(ticks)


def _contention(before, after, own_cpu_s):
  """(steal, others) while a child ran: the share of the machine's CPU time
  a hypervisor gave other guests, and the cores' worth of CPU that other
  processes of this machine used (what slowed the child without being its
  fault)."""
  if before is None or after is None or after[2] == before[2]:
    return 0.0, 0.0
  total = after[2] - before[2]
  hertz = os.sysconf('SC_CLK_TCK')
  busy_s = (after[1] - before[1]) / hertz
  cores = os.cpu_count() or 1
  others = max(0.0, busy_s - own_cpu_s) / (total / hertz / cores)
  return (after[0] - before[0]) / total, others


def _median(records, key):
  return statistics.median(r[key] for r in records)


def _ratio_rows(runs):
  """[(letter, name, value, op, target, per-round readings)] of the ratios
  whose variants ran."""
  rows = []
  for letter, name, data_set, top, bottom, key, op, target in RATIOS:
    below = 'main' if data_set == 'growth' else data_set
    try:
      a, b = runs[data_set][top]['records'], runs[below][bottom]['records']
    except KeyError:
      continue
    rounds = [{'round': x['round'], 'ratio': x[key] / y[key],
               'cpu_steal': max(x['cpu_steal'], y['cpu_steal']),
               'cpu_others': max(x['cpu_others'], y['cpu_others'])}
              for x in a for y in b if x['round'] == y['round']]
    rows.append((letter, name, _median(a, key) / _median(b, key), op, target,
                 rounds))
  if 'first_step' in runs:
    first = runs['first_step']
    for suffix, name, op, target in (
        ('', 'd_cli_first_step_over_tensorflow_import', '<=', 1.2),
        ('_warm', 'd_warm_cli_first_step_over_tensorflow_import', None,
         None)):
      cli = first['cli_first_step' + suffix]['records']
      tf = first['tensorflow_import' + suffix]['records']
      rows.append(('d', name, _median(cli, 'first_step_s') /
                   _median(tf, 'wall_s'), op, target, [
                       {'round': x['round'],
                        'ratio': x['first_step_s'] / y['wall_s'],
                        'cpu_steal': max(x['cpu_steal'], y['cpu_steal']),
                        'cpu_others': max(x['cpu_others'], y['cpu_others'])}
                       for x, y in zip(cli, tf)]))
  return rows


def _report(args, argv, only, sets, runs, durations):
  rows = _ratio_rows(runs)
  ratios = {name: value for _, name, value, _, _, _ in rows}
  targets = {}
  for _, name, value, op, target, _ in rows:
    if op:
      targets[name] = {'op': op, 'value': target,
                       'met': value <= target if op == '<=' else
                              value >= target}
  rounds = {name: readings for _, name, _, _, _, readings in rows}
  quiet = [r['ratio'] for r in rounds.get(
      'b_over_c_train_spec_over_compute_bound', [])
           if r['cpu_steal'] < QUIET_STEAL]
  if 'b_over_c_train_spec_over_compute_bound' in ratios:
    name = 'b_over_c_min_over_quiet_rounds'
    ratios[name] = min(quiet) if quiet else None
    targets[name] = {'op': '>=', 'value': 0.85,
                     'met': bool(quiet) and min(quiet) >= 0.85}
  medians = {}
  for data_set, variants in runs.items():
    for variant, run in variants.items():
      keys = [k for k in ('execution_s', 'fit_s', 'examples_per_s', 'wall_s',
                          'first_step_s', 'cpu_steal', 'cpu_others')
              if k in run['records'][0]]
      medians.setdefault(data_set, {})[variant] = {
          k: _median(run['records'], k) for k in keys}
  growth = {}
  if 'growth' in runs:
    # The cached TrainSpec's memory grows with its parsed rows: by how much
    # more than they grow.
    row_bytes = synthetic_data.parsed_row_bytes('narrow')
    parsed_mb = (sets['growth']['rows'] - sets['main']['rows']) * (
        row_bytes) / 2**20
    for variant in runs['growth']:
      growth[variant] = {
          'peak_rss_mb_at_rows': runs['main'][variant]['peak_rss_mb'],
          'peak_rss_mb_at_growth_rows': runs['growth'][variant]['peak_rss_mb'],
      }
    memory = {v: g['peak_rss_mb_at_growth_rows'] / g['peak_rss_mb_at_rows']
              for v, g in growth.items()}
    ratios['g_stream_peak_memory_growth'] = memory['train_spec_stream']
    targets['g_stream_peak_memory_growth'] = {
        'op': '<=', 'value': 1.1, 'met': memory['train_spec_stream'] <= 1.1}
    ratios['g_tutorial_peak_memory_growth'] = memory['tfx_trainer']
    if 'train_spec_disk' in memory:
      ratios['g_disk_peak_memory_growth'] = memory['train_spec_disk']
    cached = growth['train_spec']
    ratios['g_train_spec_memory_growth_over_parsed_rows'] = (
        cached['peak_rss_mb_at_growth_rows'] - cached['peak_rss_mb_at_rows']
    ) / parsed_mb
    growth['parsed_rows_growth_mb'] = parsed_mb
  return {
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'machine': {'device': next((r['device'] for v in runs.values()
                                  for r in v.values() if 'device' in r),
                                 None) or _device_name(),
                  'platform': platform.platform(),
                  'python': platform.python_version(),
                  'cores': os.cpu_count()},
      'command': ' '.join(['python -m benchmarks.run'] + argv),
      'settings': {'comparisons': ''.join(only),
                   'data_sets': {n: {'train_rows': d['rows'],
                                     'table': d['table'],
                                     'repeats': d['repeats'],
                                     'run_fn_steps': d['steps'],
                                     'variants': d['variants']}
                                 for n, d in sets.items()},
                   'eval_rows': args.eval_rows, 'repeats': args.repeats,
                   'epochs': args.epochs, 'batch_size': BATCH_SIZE,
                   'one_process': args.one_process},
      'durations_s': durations,
      'medians': medians,
      'peak_rss_mb': {n: {v: r['peak_rss_mb'] for v, r in variants.items()}
                      for n, variants in runs.items()},
      'growth': growth,
      'ratios': ratios,
      'targets': targets,
      'rounds': rounds,
      'runs': runs,
  }


def _device_name():
  from benchmarks.variants import device  # pylint: disable=g-import-not-at-top
  return device()


LABELS = {
    'a_generic_over_tfx_execution_time':
        '(a) execution time, GenericTrainer / TFX Trainer (same run_fn)',
    'b_train_spec_over_tutorial_throughput':
        '(b) throughput, TrainSpec / tutorial run_fn',
    'b_over_c_train_spec_over_compute_bound':
        '(b)/(c) TrainSpec / compute-only bound (rows in memory)',
    'b_over_c_min_over_quiet_rounds':
        '(b)/(c) its lowest round with under 5% steal',
    'd_cli_first_step_over_tensorflow_import':
        '(d) the command\'s time to first step / `import tensorflow`, cold '
        '(page cache dropped)',
    'd_warm_cli_first_step_over_tensorflow_import':
        '(d) the same, warm (files in memory)',
    'f_stream_over_compute_bound':
        '(f) TrainSpec uncached (cache=False) / compute-only bound',
    'f_stream_over_tutorial_throughput':
        '(f) TrainSpec uncached / tutorial run_fn',
    'f_disk_over_compute_bound':
        "(f) TrainSpec cached on disk (cache='disk') / compute-only bound",
    'f_disk_over_stream_throughput':
        '(f) TrainSpec cached on disk / uncached',
    'g_train_spec_throughput_growth':
        '(g) TrainSpec cached, throughput at {growth} / at {main}',
    'g_stream_throughput_growth':
        '(g) TrainSpec uncached, throughput at {growth} / at {main}',
    'g_disk_throughput_growth':
        '(g) TrainSpec cached on disk, throughput at {growth} / at {main}',
    'g_tutorial_throughput_growth':
        '(g) tutorial run_fn, throughput at {growth} / at {main}',
    'g_stream_peak_memory_growth':
        '(g) TrainSpec uncached, peak memory at {growth} / at {main}',
    'g_tutorial_peak_memory_growth':
        '(g) tutorial run_fn, peak memory at {growth} / at {main}',
    'g_disk_peak_memory_growth':
        '(g) TrainSpec cached on disk, peak memory at {growth} / at {main}',
    'g_train_spec_memory_growth_over_parsed_rows':
        '(g) TrainSpec cached, memory growth / parsed rows\' growth',
    'h_train_spec_over_tutorial_throughput':
        '(h) wide: TrainSpec cached / tutorial run_fn',
    'h_stream_over_tutorial_throughput':
        '(h) wide: TrainSpec uncached / tutorial run_fn',
    'h_train_spec_over_compute_bound':
        '(h) wide: TrainSpec cached / compute-only bound',
    'h_stream_over_compute_bound':
        '(h) wide: TrainSpec uncached / compute-only bound',
    'i_train_spec_jax_over_tensorflow_throughput':
        '(i) throughput, TrainSpec on JAX / on TensorFlow',
}


def _values(report, name):
  """The medians a ratio divides, as the table shows them."""
  med = report['medians']
  ex = lambda d, v: f"{med[d][v]['examples_per_s']:,.0f}"
  for _, ratio, data_set, top, bottom, key, _, _ in RATIOS:
    if ratio == name:
      below = 'main' if data_set == 'growth' else data_set
      if key == 'execution_s':
        return (f"{med[data_set][top][key]:.1f} s / "
                f"{med[below][bottom][key]:.1f} s")
      return f'{ex(data_set, top)} / {ex(below, bottom)} ex/s'
  if name.startswith('d_'):
    first, suffix = med['first_step'], '_warm' if 'warm' in name else ''
    return (f"{first['cli_first_step' + suffix]['first_step_s']:.2f} s / "
            f"{first['tensorflow_import' + suffix]['wall_s']:.2f} s")
  if name == 'b_over_c_min_over_quiet_rounds':
    quiet = [r for r in report['rounds'][
        'b_over_c_train_spec_over_compute_bound']
             if r['cpu_steal'] < QUIET_STEAL]
    return f'{len(quiet)} such rounds'
  growth = report['growth']
  variant = {'g_stream': 'train_spec_stream', 'g_tutori': 'tfx_trainer',
             'g_train_': 'train_spec', 'g_disk_p': 'train_spec_disk'}[name[:8]]
  at = growth[variant]
  values = (f"{at['peak_rss_mb_at_growth_rows']:.0f} / "
            f"{at['peak_rss_mb_at_rows']:.0f} MB")
  if name.endswith('over_parsed_rows'):
    return (f"{at['peak_rss_mb_at_growth_rows'] - at['peak_rss_mb_at_rows']:.0f}"
            f" / {growth['parsed_rows_growth_mb']:.0f} MB")
  return values


def _rows_label(rows):
  return f'{rows / 1e6:g}M' if rows >= 1e6 else f'{rows:,}'


def markdown(report) -> str:
  """The results as Markdown tables, with the machine and command."""
  ratios, targets = report['ratios'], report['targets']
  s = report['settings']
  sets = s['data_sets']
  names = {'main': _rows_label(sets['main']['train_rows'])
           if 'main' in sets else '',
           'growth': _rows_label(sets['growth']['train_rows'])
           if 'growth' in sets else ''}
  lines = [
      f"Machine: {report['machine']['device']}; Python "
      f"{report['machine']['python']}; {report['date']}.",
      f"Command: `{report['command']}`.",
      'Data: ' + '; '.join(
          f"{n} {d['train_rows']:,} train rows ({d['table']}), "
          f"{d['repeats']} rounds" for n, d in sets.items()) +
      f"; {s['eval_rows']:,} eval rows, batch {s['batch_size']}; run_fn one "
      f"pass over the train rows; TrainSpec and bound {s['epochs']} epochs. "
      'Medians.',
      '',
      '| Comparison | Medians | Ratio | Target | Met |',
      '|---|---|---|---|---|',
  ]
  for name in LABELS:
    if name not in ratios:
      continue
    t = targets.get(name)
    label = LABELS[name].format(growth=names['growth'], main=names['main'])
    value = 'n/a' if ratios[name] is None else f'{ratios[name]:.2f}'
    lines.append(
        f"| {label} | {_values(report, name)} | {value} | "
        f"{t['op'] + ' ' + str(t['value']) if t else 'reported'} | "
        f"{('yes' if t['met'] else 'no') if t else '-'} |")
  med = report['medians']
  if 'generic_trainer' in med.get('main', {}):
    lines += ['', 'Tutorial run_fn under GenericTrainer: '
              f"{med['main']['generic_trainer']['examples_per_s']:,.0f} ex/s "
              '(its tf_dataset_factory is `input_pipeline.DatasetFactory`).']
  cold = report['runs'].get('first_step', {}).get('cli_first_step')
  if cold:
    lines += ['', '(d) cold starts: ' + (
        'the page cache dropped before each process.'
        if cold['page_cache_dropped'] else
        'the page cache could not be dropped (it needs root): both sides '
        'started with the files as the machine had them in memory.')]
    warm = sorted(report['runs']['first_step']['cli_first_step_warm'][
        'records'], key=lambda r: r['first_step_s'])
    middle = warm[len(warm) // 2]
    lines += ['', f"(d) when the command's lines came, warm (round "
              f"{middle['round']}, the median's): " + '; '.join(
                  f'{seconds:.2f} s `{text.strip()}`'
                  for seconds, text in middle['lines']) + '.']
  lines += ['', '(e) Peak memory (max RSS of the process, MB): ' + '; '.join(
      f'{n}: ' + ', '.join(f'{v} {mb:.0f}' for v, mb in peaks.items())
      for n, peaks in report['peak_rss_mb'].items()) + '.']
  lines += ['', 'Contention (medians while a variant ran: CPU steal, the '
            "share of the machine's CPU time given to other guests; others, "
            'the cores other processes of this machine used): ' + '; '.join(
                f'{n}: ' + ', '.join(
                    f"{v} {m['cpu_steal']:.0%}/{m['cpu_others']:.1f}"
                    for v, m in variants.items())
                for n, variants in med.items()) + '.']
  lines += ['', 'Per round (ratio, steal, others\' cores):']
  for name, readings in report['rounds'].items():
    lines.append(f'- {name}: ' + ', '.join(
        f"{r['ratio']:.2f} ({r['cpu_steal']:.0%}, {r['cpu_others']:.1f})"
        for r in readings))
  lines += ['', 'Durations: ' + ', '.join(
      f'{n} {s_ / 60:.1f} min' for n, s_ in report['durations_s'].items()) +
            '.', '']
  return '\n'.join(lines)


if __name__ == '__main__':
  sys.exit(main())
