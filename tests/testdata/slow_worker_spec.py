"""The penguin spec for a killed worker: ~0.1 s a step, a checkpoint every
2 steps, and a record of each worker in custom_config['record_dir']:
`worker-I.pid` (its process) and lines `PID.RUN WORKER STEP` in
`steps.log` (RUN drawn by each process: two containers' processes may have
one PID)."""

import os
import sys
import time
import uuid

import keras

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), 'module_files'))
import penguin_spec  # pylint: disable=g-import-not-at-top,wrong-import-position

_RUN = uuid.uuid4().hex[:8]


class _Record(keras.callbacks.Callback):

  def __init__(self, directory, worker):
    super().__init__()
    self.directory = directory
    self.worker = worker

  def on_train_begin(self, logs=None):
    with open(os.path.join(self.directory, f'worker-{self.worker}.pid'),
              'w') as f:
      f.write(str(os.getpid()))

  def on_train_batch_end(self, batch, logs=None):
    time.sleep(0.1)
    step = int(self.model.optimizer.iterations.numpy())
    with open(os.path.join(self.directory, 'steps.log'), 'a') as f:
      f.write(f'{os.getpid()}.{_RUN} {self.worker} {step}\n')


class SlowWorkerPenguinSpec(penguin_spec.PenguinSpec):
  epochs = 4
  checkpoint = {'every_steps': 2}

  def handlers(self):
    directory = self.fn_args.custom_config['record_dir']
    os.makedirs(directory, exist_ok=True)
    return [_Record(directory, self.fn_args.worker_index)]
