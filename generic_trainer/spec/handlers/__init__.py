"""Event handlers of the fit loop: Keras callbacks, one class per file.

Handlers use Keras's hook names throughout: `on_train_begin/end`,
`on_epoch_begin/end`, `on_train_batch_begin/end` (and `on_test_*` for the
eval pass), each taking `(index, logs=None)`. Any `keras.callbacks.Callback`
is a handler; a TrainSpec adds its own with `handlers()`. Keras's own
EarlyStopping, ModelCheckpoint, TensorBoard and ProgbarLogger are used as
they are; the classes here are the ones Keras lacks.
"""

from generic_trainer.spec.handlers.checkpoint import checkpoint_handler
from generic_trainer.spec.handlers.first_step import FirstStepTime
from generic_trainer.spec.handlers.history_file import HistoryFile
from generic_trainer.spec.handlers.log_lines import LogLines
from generic_trainer.spec.handlers.nan_guard import NaNGuard

__all__ = ['FirstStepTime', 'HistoryFile', 'LogLines', 'NaNGuard',
           'checkpoint_handler']
