"""SIGTERM as a preemption: stop at the next step, save it, end.

Kubernetes, spot machines and most schedulers end a process with SIGTERM,
then SIGKILL after a grace period (30 s by default). While `handling()` is
active (the `generic-trainer` command, an executor's `Do`, a child training
process), SIGTERM only sets a flag and forwards the signal to the child
processes `track`ed here; it raises nothing. What happens next depends on
where the process is:

  - training steps (inside `watching()`, i.e. the TrainSpec fit loop):
    `loop.handlers.preemption_stop` reads the flag at the next step
    boundary and stops the training as `model.stop_training` does, the
    resume checkpoint handler saves that step, and the fit loop raises
    PreemptedError: nothing is exported or published. Where no step
    boundary comes (user code blocks: a handler waiting on something),
    the training is interrupted `keys.PREEMPTION_STEP_WAIT_S` after the
    signal (`keys.PREEMPTION_STEP_WAIT_ENV` changes it): a SIGALRM raises
    PreemptedError where the main thread is, which leaves with the last
    resume checkpoint, through every cleanup (the cache folders of TMPDIR),
    and the command exits 143. Where even that does not end the block
    (native code that never returns to Python, user code that swallows
    the error), the process removes its scratch folders and ends itself
    (`os._exit(143)`) `keys.PREEMPTION_EXIT_S` after the signal, inside
    the grace period;
  - a parent waiting for its child or local workers: it keeps waiting
    (at most `keys.PREEMPTION_WAIT_S`) while they save, then raises
    PreemptedError;
  - anything else (a `run_fn`'s own loop, start-up, reading the data, the
    export): inside `stopping_anywhere()` (the command, an executor's
    `Do`), SIGTERM raises PreemptedError where the main thread is, saying
    where the run was (`training_position`: a `run_fn`'s epoch and step
    in Keras's `fit`) and its last resume checkpoint; the block's cleanup
    runs and its owner says how to resume (the command's last line), with
    the same step wait and last resort as above. Elsewhere (a child
    process, whose parent says it) the process ends by SIGTERM at once:
    nothing trained is lost.

Why not `tf.distribute.experimental.PreemptionCheckpointHandler`: it
saves a `tf.train.Checkpoint` of its own format and works only with
MultiWorkerMirroredStrategy (and TPU) in TF 2.16, whereas a resume here
also carries the position in the epoch, the metrics' running values and
the handlers' state (`loop.handlers.resume_checkpoint`), on every strategy
and on JAX. The flag and the existing resume checkpoint give one format
and one resume path for kills and preemptions alike.
"""

import contextlib
import os
import signal
import sys
import threading
import time
import weakref
from typing import Callable, Iterator, Optional

from generic_trainer.system import atomic_files
from generic_trainer.system import scratch
from generic_trainer.system import training_position
from generic_trainer.errors import PreemptedError
from generic_trainer.keys import PREEMPTED_EXIT_CODE, PREEMPTION_EXIT_S
from generic_trainer.keys import PREEMPTION_STEP_WAIT_ENV
from generic_trainer.keys import PREEMPTION_STEP_WAIT_S

_requested = threading.Event()
_children: 'weakref.WeakSet' = weakref.WeakSet()
_watchers = 0
_previous = signal.SIG_DFL
_installed = False
_checkpoint: Optional[Callable[[], str]] = None  # Where the last step is.
_deadline: Optional[threading.Event] = None  # Set: the block has ended.
_alarm_before = signal.SIG_DFL  # SIGALRM's handler before `_arm`.
_anywhere = 0  # Depth of `stopping_anywhere` blocks.
_training: Optional[str] = None  # What trains now ('the run_fn').


def requested() -> bool:
  """Whether this process got SIGTERM while `handling()` was active."""
  return _requested.is_set()


@contextlib.contextmanager
def handling() -> Iterator[None]:
  """While the block runs, SIGTERM is a preemption (see the module
  docstring); the previous handler is put back after. Outside the main
  thread, where Python cannot install signal handlers, it does nothing."""
  global _previous, _installed
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  _requested.clear()
  previous = signal.signal(signal.SIGTERM, _on_sigterm)
  _previous, _installed = previous, True
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)
    _previous, _installed = signal.SIG_DFL, False
    _disarm()


