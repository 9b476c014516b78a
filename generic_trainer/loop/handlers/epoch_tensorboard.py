"""EpochTensorBoard: Keras's TensorBoard handler, without its cost per batch."""

import keras


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
  """

  def on_train_batch_end(self, batch, logs=None):
    if (self.update_freq != 'epoch' or
        getattr(self, '_should_write_train_graph', True) or
        getattr(self, '_should_trace', True)):
      super().on_train_batch_end(batch, logs)
