"""Event handlers of the fit loop: Keras callbacks, one class per file.

Handlers use Keras's hook names throughout: `on_train_begin/end`,
`on_epoch_begin/end`, `on_train_batch_begin/end` (and `on_test_*` for the
eval pass), each taking `(index, logs=None)`. Any `keras.callbacks.Callback`
is a handler; a TrainSpec adds its own with `handlers()`. Keras's own
EarlyStopping, ModelCheckpoint, TensorBoard and ProgbarLogger are used as
they are; the classes here are the ones Keras lacks:
`nan_guard.NaNGuard`, `history_file.HistoryFile`, `log_lines.LogLines`,
`first_step.FirstStepTime`, and `checkpoint.checkpoint_handler` (Keras's
ModelCheckpoint configured from a spec).

May import: `keras` and the top-level base modules.
"""
