"""HandlerList: the handlers of one training, across one or more `fit` calls.

A training resumed in the middle of an epoch needs two `model.fit` calls:
one for the rest of that epoch, one for the epochs after (Keras's `fit`
starts epochs at their first batch). The handlers must still see one
training: `on_train_begin` once before the first call, `on_train_end` once
after the last, and the batches of the resumed epoch numbered from where
it resumed, as an uninterrupted training numbers them.
"""

import keras


class HandlerList(keras.callbacks.CallbackList):
  """Keras's CallbackList (with History and, when `verbose`, the progress
  bar), whose training begins with `begin()` and ends with `finish()`.

  `fit`'s own `on_train_begin`/`on_train_end` calls are not forwarded.
  `batch_offset` is added to the index of every train batch: set it to the
  batches already trained in the epoch a `fit` call resumes.
  """

  def __init__(self, handlers, model, verbose: int, epochs: int, steps):
    super().__init__(handlers, add_history=True, add_progbar=verbose != 0,
                     model=model, verbose=verbose, epochs=epochs,
                     steps=steps)
    self.batch_offset = 0
    self._last_logs = None

  def begin(self) -> None:
    """Begins the training: every handler's `on_train_begin`."""
    super().on_train_begin()

  def finish(self) -> None:
    """Ends the training: every handler's `on_train_end`, with the last
    epoch's logs."""
    super().on_train_end(self._last_logs)

  def on_train_begin(self, logs=None):
    pass  # A `fit` call begins; the training began with `begin()`.

  def on_train_end(self, logs=None):
    self._last_logs = logs  # A `fit` call ends; `finish()` ends training.

  def on_train_batch_begin(self, batch, logs=None):
    super().on_train_batch_begin(batch + self.batch_offset, logs)

  def on_train_batch_end(self, batch, logs=None):
    super().on_train_batch_end(batch + self.batch_offset, logs)
