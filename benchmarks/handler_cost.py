"""What each built-in handler of the fit loop costs, at batch ends and in all.

    python -m benchmarks.handler_cost                 # 1M rows, 3 epochs
    python -m benchmarks.handler_cost --rows 4096 --epochs 2

Trains the benchmark's TrainSpec model on the `main` data (the narrow
table, kept in memory after the first epoch) through `fit_loop.fit`, with
the built-in handlers GenericExecutor uses, and Keras's own `TensorBoard`
handler beside them for comparison (writing to a folder of its own), and
times each handler's `on_train_batch_end`: in all, the calls, the median
call and the mean (the mean holds the one-time work, such as
TensorBoard's first summary call at the first batch end, which imports
its summary modules). Keras calls these once
per execution of `steps_per_execution` steps. Every other hook is timed
too (the resume checkpoint after each epoch, as GenericExecutor writes
it), and the built-in handlers' share of the fit is summed over all of
them. Nothing is asserted; `--json` keeps the figures.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import types
from typing import Dict, List

from benchmarks import synthetic_data
from benchmarks.model import BATCH_SIZE


# The hooks of a training that `fit_loop.fit` runs; each is timed.
HOOKS = ('on_train_begin', 'on_train_end', 'on_epoch_begin', 'on_epoch_end',
         'on_train_batch_begin', 'on_train_batch_end', 'on_test_begin',
         'on_test_end', 'on_test_batch_begin', 'on_test_batch_end')
BATCH_END = 'on_train_batch_end'
# Keras's own handler, beside ours for comparison: not in the built-ins' sum.
COMPARED = 'TensorBoard'


def _timed(handler, calls: Dict[str, Dict[str, List[float]]]) -> None:
  """Wraps each of `handler`'s hooks to record each call's seconds in
  `calls[its name][hook]`."""
  name = type(handler).__name__
  if name in calls:  # A second of a class: numbered.
    name = f'{name} #{sum(n.startswith(name) for n in calls) + 1}'
  calls[name] = {hook: [] for hook in HOOKS}
  for hook in HOOKS:
    inner = getattr(handler, hook, None)
    if inner is None:
      continue

    def timed(*args, inner=inner, seconds=calls[name][hook], **kwargs):
      started = time.perf_counter()
      try:
        return inner(*args, **kwargs)
      finally:
        seconds.append(time.perf_counter() - started)

    setattr(handler, hook, timed)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rows', type=int, default=1_000_000)
  parser.add_argument('--epochs', type=int, default=3)
  parser.add_argument('--data-dir', default=synthetic_data.DATA_DIR)
  parser.add_argument('--json', help='also write the figures here')
  args = parser.parse_args(argv)
  data = synthetic_data.main_set(args.data_dir, args.rows)

  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  from benchmarks import variants  # pylint: disable=g-import-not-at-top
  from benchmarks.modules.synthetic_spec import SyntheticSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import input_pipeline  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import fit_loop  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers import handler_list  # pylint: disable=g-import-not-at-top

  root = data['root']
  config, names = synthetic_data.parser_config(root)

  def dataset(split, shuffle):
    files = sorted(tf.io.gfile.glob(os.path.join(root, split, '*')))
    return input_pipeline.block_dataset(
        files, config, names, synthetic_data.LABEL_KEY, BATCH_SIZE,
        num_epochs=None, shuffle=shuffle, cache=True)

  steps = args.rows // BATCH_SIZE
  spec = SyntheticSpec(hparams={'epochs': args.epochs, 'table': 'narrow'})
  model = fit_loop.compile_model(spec, steps_per_epoch=steps)
  calls: Dict[str, Dict[str, List[float]]] = {}
  built = handler_list.HandlerList.__init__

  def timing_init(self, handlers, *rest, **kwargs):
    for handler in handlers:
      _timed(handler, calls)
    built(self, handlers, *rest, **kwargs)

  handler_list.HandlerList.__init__ = timing_init
  try:
    with tempfile.TemporaryDirectory() as run:
      # A resume checkpoint after each epoch, as GenericExecutor writes.
      fn_args = types.SimpleNamespace(
          model_run_dir=run, checkpoint_dir=os.path.join(run, 'checkpoint'),
          is_chief=True, num_workers=1)
      inputs = fit_loop.FitInputs(
          dataset('Split-train', True), dataset('Split-eval', False),
          args.epochs, steps, max(1, 10_000 // BATCH_SIZE))
      started = time.monotonic()
      result = fit_loop.fit(spec, inputs, fn_args, interactive=False,
                            extra_handlers=[keras.callbacks.TensorBoard(
                                os.path.join(run, 'keras-tensorboard'))])
      wall = time.monotonic() - started
  finally:
    handler_list.HandlerList.__init__ = built
  report = {'cpu': variants.cpu_name(), 'cores': os.cpu_count(),
            'tensorflow': tf.__version__, 'keras': keras.__version__,
            'rows': args.rows, 'epochs': args.epochs,
            'steps_per_execution': int(model.steps_per_execution)
            if hasattr(model, 'steps_per_execution') else None,
            'fit_s': round(wall, 3), 'steps': result['steps'],
            'command': 'python -m benchmarks.handler_cost ' + ' '.join(
                sys.argv[1:] if argv is None else argv),
            'handlers': {}}
  print(f'fit: {wall:.2f} s, {result["steps"]} steps, '
        f'{report["steps_per_execution"]} steps per execution')
  built_ins = 0.0
  for name, hooks in sorted(calls.items(),
                            key=lambda kv: -sum(map(sum, kv[1].values()))):
    seconds = hooks[BATCH_END]
    every = sum(map(sum, hooks.values()))
    if not every:
      continue
    if name != COMPARED:
      built_ins += every
    figures = {'total_ms': round(sum(seconds) * 1e3, 2),
               'calls': len(seconds),
               'median_us': round(statistics.median(seconds) * 1e6, 1)
                            if seconds else 0.0,
               'mean_us': round(statistics.mean(seconds) * 1e6, 1)
                          if seconds else 0.0,
               'share_of_fit': round(sum(seconds) / wall, 4),
               'every_hook_ms': {hook: round(sum(t) * 1e3, 2)
                                 for hook, t in hooks.items() if t},
               'every_hook_share_of_fit': round(every / wall, 4)}
    report['handlers'][name] = figures
    print(f'{name:32} batch ends: {figures["total_ms"]:8.1f} ms in all, '
          f'{figures["calls"]} calls, median {figures["median_us"]:7.1f} us, '
          f'mean {figures["mean_us"]:7.1f} us, '
          f'{figures["share_of_fit"]:.1%} of the fit; every hook: '
          f'{every * 1e3:.1f} ms, {figures["every_hook_share_of_fit"]:.1%}')
  report['built_ins_share_of_fit'] = round(built_ins / wall, 4)
  print(f'the built-in handlers, every hook: {built_ins * 1e3:.1f} ms, '
        f'{report["built_ins_share_of_fit"]:.1%} of the fit (Keras\'s '
        f'{COMPARED}, beside them for comparison, left out)')
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(report, f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main())
