"""StallWatch: ends a training whose processes are all alive but none
progresses (a hung group, a handler that waits forever).

Each process that trains for this one writes its step count into a
heartbeat file (`loop.handlers.heartbeat`, told where by
`keys.HEARTBEAT_FILE_ENV`). Progress is a change in any heartbeat file or,
until the first heartbeat (start-up, a `run_fn` that is no TrainSpec and
so writes none), new output in a worker's log. When none comes for the
stall limit (`keys.STALL_LIMIT_S`, 30 min; `keys.STALL_LIMIT_ENV` changes
it, 0 turns the watch off) the parent ends every process and raises
TrainingProcessError naming the process that stalled (the one with the
fewest steps, then the one silent longest) and its step.

A child process writes its output to the parent's own stdout, which the
parent cannot watch: for it, the clock starts at its first heartbeat.

A training in its own process, which no parent watches (the command, an
executor's `Do`, the notebook's `Estimator`: no `keys.HEARTBEAT_FILE_ENV`),
is watched from a thread of that process (`watching_here`), whatever it
runs: a `run_fn` has no handler of ours, so the watch reads what every
training shows. Once a second it reads where Keras's loops are
(`system.training_position`: the epoch, the step, the evaluation batch;
nothing for a custom loop) and the process's CPU time. Progress is a new
position, or more than `BUSY_CPU_S` of CPU in that second (start-up,
parsing, a custom loop): a training that waits (a handler or `run_fn`
waiting on a lock, a queue, a sleep, another process) does neither; one
that computes forever is not what it catches. After the stall limit
without progress it says where the training is and what it waits in; on
the main thread it then ends the training as a parent would: a SIGALRM
raises TrainingProcessError where it waits (nothing is published, the
resume checkpoint keeps the last step saved). Where it cannot (another
thread trains, a debugger traces it, the signal's handler is not ours,
the error was caught or native code never returns: said
`UNANSWERED_S` after the signal), it logs the same message as a warning,
again after every further limit. It stands down
once SIGTERM arrived (`preemption` ends the training then). A reading
costs ~0.1 ms (measured: 0.09 ms median on a Keras fit, 2 cores).

It also says, without ending anything, when an evaluation pass with no
`steps` (`validation_steps=None`: `fn_args.eval_steps` unset) has run for
the stall limit: on a dataset that repeats, as TFXIO's do unless
`num_epochs` is set, it never ends; that is progress, not a stall. And
when one epoch of `fit` with no `steps_per_epoch` (`fn_args.train_steps`
unset) has taken more than `ENDLESS_PASSES` times as many steps as the
train data has rows (`_HereWatch.reads` names the files; they are counted
once, in a thread of their own, when such an epoch is first seen): a
step reads at least one row, so that is at least `ENDLESS_PASSES` passes
over the data in one epoch, whatever the batch size, and the train
dataset repeats. It is said once at once, then again every stall limit.
"""

import contextlib
import os
import signal
import threading
import time
from typing import Dict, Iterator, List, Optional, Tuple

from generic_trainer import errors
from generic_trainer.keys import HEARTBEAT_FILE_ENV
from generic_trainer.keys import STALL_LIMIT_ENV, STALL_LIMIT_S
from generic_trainer.data import tfrecords
from generic_trainer.system import paths
from generic_trainer.system import preemption
from generic_trainer.system import progress
from generic_trainer.system import training_position

HEARTBEAT_FILE = 'heartbeat'
# Steps of one epoch past this many times the train rows (at least as many
# passes over the data, whatever the batch size) are said as endless.
ENDLESS_PASSES = 10


def limit() -> float:
  """The stall limit in seconds (0: no watch), from `keys.STALL_LIMIT_ENV`.

  Raises:
    InvalidArgumentError: the variable is not a number of seconds >= 0.
  """
  given = os.environ.get(STALL_LIMIT_ENV)
  if given is None or not given.strip():
    return STALL_LIMIT_S
  try:
    value = float(given)
  except ValueError:
    value = -1.0
  if not value >= 0 or value == float('inf'):
    raise errors.InvalidArgumentError(
        f'{STALL_LIMIT_ENV} must be the seconds a training may go without a '
        'new step before it is ended as hung. Expected a number >= 0 (0: '
        f'never end it). Received: {STALL_LIMIT_ENV}={given!r}. Set it to '
        f'a number of seconds, or unset it for the default, '
        f'{STALL_LIMIT_S:.0f}. Nothing was started.')
  return value


