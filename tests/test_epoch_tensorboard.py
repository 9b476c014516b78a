"""EpochTensorBoard writes what Keras's TensorBoard writes, once an epoch,
and skips Keras's work at batch ends that writes nothing; its scalars are
TensorBoard's own events, written without TensorBoard's summary package."""

import collections
import glob
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from conftest import command_env
from generic_trainer.loop.handlers.epoch_tensorboard import EpochTensorBoard
from generic_trainer.loop.handlers.epoch_tensorboard import SUMMARIES


def _events(folder):
  """{subfolder: Counter of (kind, tag)} of the event files under `folder`
  (a graph, or a summary value by its tag)."""
  found = {}
  for path in glob.glob(os.path.join(folder, '*', 'events.out.tfevents.*')):
    counts = found.setdefault(os.path.basename(os.path.dirname(path)),
                              collections.Counter())
    for event in tf.compat.v1.train.summary_iterator(path):
      if event.graph_def:
        counts[('graph', '')] += 1
      for value in event.summary.value:
        counts[('value', value.tag)] += 1
  return found


def _train(handler):
  # No global seed: it would stay set for the tests after this one.
  model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
  model.compile('sgd', 'sparse_categorical_crossentropy', metrics=['accuracy'],
                steps_per_execution=2)
  x = np.random.rand(64, 3).astype('float32')
  y = np.random.randint(0, 2, 64)
  model.fit(x, y, batch_size=8, epochs=3, validation_data=(x, y), verbose=0,
            callbacks=[handler])


class _Counting(EpochTensorBoard):
  """Counts the batch ends that reach Keras's own handler."""

  reached = 0

  def on_train_batch_end(self, batch, logs=None):
    keras_own = keras.callbacks.TensorBoard.on_train_batch_end

    def counted(this, *args, **kwargs):
      _Counting.reached += 1
      return keras_own(this, *args, **kwargs)

    keras.callbacks.TensorBoard.on_train_batch_end = counted
    try:
      super().on_train_batch_end(batch, logs)
    finally:
      keras.callbacks.TensorBoard.on_train_batch_end = keras_own


def test_the_same_events_as_keras_tensorboard(tmp_path):
  _train(keras.callbacks.TensorBoard(str(tmp_path / 'keras')))
  _train(EpochTensorBoard(str(tmp_path / 'ours')))
  keras_events, ours = _events(tmp_path / 'keras'), _events(tmp_path / 'ours')
  assert set(keras_events) == {'train', 'validation'}
  assert ours == keras_events
  # Once an epoch, and the model (Keras 3's 'keras' summary) once.
  assert keras_events['train'][('value', 'epoch_loss')] == 3
  assert keras_events['train'][('value', 'keras')] == 1


def test_keras_own_batch_end_runs_only_to_write_the_graph(tmp_path):
  _Counting.reached = 0
  _train(_Counting(str(tmp_path / 'ours')))
  assert _Counting.reached == 1  # The first batch end: the train graph.
  _Counting.reached = 0
  _train(_Counting(str(tmp_path / 'no-graph'), write_graph=False))
  assert _Counting.reached == 0
  _Counting.reached = 0
  _train(_Counting(str(tmp_path / 'by-batch'), update_freq='batch'))
  assert _Counting.reached == 3 * 64 // 8 // 2  # Every execution's end.


def _values(folder):
  """The summary values of the event files under `folder`, wall times and
  file versions left out: [(step, Summary.Value)]."""
  found = []
  for path in sorted(glob.glob(os.path.join(folder, 'events.out.tfevents.*'))):
    for event in tf.compat.v1.train.summary_iterator(path):
      found += [(event.step, value) for value in event.summary.value]
  return found


def test_its_scalars_are_tensorboards_own_events(tmp_path):
  """`Summaries.scalar` writes, byte for byte, the summary values
  TensorBoard's `tf.summary.scalar` writes (tag, name scope, plugin
  metadata, float32 tensor, description), and TensorBoard's own reader
  sees them as scalars."""
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top  # why: the reader only this test needs
  for folder, write in (('tensorboard', tf.summary.scalar),
                        ('ours', SUMMARIES.scalar)):
    with tf.summary.create_file_writer(str(tmp_path / folder)).as_default():
      write('epoch_loss', 0.25, step=0)
      write('epoch_loss', np.float64(0.125), step=1)
      write('count', tf.constant(3, tf.int64), step=1, description='rows')
      with tf.name_scope('validation'):
        write('auc', tf.constant(0.5), step=2)
  theirs, ours = _values(tmp_path / 'tensorboard'), _values(tmp_path / 'ours')
  assert len(theirs) == 4
  assert [(s, v.SerializeToString()) for s, v in ours] == [
      (s, v.SerializeToString()) for s, v in theirs]
  reader = event_accumulator.EventAccumulator(
      str(tmp_path / 'ours'), size_guidance={event_accumulator.TENSORS: 0})
  reader.Reload()
  assert reader.PluginTagToContent('scalars').keys() == {
      'epoch_loss', 'count', 'validation/auc'}
  assert [float(tf.make_ndarray(e.tensor_proto))
          for e in reader.Tensors('epoch_loss')] == [0.25, 0.125]
  with pytest.raises(ValueError):  # As TensorBoard's: a scalar or nothing.
    SUMMARIES.scalar('x', [1.0, 2.0], step=0)


def test_a_training_writes_its_summaries_without_importing_tensorboard(
    tmp_path):
  """In a fresh process, a fit with EpochTensorBoard writes its epoch
  scalars and never imports TensorBoard's summary package (Keras's own
  handler imports it at its first scalar)."""
  script = textwrap.dedent('''
      import sys
      import keras, numpy as np
      from generic_trainer.loop.handlers.epoch_tensorboard import (
          EpochTensorBoard)
      model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
      model.compile('sgd', 'sparse_categorical_crossentropy')
      x = np.zeros((16, 3), 'float32'); y = np.zeros(16, 'int64')
      model.fit(x, y, epochs=2, validation_data=(x, y), verbose=0,
                callbacks=[EpochTensorBoard(sys.argv[1])])
      print(sorted(m for m in sys.modules if m.startswith('tensorboard.s')))
      ''')
  process = subprocess.run(
      [sys.executable, '-c', script, str(tmp_path / 'logs')],
      env=command_env(), capture_output=True, text=True, timeout=300,
      check=False)
  assert process.returncode == 0, process.stderr[-3000:]
  assert process.stdout.strip().splitlines()[-1] == '[]'
  train = _values(tmp_path / 'logs' / 'train')
  assert [(s, v.tag) for s, v in train if v.tag == 'epoch_loss'] == [
      (0, 'epoch_loss'), (1, 'epoch_loss')]
