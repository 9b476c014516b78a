"""Where a GPU is present: trains the penguin TrainSpec and a synthetic
model on it and on the CPU, and reports throughput and whether every op of
the synthetic training step ran on the GPU. Without one it says so and
reports the CPU numbers alone (the script runs everywhere).

    python scripts/gpu_check.py [--steps 200] [--json out.json]

The penguin TrainSpec is trained by the `generic-trainer` command
(module_files/penguin_spec.py on the penguin CSV), once with
CUDA_VISIBLE_DEVICES='' and once as the machine is; its figure is steps a
second of the whole command, start-up included. The synthetic model (a
4-layer MLP, batch 1024, 256 features) is timed in this process after a
warm-up; "every op on the GPU" is a training step run under
`tf.device('/GPU:0')` with soft placement off, which raises if any op has
no GPU kernel.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _penguin(steps: int, gpu: bool) -> dict:
  sys.path.insert(0, REPO)
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as work:
    write_penguin_csv(os.path.join(work, 'data'))
    (csv,) = [os.path.join(work, 'data', n)
              for n in os.listdir(os.path.join(work, 'data'))]
    env = dict(os.environ)
    if not gpu:
      env['CUDA_VISIBLE_DEVICES'] = ''
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, '-m', 'generic_trainer', '--module-file',
         os.path.join(REPO, 'module_files', 'penguin_spec.py'),
         '--train-data', csv, '--output-dir', os.path.join(work, 'out'),
         '--steps', str(steps), '--progress', 'lines'],
        env=env, capture_output=True, text=True, check=False, cwd=REPO)
    seconds = time.monotonic() - start
  return {'ok': result.returncode == 0, 'seconds': round(seconds, 1),
          'steps_per_s': round(steps / seconds, 1),
          **({} if result.returncode == 0 else
             {'error': result.stderr[-2000:]})}


def _synthetic(tf, device: str, steps: int) -> dict:
  import keras  # pylint: disable=g-import-not-at-top
  with tf.device(device):
    model = keras.Sequential([keras.Input((256,))] + [
        keras.layers.Dense(1024, activation='relu') for _ in range(4)] + [
            keras.layers.Dense(10)])
    model.compile(optimizer='adam', loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True))
    x = tf.random.normal((1024, 256))
    y = tf.random.uniform((1024,), maxval=10, dtype=tf.int32)
    model.train_on_batch(x, y)  # warm-up: tracing and allocation
    start = time.monotonic()
    for _ in range(steps):
      model.train_on_batch(x, y)
    seconds = time.monotonic() - start
  return {'steps_per_s': round(steps / seconds, 1),
          'examples_per_s': round(steps * 1024 / seconds)}


def _every_op_on_gpu(tf) -> str:
  tf.config.set_soft_device_placement(False)
  try:
    _synthetic(tf, '/GPU:0', 2)
    return 'yes'
  except Exception as e:  # pylint: disable=broad-except
    return f'no: {type(e).__name__}: {str(e)[:300]}'
  finally:
    tf.config.set_soft_device_placement(True)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=200)
  parser.add_argument('--json', default=None)
  args = parser.parse_args(argv)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sys.path.insert(0, REPO)
  from generic_trainer.system import machine  # pylint: disable=g-import-not-at-top
  gpus = tf.config.list_physical_devices('GPU')
  report = {'tensorflow': tf.__version__,
            'built_with_cuda': tf.test.is_built_with_cuda(),
            'gpus_tensorflow_sees': [g.name for g in gpus],
            'gpus_the_driver_lists': machine.gpus(),
            'synthetic': {'cpu': _synthetic(tf, '/CPU:0', args.steps)},
            'penguin_spec': {'cpu': _penguin(args.steps, gpu=False)}}
  if gpus:
    report['synthetic']['gpu'] = _synthetic(tf, '/GPU:0', args.steps)
    report['synthetic']['gpu_over_cpu'] = round(
        report['synthetic']['gpu']['steps_per_s'] /
        report['synthetic']['cpu']['steps_per_s'], 2)
    report['synthetic']['every_op_on_gpu'] = _every_op_on_gpu(tf)
    report['penguin_spec']['gpu'] = _penguin(args.steps, gpu=True)
  else:
    report['gpu'] = ('no GPU found: TensorFlow sees none; CPU figures only, '
                     'GPU figures not measured')
  text = json.dumps(report, indent=2)
  print(text)
  if args.json:
    with open(args.json, 'w') as f:
      f.write(text + '\n')
  return 0


if __name__ == '__main__':
  sys.exit(main())
