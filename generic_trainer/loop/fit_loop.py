"""The fit loop: Keras's `model.fit`, with GenericTrainer's handlers.

We build on `model.fit` rather than write a second loop: Keras already
accumulates metrics over the whole eval pass (so AUC is computed on all eval
examples, not averaged per batch), calls callbacks at every hook, and lets a
model override `train_step`. What we add is the set of handlers every run
gets, a clear error on a non-finite loss, and a result record.
"""

import collections.abc
import contextlib
import math
import os
import sys
import time
import types
from typing import Any, Dict, List, Optional, Sequence

import attr
import tensorflow as tf

from generic_trainer.errors import NonFiniteLossError, PreemptedError
from generic_trainer.errors import SpecError
from generic_trainer.loop.handlers.checkpoint import checkpoint_handler
from generic_trainer.loop.handlers.epoch_tensorboard import EpochTensorBoard
from generic_trainer.loop.handlers.heartbeat import Heartbeat
from generic_trainer.loop.handlers.history_file import HistoryFile
from generic_trainer.loop.handlers.log_lines import LogLines
from generic_trainer.loop.handlers.nan_guard import NaNGuard
from generic_trainer.loop.spec_checks import monitors
from generic_trainer.loop.handlers.monitor_check import MonitorCheck
from generic_trainer.loop import datasets
from generic_trainer.loop import spec_checks
from generic_trainer.loop import on_jax
from generic_trainer import resume
from generic_trainer.loop import fit_schedule
from generic_trainer.loop.handlers.handler_list import HandlerList
from generic_trainer.loop.handlers.resume_checkpoint import ResumeCheckpoint
from generic_trainer.system import preemption
from generic_trainer.system import progress
from generic_trainer.system import versions
from generic_trainer.loop.handlers.preemption_stop import PreemptionStop
from generic_trainer.trainspec import member_checks
from absl import logging
import keras

from generic_trainer.keys import CHECKPOINT_DIR, HISTORY_FILE  # pylint: disable=g-bad-import-order
from generic_trainer.keys import RESUME_SCRATCH_DIR, TENSORBOARD_DIR  # pylint: disable=g-bad-import-order


def default_handlers(spec, run_dir: str, steps_per_epoch: Optional[int],
                     interactive: bool) -> List[Any]:
  """The built-in handlers, in the order they are called."""
  built_in = [NaNGuard(),
              HistoryFile(os.path.join(run_dir, HISTORY_FILE)),
              *_tensorboard(os.path.join(run_dir, TENSORBOARD_DIR))]
  if spec.checkpoint is not None:
    if not isinstance(spec.checkpoint, dict):
      raise SpecError(
          'TrainSpec.checkpoint must be a dict such as {"every_epochs": 1} or '
          f'None. Received: checkpoint={spec.checkpoint!r}. Set checkpoint '
          'to a dict of the checkpoint handler\'s arguments.')
    try:
      built_in.append(checkpoint_handler(
          os.path.join(run_dir, CHECKPOINT_DIR), steps_per_epoch,
          **spec.checkpoint))
    except TypeError as e:
      raise SpecError(
          f'TrainSpec.checkpoint has a key the checkpoint handler does not '
          f'take: {e}. Expected keys among every_epochs, every_steps, '
          f'best_only, monitor, mode. Received: {spec.checkpoint!r}. Remove '
          'or rename the key.') from e
  if spec.early_stopping is not None:
    try:
      built_in.append(keras.callbacks.EarlyStopping(**spec.early_stopping))
    except TypeError as e:
      raise SpecError(
          f'TrainSpec.early_stopping has an argument EarlyStopping does not '
          f'take: {e}. Expected keys among monitor, min_delta, patience, '
          f'mode, baseline, restore_best_weights, start_from_epoch. '
          f'Received: {spec.early_stopping!r}. Remove or rename the '
          'argument.') from e
  if monitors(spec):
    built_in.insert(1, MonitorCheck(monitors(spec)))
  if not interactive:
    built_in.append(LogLines())
  return built_in


def _tensorboard(folder: str) -> List[Any]:
  """Keras's TensorBoard handler writing to `folder`; none, saying so,
  where `tensorboard` is not installed (TensorFlow 2.20 and later no longer
  install it, and every summary write would fail without it)."""
  if versions.tensorboard_installed():
    return [EpochTensorBoard(folder)]
  progress.log().info(
      'TensorBoard summaries: none written, since the package tensorboard '
      'is not installed (TensorFlow 2.20 and later do not install it); '
      'install it (pip install tensorboard, or the extra '
      'tfx-generic-trainer[tensorboard]) to have them in %s', folder)
  return []


