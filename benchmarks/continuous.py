"""Benchmark (j): continuous training with parsed rows kept across executions.

    python -m benchmarks.continuous --span-rows 300000 --out results/j.json

A window of `WINDOW` spans of the narrow table (each span an Examples
folder written once by `synthetic_data.write` and reused from
~/.cache/tfx-generic-trainer/benchmark/), `EXECUTIONS` consecutive
executions of GenericExecutor with the TrainSpec module, each adding the
next span and dropping the oldest, each taking the previous execution's
ParsedRows output as its `parsed_rows` input (a pipeline's resolver would).
First the same first execution without ParsedRows ("today's path") and
execution 1, alternated `FIRST_REPEATS` times (each one's least wall time
is its record, every wall time is in `first_repeats`): the two are
compared, and on these shared machines one measure moves by 10-30%
between minutes. Before each execution, in a process of its own, the
compute-only bound (c) on that execution's window (its record's
`compute_bound`); every fit throughput is compared with the median of
these (the report's `compute_bound`, all measures in `measures`): one
measure of (c) moves as much as the executions do, and the median of a
dozen, taken over the same minutes as the executions, does not.

Each execution runs in a process of its own, so that its peak memory and
CPU are its own. Per execution: wall time of the executor's Do, the fit's
throughput against (c)'s, the process's CPU seconds during Do, peak RSS,
the bytes the ParsedRows output holds (hard links counted once), and,
measured apart before Do, reading the previous ParsedRows and writing the
misses to a scratch folder, without a model, inside TensorFlow as fit
iterates (`input_cpu_s`):

- input CPU seconds: the check of the input before training (each file
  read whole unless an earlier training kept its rows: `fnargs.inputs`,
  `data.kept.read_before`; `check_cpu_s`) and the train and eval rows brought
  into memory once (read, checked, parsed or read back, kept;
  `rows_cpu_s`): what this issue saves. Each part the least of
  `INPUT_REPEATS` measures (all are in the record), each as a fresh
  execution pays it (a new scratch folder, the kept-rows function traced
  again; kernels and thread pools are warm after the first): on these
  shared machines one measure moves by 10-20% between minutes;
- datasets CPU seconds: the datasets the training iterates (train two
  epochs, kept in memory after the first, shuffled and batched every
  epoch; eval once): the input plus the per-epoch shuffling and batching
  from memory that the bound (c) pays too.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from typing import Optional

from benchmarks import peak_memory
from benchmarks import synthetic_data
from benchmarks import variants

WINDOW = 7
EXECUTIONS = 8
INPUT_REPEATS = 3
FIRST_REPEATS = 2  # Today's path and execution 1, alternated.


def _span_root(base: str, span: int, rows: int) -> str:
  return os.path.join(base, f'span-rows{rows}', f'span-{span}')


def write_spans(base: str, rows: int, count: int):
  """The spans 1..count (train `rows`, eval a tenth), written once."""
  for span in range(1, count + 1):
    synthetic_data.write(_span_root(base, span, rows), rows,
                         max(1, rows // 10), seed=span, shards=2)


def _io(spans, work, previous):
  """The executor's dicts: the window's Examples, the TrainSpec module,
  the ParsedRows input (`previous`, a folder) and output."""
  from generic_trainer.data.kept.artifact import ParsedRows  # pylint: disable=g-import-not-at-top
  inputs, outputs, properties = variants.trainer_io(
      spans[0], work, variants.SPEC_MODULE, None, None,
      {'epochs': 2, 'cache': None, 'table': 'narrow'})
  inputs['examples'] = _examples(spans)
  if previous is not None:
    rows_in = ParsedRows()
    rows_in.uri = previous
    inputs['parsed_rows'] = [rows_in]
    rows_out = ParsedRows()
    rows_out.uri = os.path.join(work, 'parsed_rows')
    outputs['updated_parsed_rows'] = [rows_out]
  return inputs, outputs, properties


def _examples(spans):
  """An Examples artifact per span folder."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = []
  for root in spans:
    artifact = standard_artifacts.Examples()
    artifact.uri = root
    artifact.split_names = '["train", "eval"]'
    examples.append(artifact)
  return examples


