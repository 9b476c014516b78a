"""The penguin spec for the chaos test (tests/test_chaos.py): a tiny model
that records every example it trains on, per worker and per step.

The examples carry a `row_id` (tests/test_chaos.py writes them). The
spec's `train_step` writes, before each step's update, the ids of the
worker's slice of the global batch to
`custom_config['record_dir']/ids/s{STEP}-w{WORKER}.json` (atomically:
temporary file, fsync, rename), with the group's size and the time; and
each worker's pid to `pids/w{WORKER}`. Its handler's `get_state` (which
every resume checkpoint calls) lingers 0.2 s on the chief after writing
`saving` (the step), so the test can kill a worker while the checkpoint is
being written.
"""

import os
import sys
import time

import keras
import tensorflow as tf

from generic_trainer.system import atomic_files

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), 'module_files'))
import penguin_spec  # pylint: disable=g-import-not-at-top,wrong-import-position

FEATURES = penguin_spec.FEATURES
ID = 'row_id'


class _Saving(keras.callbacks.Callback):
  """Marks (on the chief) and slows each checkpoint save a little."""

  def __init__(self, directory, worker):
    super().__init__()
    self.directory = directory
    self.worker = worker
    self.saves = 0

  def on_train_begin(self, logs=None):
    atomic_files.write_text(
        os.path.join(self.directory, 'pids',
                     f'w{self.worker}'), str(os.getpid()))

  def get_state(self):
    self.saves += 1
    if self.worker == 0 and self.saves > 1:  # The first call only checks.
      atomic_files.write_text(os.path.join(self.directory, 'saving'),
                              f'{self.saves} {time.time()}')
      time.sleep(0.2)
    return {}

  def set_state(self, state):
    del state


class ChaosSpec(penguin_spec.PenguinSpec):
  feature_keys = FEATURES + [ID]
  batch_size = 12  # The global batch: 228 train rows are 19 of them.
  epochs = 2
  checkpoint = {'every_steps': 2}

  def build_model(self):
    inputs = {k: keras.Input(shape=(1,), name=k) for k in FEATURES + [ID]}
    x = keras.layers.Concatenate()([inputs[k] for k in FEATURES])
    x = x + keras.ops.multiply(inputs[ID], 0.0)  # Read, not used.
    x = keras.layers.BatchNormalization(momentum=0.9)(x)
    x = keras.layers.Dense(8, activation='relu')(x)
    outputs = keras.layers.Dense(self.num_classes, activation='softmax')(x)
    return keras.Model(inputs, outputs)

  def handlers(self):
    directory = self.fn_args.custom_config['record_dir']
    for sub in ('ids', 'pids'):
      os.makedirs(os.path.join(directory, sub), exist_ok=True)
    return [_Saving(directory, self.fn_args.worker_index)]

  def train_step(self, model, data):
    tf.py_function(self._record, [data[0][ID], model.optimizer.iterations],
                   [])
    return type(model).train_step(model, data)

  def _record(self, ids, step):
    args = self.fn_args
    atomic_files.write_json(
        os.path.join(args.custom_config['record_dir'], 'ids',
                     f's{int(step)}-w{args.worker_index}.json'),
        {'n': args.num_workers, 'w': args.worker_index, 't': time.time(),
         'ids': sorted(int(i) for i in ids.numpy().ravel())})