def compile_model(spec, strategy=None, steps_per_epoch: Optional[int] = None,
                  validation_steps: Optional[int] = None):
  """Builds the spec's model, optimizer, loss and metrics and compiles them,
  under `strategy.scope()` when given (as distributed training needs).

  The step counts are those `fit` will get: steps_per_execution must divide
  them (see `steps_per_execution`).
  """
  distributed = (strategy is not None and
                 strategy is not tf.distribute.get_strategy())
  jax = on_jax.active()
  spec_checks.check_train_step(spec, keras.backend.backend())
  spec_checks.check_heads(spec, keras.backend.backend())
  scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
  with scope:
    model = spec.model
    if spec.train_step is not None:
      step = on_jax.train_step(spec) if jax else _checked_train_step(spec)
      model.train_step = types.MethodType(step, model)
    optimizer, loss, metrics = spec.optimizer, spec.loss, spec.metrics
    try:
      model.compile(optimizer=optimizer, loss=loss,
                    loss_weights=spec.loss_weights, metrics=metrics,
                    steps_per_execution=steps_per_execution(
                        spec, steps_per_epoch, validation_steps, distributed))
    except SpecError:
      raise  # Ours already (a member's value, steps_per_execution).
    except (ValueError, TypeError) as e:
      raise member_checks.compile_error(spec, e, optimizer, loss,
                                        metrics) from e
  return model


def _checked_train_step(spec):
  """The spec's train_step, refusing (when Keras traces it) a step that
  returns no logs: Keras would fail deep inside its loop."""

  def train_step(model, data):
    logs = spec.train_step(model, data)
    if not isinstance(logs, collections.abc.Mapping) or not logs:
      raise SpecError(
          'TrainSpec.train_step must return the logs dict, e.g. '
          "{'loss': loss} (or {m.name: m.result() for m in model.metrics}). "
          f'Received: {type(logs).__name__} {logs!r:.100}. Return the dict '
          'at the end of train_step.')
    return logs

  return train_step


AUTO_STEPS_PER_EXECUTION = 32
_BATCH_HOOKS = ('on_batch_begin', 'on_batch_end', 'on_train_batch_begin',
                'on_train_batch_end', 'on_test_batch_begin',
                'on_test_batch_end')


def steps_per_execution(spec, steps_per_epoch: Optional[int] = None,
                        validation_steps: Optional[int] = None,
                        distributed: bool = False) -> int:
  """The spec's steps_per_execution, or the automatic choice for None.

  Keras 3.12 runs whole executions past `steps_per_epoch` and
  `validation_steps` (with 32 per execution, 5 steps train 32), so the value
  must divide both: a given one is checked, the automatic one is the largest
  divisor of both up to 32. Under a distribution strategy the automatic one
  is 1: Keras 3.12's multi-step loop fails on distributed iterators. The
  same rule holds on JAX (see `on_jax` for what it saves there).
  """
  counts = [n for n in (steps_per_epoch, validation_steps) if n]
  value = spec.steps_per_execution
  if value is not None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
      raise SpecError('TrainSpec.steps_per_execution must be a positive int '
                      f'or None. Received: steps_per_execution={value!r}. '
                      'Set it to a positive int, or None to pick one.')
    if any(n % value for n in counts):
      raise SpecError(
          f'TrainSpec.steps_per_execution={value} does not divide the steps '
          f'per epoch ({steps_per_epoch}) and eval steps ({validation_steps})'
          '; Keras would run past them. Expected a divisor of both. '
          f'Received: {value}. Use a divisor of both, or None to pick one.')
    return value
  # Keras's ModelCheckpoint miscounts the first execution's steps (it starts
  # from batch 0, not -1), so step checkpoints need one step per execution.
  every_steps = isinstance(spec.checkpoint, dict) and spec.checkpoint.get(
      'every_steps')
  if (distributed or every_steps or
      any(_has_batch_hooks(h) for h in spec.user_handlers)):
    return 1
  common = math.gcd(*counts) if counts else AUTO_STEPS_PER_EXECUTION
  return max(d for d in range(1, AUTO_STEPS_PER_EXECUTION + 1)
             if common % d == 0)