class StallWatch:
  """Watches the heartbeat files (and, until the first beat, the logs) of
  the processes of one training.

  Args:
    names: What each process is called in messages ('worker 1').
    heartbeats: Each one's heartbeat file.
    logs: Each one's log file, or None where the output goes elsewhere.
    seconds: The stall limit (0: never stalls); default `limit()`.
  """

  def __init__(self, names: List[str], heartbeats: List[str],
               logs: List[Optional[str]], seconds: Optional[float] = None):
    self.names = names
    self.heartbeats = heartbeats
    self.logs = logs
    self.seconds = limit() if seconds is None else seconds
    now = time.monotonic()
    self._seen: List[Tuple[Optional[str], int]] = [(None, 0)] * len(names)
    self._changed = [now] * len(names)
    self._progress = now
    self._beating = False

  def stalled(self) -> Optional[str]:
    """None while the training progresses; else a sentence saying who
    stalled, at which step, for how long (the caller stops everything)."""
    if not self.seconds:
      return None
    now = time.monotonic()
    for i, (beat, log) in enumerate(zip(self.heartbeats, self.logs)):
      state = (_read(beat), _size(log) if not self._beating else 0)
      if state != self._seen[i]:
        self._seen[i], self._changed[i] = state, now
        self._progress = now
        self._beating = self._beating or state[0] is not None
    if not self._beating and not any(self.logs):
      self._progress = now  # Nothing to watch before the first step.
    if now - self._progress < self.seconds:
      return None
    return self._describe(now)

  def _describe(self, now: float) -> str:
    steps = [_steps(seen) for seen, _ in self._seen]
    order = sorted(range(len(self.names)), key=lambda i: (
        -1 if steps[i] is None else steps[i], self._changed[i], i))
    who = order[0]
    def where(i):
      if steps[i] is None:
        return 'before its first step'
      eval_part = (self._seen[i][0] or '').partition(' eval ')[2]
      return (f'at step {steps[i]}' + (f' (evaluating, batch {eval_part})'
                                       if eval_part else ''))
    others = '; '.join(f'{self.names[i]} {where(i)}' for i in order[1:])
    return (f'{self.names[who]} stalled {where(who)}: no new step'
            f'{"" if self._beating else " and no output"} for '
            f'{now - self._progress:.0f} s' +
            (f' ({others})' if others else ''))


def _read(path: str) -> Optional[str]:
  try:
    with open(path) as f:
      return f.read().strip() or None
  except OSError:
    return None


def _size(path: Optional[str]) -> int:
  try:
    return os.path.getsize(path) if path else 0
  except OSError:
    return 0


def _steps(beat: Optional[str]) -> Optional[int]:
  try:
    return int(beat.split()[0]) if beat else None
  except ValueError:
    return None


def message(stalled: str, what: str, seconds: float) -> str:
  """The TrainingProcessError's message for a `stalled` sentence of
  `what` ('the local 2-worker training')."""
  return (
      f'{stalled[0].upper()}{stalled[1:]}, so every process of {what} was '
      f'ended. Expected a new training step at least every {seconds:.0f} s '
      f'({STALL_LIMIT_ENV}). Received: none for {seconds:.0f} s while every '
      'process was alive: a hung group (a worker waiting on another, a '
      'collective that never completes) or user code that blocks (a '
      'handler or run_fn waiting on something). Look at the output above '
      "(prefixed '[worker i]' for local workers) for what it waits on; if "
      f'a step can take longer, raise {STALL_LIMIT_ENV} (0 turns the watch '
      'off). Nothing was published; the resume checkpoint keeps the last '
      'step saved.')


TICK_S = 1.0  # How often the watch of a training in its own process reads.
# CPU seconds a second that count as work: a process that waits uses ~0
# (measured: a Keras evaluation blocked in a callback, 0.000-0.001 s).
BUSY_CPU_S = 0.01
# A training interrupted for a stall that still waits this long after (the
# signal's handler never ran: native code) is said in a warning at once.
UNANSWERED_S = 5.0


@contextlib.contextmanager
def watching_here(what: str) -> Iterator[None]:
  """Watches the training that the block runs in this thread (see the
  module docstring), unless a parent watches it (`HEARTBEAT_FILE_ENV` is
  set) or the stall limit is 0.

  Args:
    what: What trains, for messages ('the run_fn', 'TrainSpec PenguinSpec').

  Yields:
    The watch, whose `reads(train_files)` says what the training reads;
    None when nothing watches here.

  Raises:
    InvalidArgumentError: `STALL_LIMIT_ENV` is not a number of seconds.
    TrainingProcessError: (from where the block waits) it stalled.
  """
  seconds = limit()
  if not seconds or os.environ.get(HEARTBEAT_FILE_ENV):
    yield None
    return
  watch = _HereWatch(what, seconds)
  watch.start()
  try:
    yield watch
  finally:
    watch.stop()