@contextlib.contextmanager
def stopping_anywhere() -> Iterator[None]:
  """While the block runs (inside `handling()`), SIGTERM where no training
  step reads the flag and no child process trains raises PreemptedError
  where the main thread is (see the module docstring); the caller catches
  it. Its `reached` says where the run was. Outside the main thread,
  where Python takes no signal, it does nothing."""
  global _anywhere
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  _anywhere += 1
  try:
    yield
  finally:
    _anywhere -= 1
    if not _watchers:
      _disarm()


@contextlib.contextmanager
def training(what: str, checkpoint: Optional[Callable[[], str]] = None
             ) -> Iterator[None]:
  """Says, for a SIGTERM during the block, what trains (`what`: 'the
  run_fn', 'TrainSpec PenguinSpec') and where its last resume checkpoint
  is (`checkpoint()`: 'step 7 (epoch 2, batch 2) in /ckpt', or '')."""
  global _training, _checkpoint
  before = _training, _checkpoint
  _training, _checkpoint = what, checkpoint
  try:
    yield
  finally:
    _training, _checkpoint = before


def step_wait_s() -> float:
  """How long after SIGTERM a training may go without a step boundary:
  `keys.PREEMPTION_STEP_WAIT_ENV` when it is a number of seconds from 0.1
  to `PREEMPTION_EXIT_S` - 2, else `keys.PREEMPTION_STEP_WAIT_S`."""
  try:
    value = float(os.environ.get(PREEMPTION_STEP_WAIT_ENV, ''))
  except ValueError:
    return PREEMPTION_STEP_WAIT_S
  return value if 0.1 <= value <= PREEMPTION_EXIT_S - 2 else (
      PREEMPTION_STEP_WAIT_S)


@contextlib.contextmanager
def watching(checkpoint: Optional[Callable[[], str]] = None
             ) -> Iterator[None]:
  """While the block runs, training steps read the flag: SIGTERM does not
  end the process; a block that reaches no step boundary is interrupted
  (see the module docstring).

  Args:
    checkpoint: Says where the last resume checkpoint is, for the message
      of an interrupted block ('step 7 (epoch 2, batch 2) in /ckpt').

  It installs the handler again: TensorFlow's coordination service
  (MultiWorkerMirroredStrategy) replaces it with its own when it starts
  (`preemption_notifier.cc`, "SIGTERM caught"), which would make SIGTERM
  do nothing here.
  """
  global _watchers, _checkpoint
  main = threading.current_thread() is threading.main_thread()
  if _installed and main:
    signal.signal(signal.SIGTERM, _on_sigterm)
  _watchers += 1
  before, _checkpoint = _checkpoint, checkpoint or _checkpoint
  try:
    yield
  finally:
    _watchers -= 1
    _checkpoint = before
    if not _watchers:
      _disarm()


def track(process) -> None:
  """Forwards SIGTERM to `process` (a `subprocess.Popen`) while it runs."""
  _children.add(process)


def write_stop_step(path: str, batches: int) -> None:
  """Writes the step a local group stops at (`batches` ends of the fit
  loop), atomically: a worker reads the old state or the new."""
  atomic_files.write_text(path, str(batches))


def read_stop_step(path: str):
  """The step `write_stop_step` wrote, or None when there is none yet."""
  try:
    with open(path) as f:
      return int(f.read())
  except (OSError, ValueError):
    return None


def _on_sigterm(signum, frame):  # pylint: disable=unused-argument
  _requested.set()
  live = [p for p in list(_children) if p.poll() is None]
  for process in live:
    try:
      process.send_signal(signal.SIGTERM)
    except OSError:
      pass
  if _watchers:
    _arm()
    return
  if live:
    return
  if _anywhere:  # Stop where the main thread is; the caller says where.
    _arm()
    reached = _reached(frame)
    raise PreemptedError(_stopped_message(reached), reached=reached)
  # Nothing trains here: end as SIGTERM would have (nothing is lost).
  previous = _previous
  if previous is signal.SIG_IGN:
    return
  if callable(previous):
    previous(signum, frame)
    return
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  os.kill(os.getpid(), signal.SIGTERM)