def _has_batch_hooks(handler) -> bool:
  for name in _BATCH_HOOKS:
    method = getattr(handler, name, None)
    if getattr(method, '__func__', method) is not getattr(
        keras.callbacks.Callback, name):
      return True
  return False


@attr.s(frozen=True)
class FitInputs:
  """What `fit` trains on, and for how long.

  Attributes:
    train: The train dataset: (features, label) batches.
    evaluation: The eval dataset, read to its end (or `validation_steps`)
      after every epoch.
    epochs: Number of epochs.
    steps_per_epoch: Train steps per epoch; None reads `train` once.
    validation_steps: Eval steps per epoch; None reads all of `evaluation`.
  """
  train = attr.ib()
  evaluation = attr.ib()
  epochs = attr.ib(type=int)
  steps_per_epoch = attr.ib(type=Optional[int])
  validation_steps = attr.ib(type=Optional[int], default=None)


def fit(spec, inputs: FitInputs, fn_args, interactive: Optional[bool] = None,
        extra_handlers: Sequence[Any] = ()) -> Dict[str, Any]:
  """Trains `spec.model` (compiled by `compile_model`); returns the record.

  Args:
    spec: The TrainSpec; its handlers run after the built-in ones.
    inputs: The datasets and the schedule.
    fn_args: Where the run writes (`model_run_dir`) and resumes from
      (`checkpoint_dir`, None for no resume), and whether this process is
      the chief (`is_chief`), which alone writes the resume checkpoints.
    interactive: Keras's progress bar (True) or LogLines (False); None means
      a progress bar when stdout is a terminal.
    extra_handlers: The caller's callbacks, called after the built-in
      handlers and before the spec's own.

  With a `checkpoint_dir`, `ResumeCheckpoint` saves the weights, the
  optimizer, the position (epoch, batch, step) and the handlers' state there
  after every epoch and, with checkpoint `every_steps`, every N steps; a
  killed training started again continues at the step of its last
  checkpoint (`fit_schedule`), and the record says where
  (`resumed_from_epoch`, `_batch`, `_step`). After a SIGTERM
  (`generic_trainer.system.preemption`), training stops at the next step
  (`PreemptionStop`), which `ResumeCheckpoint` saves.

  Raises:
    NonFiniteLossError: the loss became NaN/Inf; the message says where.
    CheckpointError: a handler's state cannot be saved, or the checkpoint
      cannot be read.
    PreemptedError: SIGTERM stopped the training; nothing was exported.
  """
  model = spec.model
  if interactive is None:
    interactive = sys.stdout.isatty()
  handlers = default_handlers(spec, fn_args.model_run_dir,
                              inputs.steps_per_epoch, interactive)
  handlers += list(extra_handlers)
  heartbeat = Heartbeat()
  if heartbeat.path:  # A parent watches this training (workers, a child).
    handlers.append(heartbeat)  # Before the user's, which may block.
  handlers += list(spec.user_handlers)
  stop = PreemptionStop(is_chief=fn_args.is_chief,
                        num_workers=getattr(fn_args, 'num_workers', 1))
  handlers.append(stop)
  checkpoint_dir = fn_args.checkpoint_dir
  point = resume.latest(checkpoint_dir)
  if checkpoint_dir:
    handlers.append(ResumeCheckpoint(
        checkpoint_dir, handlers, fn_args.is_chief,
        every_steps=(spec.checkpoint or {}).get('every_steps'),
        steps_per_epoch=inputs.steps_per_epoch, resume_from=point,
        scratch_dir=os.path.join(fn_args.model_run_dir, RESUME_SCRATCH_DIR)))
  calls = fit_schedule.fit_calls(inputs.epochs, inputs.steps_per_epoch, point)
  if point:
    logging.info('Resuming at %s, from the checkpoint in %s.',
                 resume.describe_point(point), checkpoint_dir)
    _build_compiled_state(model, inputs.train)
  container = HandlerList(handlers, model, 1 if interactive else 0,
                          epochs=inputs.epochs, steps=inputs.steps_per_epoch)
  started = time.monotonic()
  container.begin()
  with datasets.read_to_its_end(), (
      preemption.watching(lambda: _where_saved(checkpoint_dir))
      if stop.watches else contextlib.nullcontext()):
    for call in calls:
      container.batch_offset = call.batch_offset
      model.fit(inputs.train.skip(call.skip_batches) if call.skip_batches
                else inputs.train, validation_data=inputs.evaluation,
                initial_epoch=call.initial_epoch, epochs=call.epochs,
                steps_per_epoch=call.steps_per_epoch,
                validation_steps=inputs.validation_steps,
                # The dataset is shuffled as it is read (`datasets`); Keras
                # ignores `shuffle` for a dataset, and 3.15 warns of it.
                shuffle=False,
                callbacks=container, verbose=1 if interactive else 0)
      if model.stop_training:
        break
  container.finish()
  elapsed = time.monotonic() - started
  # `stop.stopping` also where another worker of the group got the signal.
  if preemption.requested() or stop.stopping:
    raise PreemptedError(_preempted_message(checkpoint_dir, fn_args.is_chief),
                         reached=_stopped_at(checkpoint_dir, model))
  guard = next(h for h in handlers if isinstance(h, NaNGuard))
  if guard.failure:
    if checkpoint_dir:  # The last checkpoint may hold diverged weights.
      resume.remove(checkpoint_dir)
    raise NonFiniteLossError(
        f'{guard.failure} Training stopped and nothing was exported. Lower '
        'the learning rate, normalise the features, or look for NaN/Inf in '
        'the data.')
  history = next(h for h in handlers if isinstance(h, HistoryFile))
  last = {k: float(v) for k, v in (history.epochs[-1] if history.epochs
                                   else {}).items() if k != 'epoch'}
  point = point or {'epoch': 0, 'batch': 0, 'step': 0}
  return {
      'resumed_from_epoch': point['epoch'],
      'resumed_from_batch': point['batch'],
      'resumed_from_step': point['step'],
      'train': {k: v for k, v in last.items() if not k.startswith('val_')},
      'eval': {k[4:]: v for k, v in last.items() if k.startswith('val_')},
      'steps': int(model.optimizer.iterations.numpy()),
      'epochs': len(history.epochs),
      'training_time_s': round(elapsed, 3),
  }