def _cpu_s() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime


def _bytes(folder: str) -> int:
  """The bytes of the files under `folder`, each inode once."""
  seen, total = set(), 0
  for dirpath, _, files in os.walk(folder):
    for name in files:
      info = os.stat(os.path.join(dirpath, name))
      if info.st_ino not in seen:
        seen.add(info.st_ino)
        total += info.st_size
  return total


def input_cpu_s(spans, previous, scratch, epochs: bool = False) -> float:
  """The CPU seconds of the execution's input alone, with the ParsedRows
  of `previous` read back and the misses written to `scratch` (None:
  today's path): the rows of the train and eval splits brought into memory
  once (read, checked, parsed or read back, kept), the datasets built and
  iterated inside TensorFlow as Keras' fit iterates them. With `epochs`,
  the datasets the training iterates: also the train split's two epochs
  of shuffling and batching from memory, which the bound (c) pays too."""
  from generic_trainer.data import input_pipeline, schema_file  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.data.kept import cache as kept_cache
  from generic_trainer.data.kept import key as kept_key
  schema = schema_file.read(os.path.join(spans[0], 'schema.pbtxt'))
  config, names = input_pipeline.parser_config(schema)
  label = synthetic_data.LABEL_KEY
  store = (kept_cache.SpanCache(scratch, previous=previous)
           if previous is not None else None)
  cpu = _cpu_s()
  with store or open(os.devnull) as kept:
    shared = {**kept_key.parser_fields(config, names, label,
                                       input_pipeline.PARSE_ROWS),
              **kept_key.environment_fields(), 'transform': None}
    kept = (kept, shared) if store else None
    for split, passes, shuffle in (('train', 2, True), ('eval', 1, False)):
      files = [os.path.join(s, f'Split-{split}', '*') for s in spans]
      if epochs:
        dataset = input_pipeline.block_dataset(
            files, config, names, label, 256, passes, shuffle, cache=True,
            seed=1, kept=kept)
      else:
        dataset = input_pipeline.parsed_blocks(files, config, names, label,
                                               True, kept=kept)
      # A Python loop would add ~0.1 ms of Python per element.
      dataset.reduce(0, lambda count, *unused: count + 1).numpy()
  return _cpu_s() - cpu


def check_cpu_s(spans, previous) -> float:
  """The CPU seconds of the check before training (`fnargs.inputs`) of the
  window's Examples, with the ParsedRows of `previous` (None: today's
  path)."""
  from tfx.proto import trainer_pb2  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs import inputs  # pylint: disable=g-import-not-at-top
  examples = _examples(spans)
  cpu = _cpu_s()
  for artifact in examples:
    inputs.check_splits(artifact, trainer_pb2.TrainArgs(),
                        trainer_pb2.EvalArgs(), previous)
  return _cpu_s() - cpu


def _fresh(measure, probe: Optional[str] = None):
  """`measure()` as a fresh execution's process pays it: no kept-rows
  function traced yet, and nothing kept in `probe` after."""
  from generic_trainer.data.kept import blocks as kept_blocks  # pylint: disable=g-import-not-at-top
  kept_blocks.forget_traced()
  try:
    return measure()
  finally:
    if probe:
      shutil.rmtree(probe, ignore_errors=True)