class _HereWatch:
  """The watch of one training in this process, from a daemon thread."""

  def __init__(self, what: str, seconds: float):
    self.what = what
    self.seconds = seconds
    self.ident = threading.get_ident()
    self.main = threading.current_thread() is threading.main_thread()
    self.message: Optional[str] = None  # What the SIGALRM raises.
    self._stopped = threading.Event()
    self._lock = threading.Lock()  # No signal once the block has ended.
    self._previous = None
    self._train_files: Optional[List[str]] = None
    self._rows: Optional[int] = None  # Counted once, when first needed.
    self._counting = False
    if self.main and hasattr(signal, 'pthread_kill'):
      self._previous = signal.signal(signal.SIGALRM, self._on_alarm)

  def reads(self, train_files: Optional[List[str]]) -> None:
    """Says the train files (patterns) of the training: an epoch without
    `steps_per_epoch` that takes more steps than `ENDLESS_PASSES` times
    their rows is said (see the module docstring)."""
    self._train_files = list(train_files or []) or None

  def _train_rows(self) -> Optional[int]:
    """The train rows once counted (in a thread of their own, started at
    the first call); None until then, or when no files were named or they
    cannot be read."""
    if self._rows is None and self._train_files and not self._counting:
      self._counting = True
      threading.Thread(target=self._count, daemon=True,
                       name='generic-trainer-train-rows').start()
    return self._rows

  def _count(self) -> None:
    try:
      self._rows = tfrecords.count(paths.expand(self._train_files))
    except Exception:  # pylint: disable=broad-except
      pass  # Unreadable here: the training's own reading says why.

  def start(self) -> None:
    threading.Thread(target=self._run, daemon=True,
                     name='generic-trainer-stall-watch').start()

  def stop(self) -> None:
    with self._lock:
      self._stopped.set()
    if self._previous is not None and (
        signal.getsignal(signal.SIGALRM) == self._on_alarm):
      signal.signal(signal.SIGALRM, self._previous)

  def _on_alarm(self, signum, frame):
    if self.message is None:  # Not ours: the handler we replaced.
      if callable(self._previous):
        self._previous(signum, frame)
      return
    raise errors.TrainingProcessError(self.message)

  def _run(self) -> None:
    now = time.monotonic()
    self._cpu, self._position = time.process_time(), None
    self._progressed = self._said = self._said_eval = now
    self._cpu_then = self._cpu  # At the last progress.
    self._evaluating = (None, now)  # (the evaluation pass, since when)
    self._said_train = -float('inf')  # The endless training, last said.
    self._warned = False  # Said in a warning since it was interrupted.
    while not self._stopped.wait(TICK_S):
      if preemption.requested() or not self._tick():
        return

  def _tick(self) -> bool:
    """One reading; False once the thread has ended. The frame is held
    only while it runs (a frame holds its locals)."""
    now, used = time.monotonic(), time.process_time()
    frame = training_position.of_thread(self.ident)
    if frame is None:
      return False
    at = training_position.keras_position(frame)
    if at != self._position or used - self._cpu >= BUSY_CPU_S:
      self._progressed, self._cpu_then = now, used
    self._cpu, self._position = used, at
    if at is not None and at.evaluating and at.eval_steps is None:
      if self._evaluating[0] != at.eval_pass:
        self._evaluating = (at.eval_pass, now)
      elif (now - self._evaluating[1] >= self.seconds and
            now - self._said_eval >= self.seconds):
        self._said_eval = now
        progress.log().warning(endless_evaluation_message(
            self.what, at, now - self._evaluating[1], self.seconds))
    if at is not None and not at.evaluating and at.epoch is not None and (
        at.steps_per_epoch is None and at.step):
      rows = self._train_rows()
      if rows and at.step > ENDLESS_PASSES * rows and (
          now - self._said_train >= self.seconds):
        self._said_train = now
        progress.log().warning(endless_training_message(
            self.what, at, rows, self.seconds))
    ended_in_vain = (self.message is not None and not self._warned and
                     self._progressed < self._said and
                     now - self._said >= min(UNANSWERED_S, self.seconds))
    if now - max(self._progressed, self._said) < self.seconds and (
        not ended_in_vain):
      return True
    self._said = now
    message = stall_message(self.what, at, frame, now - self._progressed,
                            used - self._cpu_then, self.seconds)
    why_not = self._why_not_ended(frame)
    self._warned = why_not is not None
    if why_not is None:
      with self._lock:
        if not self._stopped.is_set():
          self.message = message
          signal.pthread_kill(self.ident, signal.SIGALRM)
    else:
      progress.log().warning(
          f'{message} It is not ended from here: {why_not}; this is said '
          f'again after every {self.seconds:.0f} s without progress.')
    return True

  def _why_not_ended(self, frame) -> Optional[str]:
    """None when the watch can end the training; else why not."""
    if not self.main:
      return 'it trains outside the main thread, which alone takes signals'
    if self.message is not None:
      return ('it was interrupted once already, and waits still (native '
              'code that never returns to Python, or code that caught the '
              'error)')
    if training_position.debugged(frame):
      return 'a debugger traces it'
    if signal.getsignal(signal.SIGALRM) != self._on_alarm:
      return 'SIGALRM has a handler that is not the watch\'s'
    return None