def _arm() -> None:
  """After SIGTERM in a training (main thread, in the signal handler):
  SIGALRM in `step_wait_s()`, and the last resort at PREEMPTION_EXIT_S."""
  global _deadline, _alarm_before
  if _deadline is not None or not hasattr(signal, 'setitimer'):
    return
  _deadline = threading.Event()
  wait = step_wait_s()
  _alarm_before = signal.signal(signal.SIGALRM, _interrupt(wait))
  signal.setitimer(signal.ITIMER_REAL, wait)
  threading.Thread(target=_last_resort, args=(_deadline, time.monotonic()),
                   daemon=True, name='preemption-exit').start()


def _disarm() -> None:
  global _deadline
  if _deadline is None:
    return
  _deadline.set()
  _deadline = None
  if threading.current_thread() is threading.main_thread():
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, _alarm_before)  # A stall watch's, say.


def _reached(frame) -> str:
  """Where the run was when SIGTERM interrupted `frame` (the main
  thread's): 'at epoch 1, evaluating batch 812 after step 5 of the
  run_fn's Keras fit', 'in the run_fn, outside Keras's fit', or outside
  any training."""
  position = training_position.keras_position(frame)
  if position is not None:
    loop = 'fit' if position.epoch is not None else 'evaluate'
    return (f'at {position.describe()} of {_training or "the training"}'
            f"'s Keras {loop}")
  if _training:
    return f"in {_training}, outside Keras's fit"
  return ('outside the training (start-up, reading the data, or validating '
          'and publishing the export)')


def _stopped_message(reached: str) -> str:
  """PreemptedError's message for a SIGTERM outside the step boundaries
  of a TrainSpec (`reached`: where the run was)."""
  where = _checkpoint() if _checkpoint else ''
  return (
      f'SIGTERM arrived {reached}, where no step boundary of a TrainSpec '
      'comes to stop at, so the run stopped there. Expected SIGTERM (a '
      'preemption, a pod deleted) to stop the run and keep what it saved. '
      f'Received: SIGTERM {reached}. The last resume checkpoint: '
      + (where or 'none was written (a run_fn writes one with '
         'generic_trainer.resume.keras_callback or checkpoint_manager)')
      + '; nothing was exported or published by this run. Run the same '
      'training again: it resumes from that checkpoint, or starts over '
      'without one.')


def _interrupt(wait: float):
  def on_alarm(signum, frame):  # pylint: disable=unused-argument
    where = _checkpoint() if _checkpoint else ''
    raise PreemptedError(reached=_reached(frame), message=(
        f'SIGTERM arrived {wait:.0f} s ago and the training reached no step '
        'boundary since: user code blocks (a handler, run_fn or the input '
        'waiting on something), so it was interrupted to end within the '
        'grace period. Expected a step boundary within '
        f'{wait:.0f} s of a SIGTERM ({PREEMPTION_STEP_WAIT_ENV}). Received: '
        f'SIGTERM, then no step for {wait:.0f} s. It leaves with the last '
        'resume checkpoint: ' + (where or 'none was written') + '; the '
        'step in progress is lost, nothing was exported or published. Run '
        'the same training again: it resumes there. If a handler waits on '
        'something, give it a timeout.'))
  return on_alarm


def _last_resort(ended: threading.Event, since: float) -> None:
  """Ends the process at PREEMPTION_EXIT_S after the signal unless the
  training's block ended first: its scratch folders removed, exit 143."""
  if ended.wait(max(0.0, PREEMPTION_EXIT_S - (time.monotonic() - since))):
    return
  # The folders this process made and holds, as its own record says:
  # never by a PID in a name, which another PID namespace's training that
  # shares TMPDIR may have too (both PID 1).
  scratch.remove_made()
  try:
    sys.stderr.write(
        f'SIGTERM: the training was still blocked {PREEMPTION_EXIT_S:.0f} s '
        'after the signal, even after it was interrupted (native code, or '
        'user code that caught the interruption); the process ends now '
        f'with {PREEMPTED_EXIT_CODE}, its temporary folders removed. The '
        'last resume checkpoint is kept; nothing was published.\n')
    sys.stderr.flush()
  except (OSError, ValueError):
    pass
  os._exit(PREEMPTED_EXIT_CODE)  # pylint: disable=protected-access
