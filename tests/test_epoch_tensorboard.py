"""EpochTensorBoard writes what Keras's TensorBoard writes, once an epoch,
and skips Keras's work at batch ends that writes nothing."""

import collections
import glob
import os

import keras
import numpy as np
import tensorflow as tf

from generic_trainer.loop.handlers.epoch_tensorboard import EpochTensorBoard


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
