"""EpochTensorBoard: Keras's TensorBoard handler, without its cost per batch
and without importing TensorBoard's Python package for its scalars."""

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

# What TensorBoard's scalar plugin marks its summaries with
# (`tensorboard/plugins/scalar/metadata.py`: plugin "scalars", content a
# `ScalarPluginData` of version 0, which serializes to no bytes).
_SCALARS = summary_pb2.SummaryMetadata.PluginData(plugin_name='scalars',
                                                  content=b'')


class EpochTensorBoard(keras.callbacks.TensorBoard):
  """Keras's `TensorBoard` handler as the built-in handlers use it: its
  summaries once an epoch (`update_freq='epoch'`, Keras's default), the
  same files and the same events.

  With `update_freq='epoch'`, Keras sets no summary writer for the batches
  (`_push_writer` returns at once), yet its `on_train_batch_end` still calls
  `summary.scalar` for each value of the logs at every batch end, which then
  writes nothing: 0.16 ms a call (the median) on 2 AMD EPYC cores, 1.7% of
  the benchmark's fit at 31 steps per execution (`python -m
  benchmarks.handler_cost`; Keras 3.12 to 3.15,
  `keras/src/callbacks/tensorboard.py`). This one calls Keras's only while
  there is something to do there: the train graph to write at the first
  batch end, a batch-level frequency, or a profile to trace. Where a Keras
  release names those attributes otherwise, it calls Keras's every time.

  Its scalars are written as TensorBoard's `tf.summary.scalar` writes them
  (see `Summaries`), without that function's first call importing
  TensorBoard's summary package (its histogram plugin, its TensorFlow stub,
  fsspec's entry points): 50-190 ms of the first epoch, once per process.
  """

  @property
  def summary(self):
    return SUMMARIES

  def on_train_batch_end(self, batch, logs=None):
    if (self.update_freq != 'epoch' or
        getattr(self, '_should_write_train_graph', True) or
        getattr(self, '_should_trace', True)):
      super().on_train_batch_end(batch, logs)


class Summaries:
  """`tf.summary` as Keras's TensorBoard handler calls it, with `scalar`
  writing the event TensorBoard's `scalar` writes: the value as a float32
  tensor, under the same tag and name scope, marked for the scalar plugin
  (TensorBoard's `summary/v2` `scalar`; Keras writes its model summary the
  same way, with `tf.summary.write` and its own plugin's metadata). What
  else the handler calls (histograms, images, writers, traces) is
  `tf.summary`'s own."""

  def __getattr__(self, name):
    return getattr(tf.summary, name)

  @staticmethod
  def scalar(name, data, step=None, description=None):
    """Writes a scalar summary, as `tf.summary.scalar` does; False when no
    default writer is set."""
    metadata = summary_pb2.SummaryMetadata(
        summary_description=description or '', plugin_data=_SCALARS)
    with tf.summary.experimental.summary_scope(
        name, 'scalar_summary', values=[data, step]) as (tag, _):
      tf.debugging.assert_scalar(data)
      return tf.summary.write(tag=tag, tensor=tf.cast(data, tf.float32),
                              step=step, metadata=metadata)


SUMMARIES = Summaries()
