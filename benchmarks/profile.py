"""Where a TrainSpec's host CPU goes, step by step (issue 58, scope 1).

    .venv/bin/python -m benchmarks.profile              # 1M rows, ~3 min
    .venv/bin/python -m benchmarks.profile --rows 200000 --epochs 2

Runs, in one process and one after the other, on the benchmark's `main`
data (`synthetic_data.write`, the narrow table, reused from
`~/.cache/tfx-generic-trainer/benchmark/`), each stage alone:

| stage | what is iterated |
|---|---|
| `read` | the gzip TFRecords, 4096 records at a time, nothing parsed |
| `tf_parse` | the same, each batch parsed by `tf.io.parse_example` with the schema's config: the floor of any reader of these files |
| `parse` | `input_pipeline.parsed_blocks`: what the TrainSpec reads and parses in its first epoch, or every epoch when uncached |
| `batch` | `input_pipeline.block_dataset` cached in memory, its second pass: the shuffle, the pools, their permutation and the cut into batches |
| `bound_input` | the compute-only bound's input (`variants._shuffled_batches`): one gather per epoch, then slices |
| `keras_step` | `model.fit` of the TrainSpec's model on the bound's input: the Keras step and what `fit` does around it |
| `train_spec` | `model.fit` on `block_dataset` cached in memory, epochs 2 and later: the TrainSpec's own loop, without the parse |
| `train_spec_stream` | `model.fit` on `block_dataset` uncached: read and parse every epoch |

For each it prints the wall time and the process's CPU time per 1M rows
(per batch of 256 for the stages that make batches), the cores it kept
busy (CPU / wall), and the CPU seconds of each thread that did at least
5% of the stage's work (`/proc/self/task/*/stat`; TensorFlow's pools leave
their threads unnamed, so the split is by thread). Nothing is asserted;
`--json` writes the figures for `benchmarks/results/profile-*.json`.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Callable, Dict, Optional

from benchmarks import synthetic_data
from benchmarks.model import BATCH_SIZE

_TICKS = os.sysconf('SC_CLK_TCK')
BENCHMARK_EPOCHS = 5  # `benchmarks.run`'s, of the TrainSpec and the bound.


def _thread_cpu() -> Dict[str, float]:
  """{thread id: CPU seconds} of this process's live threads."""
  threads = {}
  for tid in os.listdir('/proc/self/task'):
    try:
      with open(f'/proc/self/task/{tid}/stat') as f:
        stat = f.read()
    except OSError:
      continue  # It ended meanwhile.
    fields = stat[stat.rindex(')') + 2:].split()
    threads[tid] = (int(fields[11]) + int(fields[12])) / _TICKS
  return threads


class _Meter:
  """The wall and CPU time, and each thread pool's CPU, between `start()`
  and `stop()`."""

  def start(self):
    self._threads = _thread_cpu()
    self._cpu = time.process_time()
    self._started = time.monotonic()

  def stop(self):
    self.wall = time.monotonic() - self._started
    self.cpu = time.process_time() - self._cpu
    after = _thread_cpu()
    used = sorted((after[t] - self._threads.get(t, 0.0) for t in after),
                  reverse=True)
    # The busiest threads' CPU seconds: TensorFlow's pools do not name
    # their threads, so a split by thread shows how many did the work.
    self.split = [round(v, 2) for v in used if v >= 0.05 * self.cpu]


def _record(name: str, meter: _Meter, rows: int, batches: int = 0,
            quiet: bool = False, first_epoch: Optional[_Meter] = None
            ) -> dict:
  """The figures of stage `name`, printed as one line; a fit's also with
  its `first_epoch` (which traces the step and, cached, parses)."""
  wall, cpu = meter.wall, meter.cpu
  record = {'stage': name, 'wall_s': round(wall, 3), 'cpu_s': round(cpu, 3),
            'cores_busy': round(cpu / wall, 2) if wall else 0.0,
            'rows': rows, 'cpu_s_per_1m_rows': round(cpu / rows * 1e6, 3),
            'threads_cpu_s': meter.split}
  if first_epoch is not None:
    record['first_epoch_wall_s'] = round(first_epoch.wall, 3)
    record['first_epoch_cpu_s'] = round(first_epoch.cpu, 3)
  if batches:
    record['batches'] = batches
    record['cpu_ms_per_batch'] = round(cpu / batches * 1e3, 3)
    record['wall_ms_per_batch'] = round(wall / batches * 1e3, 3)
  if not quiet:
    _print(record)
  return record


