"""Runs every comparison of the benchmark in one go; writes JSON and Markdown.

    python -m benchmarks.run                    # the full run (~19 min here)
    python -m benchmarks.run --rows 2000 --repeats 1   # a smoke run

On the same synthetic data (`synthetic_data`, 1M train rows by default):
  (a) trainer execution time: GenericTrainer / tfx.components.Trainer, the
      same tutorial-style run_fn, data and steps (target <= 1.0);
  (b) training throughput: TrainSpec / tutorial run_fn (target >= 2.0);
  (c) the compute-only bound: the TrainSpec's model on rows already in
      memory; TrainSpec / bound (target >= 0.85);
  (d) the standalone command's time to first training step / the wall
      time of `python -c "import tensorflow"` (target <= 1.5);
  (e) the peak memory (max RSS) of each variant's process;
  (f) the TrainSpec's throughput on Keras's JAX backend / on TensorFlow,
      the same spec, data and epochs (no target: which is faster, and why,
      is in benchmarks/README.md).
Each variant runs in a process of its own, once per round, `--repeats`
rounds; the two variants of a ratio run one after the other, in turns
first. Medians are reported, and ratios of medians from this one run,
since absolute times drift on shared machines. Nothing is asserted: the
targets are reported.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

from benchmarks import synthetic_data
from benchmarks.model import BATCH_SIZE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = {
    'a_generic_over_tfx_execution_time': ('<=', 1.0),
    'b_train_spec_over_tutorial_throughput': ('>=', 2.0),
    'b_over_c_train_spec_over_compute_bound': ('>=', 0.85),
    'd_cli_first_step_over_tensorflow_import': ('<=', 1.5),
}
# The two variants of a ratio next to each other: (a) tfx_trainer and
# generic_trainer, (b)/(c) compute_bound and train_spec, (f) train_spec and
# train_spec_jax.
VARIANTS = ['tfx_trainer', 'generic_trainer', 'compute_bound', 'train_spec',
            'train_spec_jax']
FIRST_STEP = re.compile(r'first training step after ([0-9.]+) s')


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rows', type=int, default=1_000_000,
                      help='train rows of the synthetic data (default 1M)')
  parser.add_argument('--eval-rows', type=int, default=10_000)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--epochs', type=int, default=5,
                      help='epochs of the TrainSpec and the bound')
  parser.add_argument('--steps', type=int, default=None,
                      help='steps of the run_fn variants (default: one pass '
                      'over the train rows)')
  parser.add_argument('--data-dir', default=os.path.join(
      os.path.expanduser('~'), '.cache', 'tfx-generic-trainer', 'benchmark'))
  parser.add_argument('--out', default=os.path.join(ROOT, 'benchmarks',
                                                    'results'))
  args = parser.parse_args(argv)
  os.makedirs(args.out, exist_ok=True)
  work = os.path.join(args.out, 'work')
  steps = args.steps or max(1, args.rows // BATCH_SIZE)
  eval_steps = max(1, args.eval_rows // BATCH_SIZE)

  started = time.monotonic()
  data = synthetic_data.write(
      os.path.join(args.data_dir, f'rows-{args.rows}-{args.eval_rows}'),
      args.rows, args.eval_rows)
  print(f'data: {data["root"]} ({time.monotonic() - started:.0f}s)',
        flush=True)

  runs = {v: {'records': [], 'peak_rss_mb': 0.0} for v in VARIANTS}
  os.makedirs(work, exist_ok=True)
  for repeat in range(args.repeats):
    # Rounds, each variant once, the two of a ratio one after the other and
    # in turns first: a slow spell of a shared machine then hits both sides
    # of a ratio alike, not all repeats of one variant.
    order = VARIANTS if repeat % 2 == 0 else VARIANTS[::-1]
    for variant in order:
      result = os.path.join(work, f'{variant}-{repeat}.json')
      steal_before = _cpu_steal()
      peak_mb, seconds = _run_child(
          [sys.executable, '-m', 'benchmarks.variants', variant,
           '--data', data['root'], '--work', work, '--result', result,
           '--repeats', '1', '--steps', str(steps),
           '--eval-steps', str(eval_steps), '--epochs', str(args.epochs)],
          os.path.join(work, f'{variant}-{repeat}.log'))
      with open(result) as f:
        child = json.load(f)
      runs[variant]['device'] = child['device']
      steal = _steal_share(steal_before, _cpu_steal())
      runs[variant]['records'] += [dict(r, cpu_steal=steal)
                                   for r in child['records']]
      runs[variant]['peak_rss_mb'] = max(runs[variant]['peak_rss_mb'],
                                         peak_mb)
      print(f'round {repeat + 1}, {variant}: {seconds:.0f}s, peak '
            f'{peak_mb:.0f} MB, CPU steal {steal:.0%}, '
            f'{child["records"][0]}', flush=True)
  runs.update(_first_step(data, work, args.repeats))

  report = _report(args, list(sys.argv[1:] if argv is None else argv), runs,
                   steps, eval_steps)
  with open(os.path.join(args.out, 'results.json'), 'w') as f:
    json.dump(report, f, indent=1)
  table = markdown(report)
  with open(os.path.join(args.out, 'results.md'), 'w') as f:
    f.write(table)
  print(table)
  print(f'Written to {args.out}/results.json and results.md '
        f'({time.monotonic() - started:.0f}s).')
  return 0


def _run_child(command, log_path, env=None):
  """Runs `command` to its end; returns (peak RSS in MB, seconds)."""
  started = time.monotonic()
  with open(log_path, 'w') as log:
    process = subprocess.Popen(command, cwd=ROOT, stdout=log,
                               stderr=subprocess.STDOUT, env=env)
    _, status, usage = os.wait4(process.pid, 0)
  process.returncode = os.waitstatus_to_exitcode(status)
  if process.returncode:
    raise RuntimeError(f'{" ".join(command)} failed with exit code '
                       f'{process.returncode}; see {log_path}.')
  return usage.ru_maxrss / 1024, time.monotonic() - started


def _cpu_steal():
  """(steal, total) CPU ticks of the machine so far (/proc/stat), or None."""
  try:
    with open('/proc/stat') as f:
      ticks = [int(t) for t in f.readline().split()[1:]]
  except (OSError, ValueError):
    return None
  return ticks[7] if len(ticks) > 7 else 0, sum(ticks)


def _steal_share(before, after) -> float:
  """The share of CPU time a hypervisor gave other guests in between: on a
  shared VM, what slowed a run down without being its fault."""
  if before is None or after is None or after[1] == before[1]:
    return 0.0
  return (after[0] - before[0]) / (after[1] - before[1])


def _first_step(data, work, repeats):
  """(d): the command's time to its first step vs importing TensorFlow.

  Alternates the two, `repeats` times; wall time from start, as a user
  sees it. The command trains the TrainSpec module on the eval split.
  """
  from benchmarks.variants import SPEC_MODULE  # pylint: disable=g-import-not-at-top
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  imports, first_steps, peaks = [], [], {'import': 0.0, 'cli': 0.0}
  for repeat in range(repeats):
    peak, seconds = _run_child(
        [sys.executable, '-c', 'import tensorflow'],
        os.path.join(work, f'import-{repeat}.log'), env)
    imports.append(seconds)
    peaks['import'] = max(peaks['import'], peak)
    out_dir = os.path.join(work, f'cli-{repeat}')
    log_path = os.path.join(work, f'cli-{repeat}.log')
    command = [sys.executable, '-m', 'generic_trainer',
               '--module-file', SPEC_MODULE,
               '--train-data', os.path.join(data['eval'], '*'),
               '--eval-data', os.path.join(data['eval'], '*'),
               '--schema', data['schema'], '--output-dir', out_dir,
               '--steps', '32', '--progress', 'lines']
    started = time.monotonic()
    seen = None
    with open(log_path, 'w') as log:
      process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, env=env)
      for line in process.stdout:
        log.write(line)
        if seen is None and FIRST_STEP.search(line):
          seen = time.monotonic() - started
      _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) or seen is None:
      raise RuntimeError(f'{" ".join(command)} failed or printed no first '
                         f'step line; see {log_path}.')
    first_steps.append(seen)
    peaks['cli'] = max(peaks['cli'], usage.ru_maxrss / 1024)
  return {
      'tensorflow_import': {'records': [{'wall_s': s} for s in imports],
                            'peak_rss_mb': peaks['import']},
      'cli_first_step': {'records': [{'first_step_s': s}
                                     for s in first_steps],
                         'peak_rss_mb': peaks['cli']},
  }


def _median(runs, variant, key):
  return statistics.median(r[key] for r in runs[variant]['records'])


def _report(args, argv, runs, steps, eval_steps):
  m = lambda variant, key: _median(runs, variant, key)
  ratios = {
      'a_generic_over_tfx_execution_time':
          m('generic_trainer', 'execution_s') / m('tfx_trainer',
                                                  'execution_s'),
      'b_train_spec_over_tutorial_throughput':
          m('train_spec', 'examples_per_s') / m('tfx_trainer',
                                                'examples_per_s'),
      'b_over_c_train_spec_over_compute_bound':
          m('train_spec', 'examples_per_s') / m('compute_bound',
                                                'examples_per_s'),
      'd_cli_first_step_over_tensorflow_import':
          m('cli_first_step', 'first_step_s') / m('tensorflow_import',
                                                  'wall_s'),
      'f_train_spec_jax_over_tensorflow_throughput':
          m('train_spec_jax', 'examples_per_s') / m('train_spec',
                                                    'examples_per_s'),
  }
  return {
      'date': datetime.datetime.now().isoformat(timespec='seconds'),
      'machine': {'device': runs['train_spec']['device'],
                  'platform': platform.platform(),
                  'python': platform.python_version(),
                  'cores': os.cpu_count()},
      'command': ' '.join(['python -m benchmarks.run'] + argv),
      'settings': {'train_rows': args.rows, 'eval_rows': args.eval_rows,
                   'repeats': args.repeats, 'epochs': args.epochs,
                   'run_fn_steps': steps, 'eval_steps': eval_steps,
                   'batch_size': BATCH_SIZE},
      'medians': {
          'tfx_trainer_execution_s': m('tfx_trainer', 'execution_s'),
          'generic_trainer_execution_s': m('generic_trainer', 'execution_s'),
          'tutorial_run_fn_examples_per_s': m('tfx_trainer',
                                              'examples_per_s'),
          'tutorial_run_fn_under_generic_trainer_examples_per_s': m(
              'generic_trainer', 'examples_per_s'),
          'train_spec_examples_per_s': m('train_spec', 'examples_per_s'),
          'train_spec_jax_examples_per_s': m('train_spec_jax',
                                             'examples_per_s'),
          'train_spec_jax_execution_s': m('train_spec_jax', 'execution_s'),
          'train_spec_execution_s': m('train_spec', 'execution_s'),
          'compute_bound_examples_per_s': m('compute_bound',
                                            'examples_per_s'),
          'tensorflow_import_s': m('tensorflow_import', 'wall_s'),
          'cli_first_step_s': m('cli_first_step', 'first_step_s'),
      },
      'peak_rss_mb': {v: runs[v]['peak_rss_mb'] for v in runs},
      'cpu_steal': {v: m(v, 'cpu_steal') for v in VARIANTS},
      'ratios': ratios,
      'targets': {k: {'op': op, 'value': v,
                      'met': ratios[k] <= v if op == '<=' else
                             ratios[k] >= v}
                  for k, (op, v) in TARGETS.items()},
      'runs': runs,
  }


def markdown(report) -> str:
  """The results as a Markdown table, with the machine and command."""
  med, ratios, targets = report['medians'], report['ratios'], report['targets']
  peak = report['peak_rss_mb']
  rows = [
      ('(a) execution time, GenericTrainer / TFX Trainer (same run_fn)',
       f"{med['generic_trainer_execution_s']:.1f} s / "
       f"{med['tfx_trainer_execution_s']:.1f} s",
       'a_generic_over_tfx_execution_time'),
      ('(b) throughput, TrainSpec / tutorial run_fn',
       f"{med['train_spec_examples_per_s']:,.0f} / "
       f"{med['tutorial_run_fn_examples_per_s']:,.0f} ex/s",
       'b_train_spec_over_tutorial_throughput'),
      ('(b)/(c) TrainSpec / compute-only bound (rows in memory)',
       f"{med['train_spec_examples_per_s']:,.0f} / "
       f"{med['compute_bound_examples_per_s']:,.0f} ex/s",
       'b_over_c_train_spec_over_compute_bound'),
      ('(d) CLI time to first step / `import tensorflow`',
       f"{med['cli_first_step_s']:.1f} s / {med['tensorflow_import_s']:.1f} s",
       'd_cli_first_step_over_tensorflow_import'),
      ('(f) throughput, TrainSpec on JAX / on TensorFlow',
       f"{med['train_spec_jax_examples_per_s']:,.0f} / "
       f"{med['train_spec_examples_per_s']:,.0f} ex/s",
       'f_train_spec_jax_over_tensorflow_throughput'),
  ]
  s = report['settings']
  lines = [
      f"Machine: {report['machine']['device']}; Python "
      f"{report['machine']['python']}; {report['date']}.",
      f"Command: `{report['command']}`.",
      f"Data: {s['train_rows']:,} train / {s['eval_rows']:,} eval rows, "
      f"batch {s['batch_size']}; run_fn {s['run_fn_steps']} steps; TrainSpec "
      f"and bound {s['epochs']} epochs; median of {s['repeats']}.",
      '',
      '| Comparison | Medians | Ratio | Target | Met |',
      '|---|---|---|---|---|',
  ]
  for name, values, key in rows:
    t = targets.get(key)
    target, met = (f"{t['op']} {t['value']}", 'yes' if t['met'] else 'no'
                   ) if t else ('none', '-')
    lines.append(f'| {name} | {values} | {ratios[key]:.2f} | {target} | '
                 f'{met} |')
  lines += [
      '',
      'TrainSpec execution (`Do()`, start-up and export included): '
      f"{med['train_spec_jax_execution_s']:.1f} s on JAX (a child process) "
      f"/ {med['train_spec_execution_s']:.1f} s on TensorFlow.",
      '',
      f"Tutorial run_fn under GenericTrainer: "
      f"{med['tutorial_run_fn_under_generic_trainer_examples_per_s']:,.0f} "
      'ex/s (its tf_dataset_factory is `input_pipeline.DatasetFactory`).',
      '',
      '(e) Peak memory (max RSS of the process, MB): ' + ', '.join(
          f'{k} {v:.0f}' for k, v in peak.items()) + '.',
      '',
      'CPU steal (share of the machine\'s CPU time given to other guests '
      'while a variant ran, median): ' + ', '.join(
          f'{k} {v:.0%}' for k, v in report['cpu_steal'].items()) + '.',
      '',
  ]
  return '\n'.join(lines)


if __name__ == '__main__':
  sys.exit(main())