def _where_saved(checkpoint_dir: Optional[str]) -> str:
  """'step 7 (epoch 2, batch 2) in CHECKPOINT_DIR', or ''."""
  try:
    point = resume.latest(checkpoint_dir) if checkpoint_dir else None
  except Exception:  # pylint: disable=broad-except
    return ''
  return f'{resume.describe_point(point)} in {checkpoint_dir}' if point else ''


def _stopped_at(checkpoint_dir: Optional[str], model) -> str:
  """'at step 7 (epoch 2, batch 2)': where a SIGTERM stopped the training
  (the step its resume checkpoint saved, else the optimizer's step)."""
  point = resume.latest(checkpoint_dir) if checkpoint_dir else None
  if point is not None:
    return f'at {resume.describe_point(point)}'
  return f'at step {int(model.optimizer.iterations.numpy())}'


def _preempted_message(checkpoint_dir: Optional[str], is_chief: bool) -> str:
  """What PreemptedError says: where training stopped, what was saved."""
  point = resume.latest(checkpoint_dir) if checkpoint_dir else None
  if point is None:
    return ('SIGTERM stopped the training at a step boundary, and no resume '
            'checkpoint could be written (this training has no '
            'checkpoint_dir); nothing was exported or published.')
  who = '' if is_chief else ' (written by the chief)'
  return (f'SIGTERM stopped the training at {resume.describe_point(point)} '
          f'and saved that step in the resume checkpoint in {checkpoint_dir}'
          f'{who}; nothing was exported or published. Run the same training '
          'again (the same command, or the pipeline on the same inputs): it '
          f"resumes at step {point['step']}, repeating no step.")


def _build_compiled_state(model, dataset) -> None:
  """Builds the compiled metrics and the optimizer before a checkpoint
  restores their values, as Keras's `fit` does under a distribution
  strategy (`_symbolic_build`, on the data's shapes); otherwise the first
  train step builds them, after the restore, at zero."""
  build = getattr(model, '_symbolic_build', None)
  if build is not None:
    # A batch of 1, not of unknown size: on JAX each unknown dimension is a
    # symbol of its own, and the labels' would not match the outputs'.
    batch = tf.nest.map_structure(
        lambda s: tf.TensorSpec([1] + s.shape[1:], s.dtype)
        if s.shape.rank else s, dataset.element_spec)
    # Keras's JAX trainer has no `distribute_strategy`.
    strategy = getattr(model, 'distribute_strategy', None)
    with (strategy.scope() if strategy is not None else
          contextlib.nullcontext()):
      build(data_batch=batch)