def _print(record: dict):
  """A stage's figures as one line."""
  print(f'{record["stage"]:18} {record["wall_s"]:7.2f} s wall '
        f'{record["cpu_s"]:7.2f} s CPU {record["cores_busy"]:4.2f} cores  '
        f'{record["cpu_s_per_1m_rows"]:6.2f} CPU s/1M rows'
        + (f'  {record["cpu_ms_per_batch"]:6.3f} CPU ms/batch'
           if 'batches' in record else '')
        + (f'  first epoch {record["first_epoch_wall_s"]:.2f} s wall '
           f'{record["first_epoch_cpu_s"]:.2f} s CPU'
           if 'first_epoch_wall_s' in record else '')
        + f'  {record["threads_cpu_s"]}', flush=True)


def _median_record(records: list) -> dict:
  """One stage's rounds as one record: the median wall and CPU time (each
  its own median), the rest derived from them."""
  meter = _Meter()
  meter.wall = statistics.median(r['wall_s'] for r in records)
  meter.cpu = statistics.median(r['cpu_s'] for r in records)
  meter.split = records[len(records) // 2]['threads_cpu_s']
  first = records[0]
  first_epoch = None
  if 'first_epoch_wall_s' in first:
    first_epoch = _Meter()
    first_epoch.wall = statistics.median(r['first_epoch_wall_s']
                                         for r in records)
    first_epoch.cpu = statistics.median(r['first_epoch_cpu_s']
                                        for r in records)
  record = _record(first['stage'], meter, first['rows'],
                   first.get('batches', 0), quiet=True,
                   first_epoch=first_epoch)
  record['rounds'] = [{k: r[k] for k in ('wall_s', 'cpu_s',
                                         'first_epoch_wall_s',
                                         'first_epoch_cpu_s') if k in r}
                      for r in records]
  return record


def _measured(name: str, run: Callable[[], object], rows: int,
              batches: int = 0) -> dict:
  """Runs `run`; the figures of its wall and CPU time."""
  meter = _Meter()
  meter.start()
  run()
  meter.stop()
  return _record(name, meter, rows, batches)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rows', type=int, default=1_000_000)
  parser.add_argument('--epochs', type=int, default=3,
                      help='epochs of the fits (the first is not timed)')
  parser.add_argument('--data-dir', default=synthetic_data.DATA_DIR)
  parser.add_argument('--repeats', type=int, default=3,
                      help='rounds of every stage; the figures are medians')
  parser.add_argument('--json', help='also write the figures here')
  args = parser.parse_args(argv)
  data = synthetic_data.main_set(args.data_dir, args.rows)

  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  from benchmarks import variants  # pylint: disable=g-import-not-at-top
  from benchmarks.modules.synthetic_spec import SyntheticSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import input_pipeline  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import fit_loop  # pylint: disable=g-import-not-at-top

  root = data['root']
  config, names = synthetic_data.parser_config(root)
  files = sorted(tf.io.gfile.glob(os.path.join(root, 'Split-train', '*')))
  rows = args.rows
  steps = rows // BATCH_SIZE
  label = synthetic_data.LABEL_KEY

  def count(dataset):
    """Iterates `dataset` in TensorFlow's runtime (no Python per element)."""
    return int(dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))

  def one_round():
    """Each stage once: their records."""
    records = []
    raw = tf.data.TFRecordDataset(files, 'GZIP', buffer_size=1 << 20).batch(
        input_pipeline.PARSE_ROWS)
    records.append(_measured('read', lambda: count(raw), rows))
    records.append(_measured('tf_parse', lambda: count(raw.map(
        lambda s: tf.io.parse_example(s, config))), rows))
    records.append(_measured('parse', lambda: count(input_pipeline.parsed_blocks(
        files, config, names, label, deterministic=False)), rows))

    cached = input_pipeline.block_dataset(
        files, config, names, label, BATCH_SIZE, num_epochs=1, shuffle=True,
        cache=True)
    count(cached)  # The first pass parses and keeps the blocks.
    records.append(_measured('batch', lambda: count(cached), rows,
                             batches=-(-rows // BATCH_SIZE)))

    in_memory = variants._in_memory(root, 'train')  # pylint: disable=protected-access
    bound_batches = variants._shuffled_batches(  # pylint: disable=protected-access
        in_memory, BATCH_SIZE, 1)
    records.append(_measured('bound_input', lambda: count(bound_batches), rows,
                             batches=steps))

    def fitted(name, dataset):
      """`model.fit` for `args.epochs` epochs, timed from the end of the
      first (which traces the step and, cached, parses) to the end."""
      spec = SyntheticSpec(hparams={'epochs': args.epochs, 'table': 'narrow'})
      model = fit_loop.compile_model(spec, steps_per_epoch=steps)
      meter, first = _Meter(), _Meter()

      def epoch_end(epoch, logs):
        del logs
        if epoch == 0:
          first.stop()
          meter.start()

      first.start()
      model.fit(dataset, steps_per_epoch=steps, epochs=args.epochs, verbose=0,
                callbacks=[keras.callbacks.LambdaCallback(
                    on_epoch_end=epoch_end)])
      meter.stop()
      timed = args.epochs - 1
      return _record(name, meter, rows * timed, steps * timed,
                     first_epoch=first)

    records.append(fitted('keras_step', variants._shuffled_batches(  # pylint: disable=protected-access
        in_memory, BATCH_SIZE, args.epochs)))
    del in_memory, bound_batches
    for name, cache in (('train_spec', True), ('train_spec_stream', False)):
      records.append(fitted(name, input_pipeline.block_dataset(
          files, config, names, label, BATCH_SIZE, num_epochs=None,
          shuffle=True, cache=cache)))
    return records

  rounds = []
  for repeat in range(args.repeats):
    print(f'round {repeat + 1} of {args.repeats}:', flush=True)
    rounds.append(one_round())
  records = [_median_record([r[i] for r in rounds])
             for i in range(len(rounds[0]))]
  if args.repeats > 1:
    print(f'medians of {args.repeats} rounds:')
    for record in records:
      _print(record)
  summary = _ratios(records)
  per_round = [_ratios(r) for r in rounds]
  for k, v in summary.items():
    print(f'{k}: {v:.2f}' + (' (rounds: ' + ', '.join(
        f'{r[k]:.2f}' for r in per_round) + ')' if len(rounds) > 1 else ''))
  report = {'cpu': variants.cpu_name(), 'cores': os.cpu_count(),
            'python': platform.python_version(), 'tensorflow': tf.__version__,
            'keras': keras.__version__, 'rows': rows, 'epochs': args.epochs,
            'command': 'python -m benchmarks.profile ' + ' '.join(
                sys.argv[1:] if argv is None else argv),
            'repeats': args.repeats, 'stages': records,
            'ratios': {k: round(v, 3) for k, v in summary.items()},
            'ratios_per_round': [{k: round(v, 3) for k, v in r.items()}
                                 for r in per_round]}
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(report, f, indent=1)
  return 0


def _ratios(records: list) -> Dict[str, float]:
  """Where the time goes, as ratios of the stages' `records`."""
  by = {r['stage']: r for r in records}
  step = by['keras_step']['cpu_ms_per_batch']
  keras_wall = by['keras_step']['wall_ms_per_batch']
  stream = by['train_spec_stream']
  # On these cores, an uncached epoch cannot take less wall time than its
  # CPU (parse and step) spread over all of them: the floor it is held to.
  floor_ms = stream['cpu_ms_per_batch'] / (os.cpu_count() or 1)
  # One epoch of the data's rows: the Keras step's and the cached
  # TrainSpec's later epochs, and the parse's CPU spread over the cores.
  cached = by['train_spec']
  epochs_timed = cached['rows'] / by['parse']['rows']
  step_epoch_s = by['keras_step']['wall_s'] / epochs_timed
  cached_epoch_s = cached['wall_s'] / epochs_timed
  step_first = by['keras_step']['first_epoch_wall_s']
  first_floor_s = max(step_first, (by['keras_step']['first_epoch_cpu_s'] +
                                   by['parse']['cpu_s']) /
                      (os.cpu_count() or 1))
  later = BENCHMARK_EPOCHS - 1
  bound_s = step_first + later * step_epoch_s
  return {
      'input CPU per batch, cached / the Keras step':
          by['batch']['cpu_ms_per_batch'] / step,
      "input CPU per batch, the bound's / the Keras step":
          by['bound_input']['cpu_ms_per_batch'] / step,
      'parse CPU, ours / tf.io.parse_example alone':
          by['parse']['cpu_s'] / by['tf_parse']['cpu_s'],
      'train_spec / keras_step, wall per batch':
          by['train_spec']['wall_ms_per_batch'] / keras_wall,
      'train_spec_stream / keras_step, wall per batch':
          stream['wall_ms_per_batch'] / keras_wall,
      'uncached, the most of the bound its CPU allows on these cores':
          keras_wall / floor_ms,
      'uncached, its wall at that floor / its wall':
          floor_ms / stream['wall_ms_per_batch'],
      # Cached, the first epoch parses every row beside the step, which
      # traces as the Keras step's first epoch does: it cannot take less
      # wall time than that epoch, nor than both's CPU over all the cores.
      'cached, first epoch: its floor on these cores / its wall':
          first_floor_s / cached['first_epoch_wall_s'],
      # (b)/(c) as the benchmark runs it (its 5 epochs, the first timed
      # too), rebuilt from these stages; and the most that floor leaves.
      f'cached, {BENCHMARK_EPOCHS} epochs from these stages: TrainSpec / '
      'bound':
          bound_s / (cached['first_epoch_wall_s'] + later * cached_epoch_s),
      f'cached, {BENCHMARK_EPOCHS} epochs: the most of the bound its CPU '
      'leaves on these cores':
          bound_s / (first_floor_s + later * step_epoch_s),
  }


if __name__ == '__main__':
  sys.exit(main())
