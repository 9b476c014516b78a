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
    PreemptedError: nothing is exported or published;
  - a parent waiting for its child or local workers: it keeps waiting
    (at most `keys.PREEMPTION_WAIT_S`) while they save, then raises
    PreemptedError;
  - anything else (start-up, reading the data, the export): nothing
    trained is lost, so the process ends by SIGTERM at once, as before.

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
import threading
import weakref
from typing import Iterator

from generic_trainer.system import atomic_files

_requested = threading.Event()
_children: 'weakref.WeakSet' = weakref.WeakSet()
_watchers = 0
_previous = signal.SIG_DFL
_installed = False


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


@contextlib.contextmanager
def watching() -> Iterator[None]:
  """While the block runs, training steps read the flag: SIGTERM does not
  end the process.

  It installs the handler again: TensorFlow's coordination service
  (MultiWorkerMirroredStrategy) replaces it with its own when it starts
  (`preemption_notifier.cc`, "SIGTERM caught"), which would make SIGTERM
  do nothing here.
  """
  global _watchers
  if _installed and threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGTERM, _on_sigterm)
  _watchers += 1
  try:
    yield
  finally:
    _watchers -= 1


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
  if _watchers or live:
    return
  # Nothing trains here: end as SIGTERM would have (nothing is lost).
  previous = _previous
  if previous is signal.SIG_IGN:
    return
  if callable(previous):
    previous(signum, frame)
    return
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  os.kill(os.getpid(), signal.SIGTERM)
