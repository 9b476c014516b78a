"""Benchmark variants, run in a process of their own by `benchmarks.run`.

    python -m benchmarks.variants VARIANT [VARIANT...] --data ROOT \
        --work DIR --result F

Variants (each repeated `--repeats` times in this process, after the
imports, so that import time is not counted except in `first_step`):
  tfx_trainer        tfx.components.Trainer's executor, tutorial run_fn.
  generic_trainer    GenericExecutor, the same tutorial run_fn.
  train_spec         GenericExecutor, the TrainSpec module, `--epochs`; the
                     rows kept in memory when they fit (`TrainSpec.cache`
                     None, the default).
  train_spec_stream  The same with `cache=False`: every epoch reads and
                     parses the gzip files.
  train_spec_disk    The same with `cache='disk'`: the first epoch writes
                     the parsed rows to local disk, later epochs read them.
  train_spec_jax     `train_spec` with backend='jax': trained in a child
                     process on Keras's JAX backend.
  compute_bound      The TrainSpec's model and compile settings, fed from
                     tensors already in memory, `--epochs`.
The model is that of the data's table (`synthetic_data.table_of`). The
result file gets each variant's per-repeat records, and the device. Several
variants in one process (smoke runs) share its peak memory.
"""

import argparse
import json
import logging
import os
import shutil
import time

from benchmarks import peak_memory
from benchmarks import synthetic_data

HERE = os.path.dirname(os.path.abspath(__file__))
TUTORIAL_MODULE = os.path.join(HERE, 'modules', 'tutorial_run_fn.py')
SPEC_MODULE = os.path.join(HERE, 'modules', 'synthetic_spec.py')
# The TrainSpec variants: their `TrainSpec.cache`, and backend if not
# TensorFlow.
SPEC_CACHE = {'train_spec': None, 'train_spec_stream': False,
              'train_spec_disk': 'disk', 'train_spec_jax': None}
SPEC_BACKEND = {'train_spec_jax': 'jax'}


def trainer_io(data_root, work_dir, module_file, train_steps, eval_steps,
               custom_config=None):
  """(input_dict, output_dict, exec_properties) of a trainer execution."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = data_root
  examples.split_names = '["train", "eval"]'
  schema = standard_artifacts.Schema()
  schema.uri = os.path.join(work_dir, 'schema')
  os.makedirs(schema.uri, exist_ok=True)
  shutil.copy(os.path.join(data_root, 'schema.pbtxt'), schema.uri)
  model = standard_artifacts.Model()
  model.uri = os.path.join(work_dir, 'model')
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(work_dir, 'model_run')
  properties = {
      'module_file': module_file,
      'train_args': json.dumps({'num_steps': train_steps} if train_steps
                               else {}),
      'eval_args': json.dumps({'num_steps': eval_steps} if eval_steps else {}),
      'custom_config': json.dumps(custom_config),
  }
  return ({'examples': [examples], 'schema': [schema]},
          {'model': [model], 'model_run': [model_run]}, properties)


def run_executor(kind, args, work_dir):
  """Times one trainer execution; returns its record."""
  if kind == 'tfx_trainer':
    from tfx.components.trainer.executor import GenericExecutor as Executor  # pylint: disable=g-import-not-at-top
  else:
    from generic_trainer.component.executor import GenericExecutor as Executor  # pylint: disable=g-import-not-at-top
  table = synthetic_data.table_of(args.data)
  if kind in SPEC_CACHE:
    io = trainer_io(args.data, work_dir, SPEC_MODULE, None, None,
                    {'epochs': args.epochs, 'cache': SPEC_CACHE[kind],
                     'table': table})
    if kind in SPEC_BACKEND:
      io[2]['backend'] = SPEC_BACKEND[kind]
  else:
    io = trainer_io(args.data, work_dir, TUTORIAL_MODULE, args.steps,
                    args.eval_steps, {'table': table})
  decisions = _CacheLines()
  started = time.monotonic()
  with decisions:
    Executor().Do(*io)
  record = {'execution_s': time.monotonic() - started}
  if decisions.lines:
    record['cache'] = decisions.lines
  run_dir = io[1]['model_run'][0].uri
  if kind in SPEC_CACHE:
    with open(os.path.join(run_dir, 'train_result.json')) as f:
      result = json.load(f)
    record['fit_s'] = result['training_time_s']
    record['train_examples'] = args.epochs * _rows(args.data, 'train')
  else:
    with open(os.path.join(run_dir, 'fit_time.json')) as f:
      timing = json.load(f)
    record['fit_s'] = timing['fit_time_s']
    record['train_examples'] = timing['train_examples']
  record['examples_per_s'] = record['train_examples'] / record['fit_s']
  return record


def run_compute_bound(args, work_dir):
  """The TrainSpec's model fed from memory: the bound for its throughput.

  Full batches only, so that every epoch has the same steps and one
  iterator runs through all epochs (the next epoch's shuffle overlaps the
  end of this one); steps_per_execution is picked for those steps, as the
  TrainSpec's is.
  """
  from benchmarks.modules.synthetic_spec import SyntheticSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import fit_loop  # pylint: disable=g-import-not-at-top
  train = _in_memory(args.data, 'train')
  evaluation = _in_memory(args.data, 'eval')
  spec = SyntheticSpec(hparams={'epochs': args.epochs,
                                'table': synthetic_data.table_of(args.data)})
  steps = max(1, int(train[1].shape[0]) // spec.batch_size)
  model = fit_loop.compile_model(spec, steps_per_epoch=steps)
  started = time.monotonic()
  model.fit(_shuffled_batches(train, spec.batch_size, args.epochs),
            steps_per_epoch=steps,
            validation_data=_shuffled_batches(evaluation, spec.batch_size, 1,
                                              shuffle=False),
            epochs=args.epochs, verbose=0)
  fit_s = time.monotonic() - started
  del work_dir
  examples = args.epochs * steps * spec.batch_size
  return {'fit_s': fit_s, 'train_examples': examples,
          'examples_per_s': examples / fit_s}


def _in_memory(data_root, split):
  """(features, label) of a split as tensors: all rows, parsed once."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import input_pipeline, schema_file  # pylint: disable=g-import-not-at-top
  spec, _ = input_pipeline.parser_config(
      schema_file.read(os.path.join(data_root, 'schema.pbtxt')))
  files = sorted(tf.io.gfile.glob(os.path.join(data_root, f'Split-{split}',
                                               '*')))
  blocks = list(tf.data.TFRecordDataset(files, 'GZIP').batch(65536).map(
      lambda s: tf.io.parse_example(s, spec)))
  columns = {k: tf.concat([b[k] for b in blocks], 0) for k in spec}
  label = columns.pop(synthetic_data.LABEL_KEY)
  return columns, label