def _warm_up():
  """The process's first tf.data pipeline (threads, kernels, the first
  function): ~0.07 s of CPU once per process, the same in every execution
  and in any TensorFlow program, paid before the input is measured."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  config = {'x': tf.io.FixedLenFeature([], tf.float32)}
  example = tf.train.Example(features=tf.train.Features(feature={
      'x': tf.train.Feature(float_list=tf.train.FloatList(value=[1.0]))}))
  tf.data.Dataset.from_tensors([example.SerializeToString()]).repeat(
      2).interleave(tf.data.Dataset.from_tensors, cycle_length=2,
                    num_parallel_calls=2).map(
                        lambda r: tf.io.parse_example(r, config),
                        num_parallel_calls=2).reduce(
                            0, lambda count, unused: count + 1).numpy()


def run_execution(spans, work, previous, result):
  """One execution in this process; writes its record to `result`."""
  import generic_trainer.component.executor  # pylint: disable=g-import-not-at-top
  shutil.rmtree(work, ignore_errors=True)
  os.makedirs(work)
  io = _io(spans, work, previous)
  probe = os.path.join(work, 'input-probe')
  _warm_up()
  checks = [check_cpu_s(spans, previous) for _ in range(INPUT_REPEATS)]
  rows = [_fresh(lambda: input_cpu_s(spans, previous, probe), probe)
          for _ in range(INPUT_REPEATS)]
  datasets_s = _fresh(
      lambda: input_cpu_s(spans, previous, probe, epochs=True), probe)
  cpu, started = _cpu_s(), time.monotonic()
  _fresh(lambda: generic_trainer.component.executor.GenericExecutor().Do(*io))
  record = {'execution_s': time.monotonic() - started,
            'cpu_s': _cpu_s() - cpu, 'input_cpu_s': min(checks) + min(rows),
            'check_cpu_s': min(checks), 'check_cpu_s_measures': checks,
            'rows_cpu_s': min(rows), 'rows_cpu_s_measures': rows,
            'datasets_cpu_s': datasets_s,
            'peak_rss_mb': peak_memory.own_peak_mb()}
  with open(os.path.join(io[1]['model_run'][0].uri,
                         'train_result.json')) as f:
    fit_s = json.load(f)['training_time_s']
  rows = sum(variants._rows(s, 'train') for s in spans)  # pylint: disable=protected-access
  record.update(fit_s=fit_s, examples_per_s=2 * rows / fit_s)
  if 'updated_parsed_rows' in io[1]:
    folder = io[1]['updated_parsed_rows'][0].uri
    record['cache_bytes'] = _bytes(folder)
    with open(os.path.join(folder, 'decisions.json')) as f:
      decisions = json.load(f)
    record.update(hits=decisions['hits'], misses=decisions['misses'])
  with open(result, 'w') as f:
    json.dump(record, f)


def run_compute_bound(spans, result):
  """(c) on the window's rows: the model fed from memory, 2 epochs."""
  merged = os.path.join(os.path.dirname(spans[0]), 'window-from-' +
                        f'{os.path.basename(spans[0])}-of-{len(spans)}')
  for split in ('train', 'eval'):
    folder = os.path.join(merged, f'Split-{split}')
    os.makedirs(folder, exist_ok=True)
    for i, span in enumerate(spans):
      for name in os.listdir(os.path.join(span, f'Split-{split}')):
        link = os.path.join(folder, f'{i}-{name}')
        if not os.path.lexists(link):
          os.symlink(os.path.join(span, f'Split-{split}', name), link)
  shutil.copy(os.path.join(spans[0], 'schema.pbtxt'), merged)
  rows = sum(variants._rows(s, 'train') for s in spans)  # pylint: disable=protected-access
  with open(os.path.join(merged, 'stamp.json'), 'w') as f:
    json.dump({'train_rows': rows, 'eval_rows': 0}, f)
  args = argparse.Namespace(data=merged, epochs=2)
  record = variants.run_compute_bound(args, merged)
  with open(result, 'w') as f:
    json.dump(record, f)


