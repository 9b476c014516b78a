"""Where a training thread is, read from its Python frames.

A `run_fn` has no handler of ours, so nothing of ours counts its steps;
but every Keras training goes through `Model.fit` and `Model.evaluate`,
whose loops keep the epoch and the step in local variables (Keras 3's
trainers on every backend: `epoch`, `end_step`; tf.keras 2's: `epoch`,
`step`). Reading them from the thread's frames (`sys._current_frames`, or
the frame a signal interrupted) tells where any training is, a TrainSpec's
or a `run_fn`'s, without a callback and at no cost while nobody asks: the
stall watch (`launch.stall_watch`) asks once a second, SIGTERM
(`preemption`) once.

`waits_in` says what a thread that makes no progress is doing: the
innermost frame, and the innermost frame of user code (outside the
standard library, the installed packages and this package).
"""

import linecache
import os
import sys
import sysconfig
from typing import NamedTuple, Optional

# The loops' functions, and the files they live in.
_LOOPS = ('fit', 'evaluate')
_KERAS_FILES = (f'{os.sep}keras{os.sep}', f'{os.sep}tf_keras{os.sep}')
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_DIRS = tuple(
    {os.path.abspath(p) + os.sep for p in (
        sysconfig.get_paths()['stdlib'], sysconfig.get_paths()['purelib'],
        sysconfig.get_paths()['platlib'])} | {_PACKAGE_DIR + os.sep})


class Position(NamedTuple):
  """Where Keras's loops are.

  Attributes:
    epoch: The epoch of `fit`, from 1; None outside `fit`.
    step: The train batches of that epoch done (or in progress); None
      before the first.
    eval_batch: The batches of the evaluation pass in progress, or None
      when not evaluating.
    eval_steps: The evaluation pass's `steps` (`validation_steps`); None
      when it reads its dataset to the end.
    eval_pass: Tells one evaluation pass from the next (its frame's id).
    steps_per_epoch: `fit`'s `steps_per_epoch`; None when an epoch reads
      its dataset to the end (or outside `fit`).
  """
  epoch: Optional[int]
  step: Optional[int]
  eval_batch: Optional[int]
  eval_steps: Optional[int]
  eval_pass: Optional[int]
  steps_per_epoch: Optional[int] = None

  @property
  def evaluating(self) -> bool:
    return self.eval_pass is not None

  def describe(self) -> str:
    """'epoch 2, step 14', 'epoch 1, evaluating batch 3 after step 5',
    'evaluating batch 3' (an `evaluate` of its own)."""
    parts = []
    if self.epoch is not None:
      parts.append(f'epoch {self.epoch}')
      if not self.evaluating:
        parts.append(f'step {self.step}' if self.step else
                     'before its first step')
    if self.evaluating:
      after = (f' after step {self.step}' if self.epoch is not None and
               self.step else '')
      parts.append(f'evaluating batch {self.eval_batch or 1}{after}')
    return ', '.join(parts)


def of_thread(ident: Optional[int]):
  """The innermost frame of the thread `ident`, or None when it ended."""
  if ident is None:
    return None
  return sys._current_frames().get(ident)  # pylint: disable=protected-access


def keras_position(frame) -> Optional[Position]:
  """Where the Keras loops of the stack ending at `frame` are, or None
  when no `fit` or `evaluate` of Keras is on it."""
  fit = evaluate = None
  while frame is not None:
    code = frame.f_code
    if code.co_name in _LOOPS and any(d in code.co_filename
                                      for d in _KERAS_FILES):
      if code.co_name == 'evaluate' and evaluate is None:
        evaluate = frame
      elif code.co_name == 'fit' and fit is None:
        fit = frame
    frame = frame.f_back
  if fit is None and evaluate is None:
    return None
  epoch = step = eval_batch = eval_steps = eval_pass = None
  steps_per_epoch = None
  if fit is not None:
    names = fit.f_locals
    if isinstance(names.get('epoch'), int):
      epoch = names['epoch'] + 1
    step = _batches(names)
    given = names.get('steps_per_epoch')
    steps_per_epoch = given if isinstance(given, int) else None
  if evaluate is not None:
    names = evaluate.f_locals
    eval_batch = _batches(names)
    steps = names.get('steps')
    eval_steps = steps if isinstance(steps, int) else None
    eval_pass = id(evaluate)
  return Position(epoch, step, eval_batch, eval_steps, eval_pass,
                  steps_per_epoch)


def _batches(names) -> Optional[int]:
  """The batches a Keras loop has reached, from its locals."""
  for name in ('end_step', 'step'):  # Keras 3; tf.keras 2.
    value = names.get(name)
    if isinstance(value, int):
      return value + 1
  return None


def waits_in(frame) -> str:
  """'in time.sleep(3600) at on_test_batch_end (/m.py:12)'; with the
  innermost frame of a library when it is not the user's: '... in
  Event.wait (threading.py:607), called from ...'."""
  if frame is None:
    return 'in code that has ended'
  inner = _where(frame)
  user = frame
  while user is not None and user.f_code.co_filename.startswith(
      _LIBRARY_DIRS + ('<',)):
    user = user.f_back
  if user is None or user is frame:
    return f'at {inner}'
  return f'at {inner}, called from {_where(user)}'


def _where(frame) -> str:
  code = frame.f_code
  line = linecache.getline(code.co_filename, frame.f_lineno).strip()
  return (f'{code.co_name} ({code.co_filename}:{frame.f_lineno}'
          + (f': `{line}`' if line else '') + ')')


def debugged(frame) -> bool:
  """Whether a debugger (pdb, an IDE) traces the stack ending at `frame`:
  a person may be stepping through it, so it is not stalled."""
  while frame is not None:
    if frame.f_trace is not None:
      return True
    frame = frame.f_back
  return False