def _shuffled_batches(data, batch_size, epochs, shuffle=True):
  """`epochs` passes of full batches sliced from memory (all rows when
  unshuffled), the rows in a new order every epoch.

  Each epoch permutes all rows with one gather, then slices the batches:
  no per-batch work besides the slice, the least any input can do.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  features, label = data
  rows = int(label.shape[0])
  full = rows // batch_size * batch_size

  def epoch(_):
    order = tf.random.shuffle(tf.range(rows)) if shuffle else tf.range(rows)
    columns = ({k: tf.gather(v, order) for k, v in features.items()},
               tf.gather(label, order))
    batches = tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(
        lambda t: tf.reshape(t[:full], [-1, batch_size] + t.shape[1:].as_list()),
        columns))
    if full < rows and not shuffle:
      batches = batches.concatenate(tf.data.Dataset.from_tensors(
          tf.nest.map_structure(lambda t: t[full:], columns)))
    return batches

  # Autotuning off, as in GenericTrainer's input: with it on, a new
  # iterator can wait seconds for the autotuner's wake-up.
  from generic_trainer.data.input_pipeline import without_autotuning  # pylint: disable=g-import-not-at-top
  return without_autotuning(
      tf.data.Dataset.range(epochs).flat_map(epoch).prefetch(8))


class _CacheLines(logging.Handler):
  """Collects the progress log's cache decisions while it is entered."""

  def __init__(self):
    super().__init__(logging.INFO)
    self.lines = []

  def emit(self, record):
    message = record.getMessage()
    if message.startswith('cache: '):
      self.lines.append(message)

  def __enter__(self):
    from generic_trainer.system import progress  # pylint: disable=g-import-not-at-top
    progress.log().addHandler(self)
    return self

  def __exit__(self, *unused):
    from generic_trainer.system import progress  # pylint: disable=g-import-not-at-top
    progress.log().removeHandler(self)


def _rows(data_root, split):
  with open(os.path.join(data_root, 'stamp.json')) as f:
    return json.load(f)[f'{split}_rows']


def device() -> str:
  """The accelerator TensorFlow sees, or the CPU."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  gpus = tf.config.list_physical_devices('GPU')
  if gpus:
    details = tf.config.experimental.get_device_details(gpus[0])
    return f"GPU: {details.get('device_name', gpus[0].name)} x{len(gpus)}"
  return f'CPU: {cpu_name()}, {os.cpu_count()} cores'


def cpu_name() -> str:
  """The CPU's model name (from /proc/cpuinfo), as `lscpu` says it."""
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except OSError:
    pass
  import platform  # pylint: disable=g-import-not-at-top
  return platform.processor() or 'unknown'


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('variants', nargs='+', choices=[
      'tfx_trainer', 'generic_trainer', 'compute_bound', *SPEC_CACHE])
  parser.add_argument('--data', required=True)
  parser.add_argument('--work', required=True)
  parser.add_argument('--result', required=True)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--steps', type=int, default=1000)
  parser.add_argument('--eval-steps', type=int, default=10)
  parser.add_argument('--epochs', type=int, default=3)
  args = parser.parse_args(argv)
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  absl_logging.set_verbosity(absl_logging.WARNING)
  if set(args.variants) == {'compute_bound'}:
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import
    import keras  # pylint: disable=g-import-not-at-top,unused-import
  else:  # Both trainers' modules, so neither pays the other's imports.
    import tfx.components.trainer.executor  # pylint: disable=g-import-not-at-top,unused-import
    import generic_trainer.component.executor  # pylint: disable=g-import-not-at-top,unused-import
  results = {}
  for variant in args.variants:
    records = results[variant] = []
    for repeat in range(args.repeats):
      work_dir = os.path.join(args.work, f'{variant}-{repeat}')
      shutil.rmtree(work_dir, ignore_errors=True)
      os.makedirs(work_dir)
      if variant == 'compute_bound':
        records.append(run_compute_bound(args, work_dir))
      else:
        records.append(run_executor(variant, args, work_dir))
      # The process's peak so far: a variant's own when it runs alone.
      records[-1]['process_peak_rss_mb'] = peak_memory.own_peak_mb()
      print(f'{variant} repeat {repeat + 1}: {records[-1]}', flush=True)
  with open(args.result, 'w') as f:
    json.dump({'device': device(), 'results': results}, f, indent=1)


if __name__ == '__main__':
  main()