def stall_message(what: str, at, frame, seconds_still: float,
                  cpu_s: float, limit_s: float) -> str:
  """What a training in its own process that stalled says (see
  `watching_here`): where it is, what it waits in, the setting."""
  where = f'at {at.describe()}' if at is not None else (
      "outside Keras's fit and evaluate")
  return (
      f'{what[0].upper()}{what[1:]} made no progress for '
      f'{seconds_still:.0f} s, {where}: its thread waits '
      f'{training_position.waits_in(frame)}, and the process used '
      f'{cpu_s:.2f} s of CPU in that time. Expected a new training step or '
      'evaluation batch, or work on the CPU, at least every '
      f'{limit_s:.0f} s ({STALL_LIMIT_ENV}). Received: none for '
      f'{seconds_still:.0f} s: it waits on something (a handler or run_fn '
      'waiting on a lock, a queue, a sleep, another process or the '
      'network). Look at where it waits, above; if a step can take longer, '
      f'raise {STALL_LIMIT_ENV} (0 turns the watch off). A stalled training '
      'is ended: nothing is published; a resume checkpoint keeps the last '
      'step it saved.')


def endless_evaluation_message(what: str, at, seconds: float,
                               limit_s: float) -> str:
  """What the watch says of an evaluation pass without `steps` that has
  run for the stall limit."""
  return (
      f'{what[0].upper()}{what[1:]} has evaluated for {seconds:.0f} s '
      f'({at.describe()}) with validation_steps=None, so the pass reads its '
      'dataset to the end, and a dataset that repeats (TFXIO\'s datasets '
      'unless num_epochs is set, or .repeat()) has none. Expected an '
      'evaluation pass of a set number of batches, or an eval dataset that '
      f'ends. Received: validation_steps=None and batch {at.eval_batch} of '
      f'one pass. Set eval_args=trainer_pb2.EvalArgs(num_steps=N) on the '
      'component (fn_args.eval_steps; the command: --eval-steps N), or pass '
      'validation_steps to model.fit. It is not ended (it progresses); '
      f'this is said again every {limit_s:.0f} s ({STALL_LIMIT_ENV}).')


def endless_training_message(what: str, at, rows: int,
                             limit_s: float) -> str:
  """What the watch says of an epoch of `fit` without `steps_per_epoch`
  that has taken more than `ENDLESS_PASSES` times the train rows in
  steps."""
  return (
      f'{what[0].upper()}{what[1:]} has taken {at.step} train steps in '
      f'epoch {at.epoch} with steps_per_epoch=None, more than '
      f'{ENDLESS_PASSES} times the {rows} rows of its train data: at least '
      f'{at.step // rows} passes over the data in one epoch, whatever the '
      'batch size, so its train dataset repeats (TFXIO\'s datasets unless '
      'num_epochs is set, or .repeat()) and the epoch never ends. Expected '
      'a training of a set number of steps, or a train dataset that ends. '
      f'Received: steps_per_epoch=None and step {at.step} of epoch '
      f'{at.epoch}. Set train_args=trainer_pb2.TrainArgs(num_steps=N) on '
      'the component (fn_args.train_steps; the command: --steps N), or '
      'pass steps_per_epoch to model.fit. It is not ended (it progresses); '
      'this is said again '
      f'every {limit_s:.0f} s ({STALL_LIMIT_ENV}).')
