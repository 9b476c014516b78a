"""The fit loop: Keras's `model.fit`, with GenericTrainer's handlers.

We build on `model.fit` rather than write a second loop: Keras already
accumulates metrics over the whole eval pass (so AUC is computed on all eval
examples, not averaged per batch), calls callbacks at every hook, and lets a
model override `train_step`. What we add is the set of handlers every run
gets, a clear error on a non-finite loss, and a result record.
"""

import os
import sys
import time
import types
import warnings
from typing import Any, Dict, List, Optional

from generic_trainer.errors import NonFiniteLossError, SpecError

HISTORY_FILE = 'history.json'
CHECKPOINT_DIR = 'checkpoints'
TENSORBOARD_DIR = 'tensorboard'


def default_handlers(spec, run_dir: str, steps_per_epoch: Optional[int],
                     interactive: bool) -> List[Any]:
  """The built-in handlers, in the order they are called."""
  import keras  # pylint: disable=g-import-not-at-top
  from generic_trainer import handlers  # pylint: disable=g-import-not-at-top
  built_in = [handlers.NaNGuard(),
              handlers.HistoryFile(os.path.join(run_dir, HISTORY_FILE)),
              keras.callbacks.TensorBoard(os.path.join(run_dir,
                                                       TENSORBOARD_DIR))]
  if spec.checkpoint is not None:
    if not isinstance(spec.checkpoint, dict):
      raise SpecError(
          'TrainSpec.checkpoint must be a dict such as {"every_epochs": 1} or '
          f'None. Received: checkpoint={spec.checkpoint!r}.')
    built_in.append(handlers.checkpoint_handler(
        os.path.join(run_dir, CHECKPOINT_DIR), steps_per_epoch,
        **spec.checkpoint))
  if spec.early_stopping is not None:
    try:
      built_in.append(keras.callbacks.EarlyStopping(**spec.early_stopping))
    except TypeError as e:
      raise SpecError(
          f'TrainSpec.early_stopping has an argument EarlyStopping does not '
          f'take: {e}. Expected keys among monitor, min_delta, patience, '
          f'mode, baseline, restore_best_weights, start_from_epoch. '
          f'Received: {spec.early_stopping!r}.') from e
  if not interactive:
    built_in.append(handlers.LogLines())
  return built_in


def fit(spec, train, evaluation, epochs: int, steps_per_epoch: Optional[int],
        validation_steps: Optional[int], run_dir: str,
        interactive: Optional[bool] = None) -> Dict[str, Any]:
  """Compiles and trains `spec.model`; returns the final metrics record.

  Raises:
    NonFiniteLossError: the loss became NaN/Inf; the message says where.
  """
  model = spec.model
  if spec.train_step is not None:
    model.train_step = types.MethodType(
        lambda m, data: spec.train_step(m, data), model)
  model.compile(optimizer=spec.optimizer, loss=spec.loss,
                metrics=spec.metrics)
  if interactive is None:
    interactive = sys.stdout.isatty()
  handlers = default_handlers(spec, run_dir, steps_per_epoch, interactive)
  handlers += list(spec.handlers())
  started = time.monotonic()
  with warnings.catch_warnings():
    # The eval split is read to its end each epoch, on purpose; Keras warns
    # when a dataset of unknown length runs out.
    warnings.filterwarnings('ignore', message='Your input ran out of data')
    history = model.fit(train, validation_data=evaluation, epochs=epochs,
                        steps_per_epoch=steps_per_epoch,
                        validation_steps=validation_steps, callbacks=handlers,
                        verbose=1 if interactive else 0)
  elapsed = time.monotonic() - started
  guard = handlers[0]
  if guard.failure:
    raise NonFiniteLossError(
        f'{guard.failure} Training stopped and nothing was exported. Lower '
        'the learning rate, normalise the features, or look for NaN/Inf in '
        'the data.')
  last = {k: float(v[-1]) for k, v in history.history.items() if v}
  return {
      'train': {k: v for k, v in last.items() if not k.startswith('val_')},
      'eval': {k[4:]: v for k, v in last.items() if k.startswith('val_')},
      'steps': int(model.optimizer.iterations.numpy()),
      'epochs': len(history.epoch),
      'training_time_s': round(elapsed, 3),
  }
