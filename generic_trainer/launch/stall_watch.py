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
"""

import os
import time
from typing import Dict, List, Optional, Tuple

from generic_trainer import errors
from generic_trainer.keys import STALL_LIMIT_ENV, STALL_LIMIT_S

HEARTBEAT_FILE = 'heartbeat'


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
