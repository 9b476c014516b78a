"""Event handlers of the fit loop: Keras callbacks, one class per file.

Handlers use Keras's hook names throughout: `on_train_begin/end`,
`on_epoch_begin/end`, `on_train_batch_begin/end` (and `on_test_*` for the
eval pass), each taking `(index, logs=None)`. Any `keras.callbacks.Callback`
is a handler; a TrainSpec adds its own with `handlers()`. Keras's own
EarlyStopping, ModelCheckpoint, TensorBoard and ProgbarLogger are used as
they are (TensorBoard as `epoch_tensorboard.EpochTensorBoard`, without its
cost per batch when it writes once an epoch); the classes here are the
ones Keras lacks:
`nan_guard.NaNGuard`, `history_file.HistoryFile`, `log_lines.LogLines`,
`first_step.FirstStepTime`, `heartbeat.Heartbeat` (the progress a
parent watches for a stall), `trainjob_progress.TrainJobProgress` (the
progress, seconds left and metrics a Kubeflow TrainJob's status shows,
sent by its chief), `monitor_check.MonitorCheck`,
`checkpoint.checkpoint_handler` (Keras's ModelCheckpoint configured from a
spec), `preemption_stop.PreemptionStop` (the stop after a SIGTERM), and
those of resuming:
`resume_checkpoint.ResumeCheckpoint` (saves and restores the training's
state), `handler_state` (the get_state/set_state protocol, and Keras's
handlers' state) and `handler_list.HandlerList` (the handlers of one
training across the `fit` calls of a resume).

May import: `keras`, `numpy` and the top-level base modules.
"""
