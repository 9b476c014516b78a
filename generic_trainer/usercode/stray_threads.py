"""Threads user code leaves running cannot keep the process alive.

A `run_fn` that starts a non-daemon thread and returns (a metrics
uploader, a data prefetcher, a forgotten `Thread(...).start()`) keeps
Python from exiting: at exit, the interpreter joins every non-daemon
thread. The `generic-trainer` command ends its process anyway
(`exit_despite_threads`); a user's own pipeline script
(LocalDagRunner runs the executor in the script's process) would finish
the pipeline and then hang.

So once user code returns, each thread it started and left running is
made a daemon thread, which the interpreter does not wait for; a warning
names them. CPython offers no public way to change a running thread's
daemon flag (`Thread.daemon = True` raises RuntimeError once started):
this sets `Thread._daemonic` and drops the thread's lock from
`threading._shutdown_locks`, the set `threading._shutdown` joins (CPython
3.7 to 3.12). Where those are missing (3.13 keeps them in C), the warning
says the process will wait for the threads.
"""

import os
import sys
import threading
from typing import Iterable, List

from generic_trainer.system import progress

# The threads made daemons here, for the command's note at its exit
# (`exit_despite_threads`).
RELEASED = []


def release(before: Iterable[threading.Thread], source: str) -> List[str]:
  """Makes daemons of the non-daemon threads started since `before` (the
  threads alive when the user code started) that are still running; logs
  a warning naming them. Returns their names."""
  before = set(before)
  stray = [t for t in threading.enumerate()
           if t not in before and t.is_alive() and not t.daemon]
  if not stray:
    return []
  names = sorted(t.name for t in stray)
  released = all([_make_daemon(t) for t in stray])
  RELEASED.extend(stray)
  if released:
    progress.log().warning(
        '%s left %d non-daemon thread(s) running (%s). Expected user code to '
        'join its threads before returning, or to start them as daemon '
        'threads. Received: threads still running after training ended. They '
        'were made daemon threads, so this process exits when its own work '
        'is done and stops them then; join them before returning, or start '
        'them with daemon=True.', source, len(stray), ', '.join(names))
  else:
    progress.log().warning(
        '%s left %d non-daemon thread(s) running (%s): this Python cannot '
        'make them daemons, so the process waits for them at exit. Join '
        'them before returning, or start them with daemon=True.', source,
        len(stray), ', '.join(names))
  return names


def _make_daemon(thread: threading.Thread) -> bool:
  """Whether `thread` is now a daemon the interpreter will not join."""
  locks = getattr(threading, '_shutdown_locks', None)
  guard = getattr(threading, '_shutdown_locks_lock', None)
  if locks is None or guard is None or not hasattr(thread, '_daemonic'):
    return False
  thread._daemonic = True  # pylint: disable=protected-access
  lock = getattr(thread, '_tstate_lock', None)
  if lock is not None:
    with guard:
      locks.discard(lock)
  return True


def exit_despite_threads(status: int) -> None:
  """Ends the process with `status` now if user code left non-daemon
  threads running, which would keep Python from exiting; says so first.
  Returns when there are none."""
  stray = [t for t in threading.enumerate()
           if t is not threading.main_thread() and t.is_alive() and
           (not t.daemon or t in RELEASED)]
  if not stray:
    return
  print(f'Note: user code left {len(stray)} thread(s) running '
        f'({", ".join(sorted(t.name for t in stray))}); exiting without '
        'waiting for them.', file=sys.stderr, flush=True)
  sys.stdout.flush()
  os._exit(status)  # pylint: disable=protected-access


def end_process(status: int) -> None:
  """Exits with `status`, even if user code left threads running."""
  exit_despite_threads(status)
  sys.exit(status)