def _child(argv, result, one_process=False):
  """Runs a part (`argv`) in a process of its own (in this one with
  `one_process`: smoke runs); returns its record."""
  argv = argv + ['--result', result]
  if one_process:
    main(argv)
  else:
    subprocess.run([sys.executable, '-m', 'benchmarks.continuous'] + argv,
                   check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  with open(result) as f:
    return json.load(f)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--span-rows', type=int, default=300_000)
  parser.add_argument('--work', default='/tmp/benchmark-j')
  parser.add_argument('--out')
  parser.add_argument('--executions', type=int, default=EXECUTIONS)
  parser.add_argument('--window', type=int, default=WINDOW)
  parser.add_argument('--data-dir', default=os.path.join(
      os.path.expanduser('~'), '.cache', 'tfx-generic-trainer', 'benchmark',
      'continuous'))
  parser.add_argument('--one-process', action='store_true',
                      help='every part in this process (a smoke run)')
  # A child's part: one execution, or (c).
  parser.add_argument('--spans', nargs='*')
  parser.add_argument('--previous')
  parser.add_argument('--execution-work')
  parser.add_argument('--compute-bound', action='store_true')
  parser.add_argument('--result')
  args = parser.parse_args(argv)
  if args.compute_bound:
    return run_compute_bound(args.spans, args.result)
  if args.spans:
    return run_execution(args.spans, args.execution_work, args.previous,
                         args.result)
  data = args.data_dir
  one = args.one_process
  write_spans(data, args.span_rows, args.window + args.executions - 1)
  shutil.rmtree(args.work, ignore_errors=True)
  os.makedirs(args.work)
  report = {'device': variants.device(), 'span_rows': args.span_rows,
            'window': args.window, 'epochs': 2, 'executions': []}
  first = [_span_root(data, s, args.span_rows)
           for s in range(1, args.window + 1)]
  bounds = []

  def measured(name, spans, extra):
    """An execution's record, with the bound (c) on its window measured
    in a process of its own just before it (also kept in `bounds`)."""
    bounds.append(_child(['--compute-bound', '--spans'] + spans,
                         os.path.join(args.work, f'{name}-c.json'), one))
    record = _child(['--spans'] + spans + ['--execution-work', os.path.join(
        args.work, name)] + extra, os.path.join(args.work, f'{name}.json'),
                    one)
    record['compute_bound'] = bounds[-1]
    return record

  empty = os.path.join(args.work, 'empty')
  os.makedirs(empty)
  todays, firsts = [], []
  for _ in range(FIRST_REPEATS):  # Alternated, in one window of minutes.
    todays.append(measured('today', first, []))
    firsts.append(measured('execution-1', first, ['--previous', empty]))
  report['today'], report['first_repeats'] = _least(todays), {
      'today_s': [r['execution_s'] for r in todays],
      'execution_1_s': [r['execution_s'] for r in firsts]}
  report['executions'].append(_least(firsts))
  previous = os.path.join(args.work, 'execution-1', 'parsed_rows')
  for i in range(1, args.executions):
    spans = [_span_root(data, s, args.span_rows)
             for s in range(i + 1, i + 1 + args.window)]
    record = measured(f'execution-{i + 1}', spans, ['--previous', previous])
    previous = os.path.join(args.work, f'execution-{i + 1}', 'parsed_rows')
    report['executions'].append(record)
    print(f'execution {i + 1}: {record}', flush=True)
  measures = sorted(b['examples_per_s'] for b in bounds)
  report['compute_bound'] = {'examples_per_s': measures[len(measures) // 2],
                             'measures': measures}
  _ratios(report)
  if args.out:
    with open(args.out, 'w') as f:
      json.dump(report, f, indent=1)
  print(json.dumps({k: v for k, v in report.items() if k != 'executions'},
                   indent=1))
  return 0


def _least(records):
  """The record of the shortest execution among repeats of one."""
  return min(records, key=lambda r: r['execution_s'])


def _ratios(report):
  """The ratios the targets read."""
  first = report['executions'][0]
  for record in [report['today']] + report['executions']:
    record['throughput_vs_c'] = (record['examples_per_s'] /
                                 report['compute_bound']['examples_per_s'])
  for record in report['executions']:
    for part in ('input', 'datasets'):
      record[f'{part}_cpu_vs_first'] = (record[f'{part}_cpu_s'] /
                                        first[f'{part}_cpu_s'])
  report['first_vs_today'] = first['execution_s'] / report['today'][
      'execution_s']


if __name__ == '__main__':
  sys.exit(main())
