"""MonitorCheck: fails the run when a monitored metric never appears."""

import keras

from generic_trainer.errors import SpecError


class MonitorCheck(keras.callbacks.Callback):
  """Raises SpecError at the end of the first epoch if a metric that early
  stopping or the best-only checkpoint monitors is not in the logs.

  Keras's own handlers only warn and train on, never stopping early and
  never saving; the spec's checks refuse most such names before training
  (`checks.check_monitors`); this catches the rest (models with several
  outputs, whose metric names Keras prefixes) after the first eval.
  """

  def __init__(self, monitors):
    """`monitors`: {what monitors it, e.g. 'early_stopping': metric name}."""
    super().__init__()
    self.monitors = dict(monitors)
    self._checked = False

  def on_train_begin(self, logs=None):
    self._checked = False

  def on_epoch_end(self, epoch, logs=None):
    if self._checked:
      return
    self._checked = True
    logs = logs or {}
    missing = {who: name for who, name in self.monitors.items()
               if name not in logs}
    if missing:
      raise SpecError(
          f'{_describe(missing)}, which the training does not log. Expected '
          f'one of: {", ".join(sorted(logs))}. Set monitor to one of '
          "those ('val_' names need eval data). Received: "
          f'{", ".join(sorted(missing.values()))}.')


def _describe(missing) -> str:
  return '; '.join(f'TrainSpec.{who} monitors {name!r}'
                   for who, name in sorted(missing.items()))
