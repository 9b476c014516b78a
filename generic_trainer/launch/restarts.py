"""Whether a local worker group restarts after a failure, and what it says.

A worker that dies without reporting an error (SIGKILL, the OOM killer, a
crash) says nothing about the training: the group is stopped and started
again from the last checkpoint, up to `max_restarts` times, as Ray Train
and TorchElastic restart a worker group. A worker that reports an error
(the run_fn raised, a TrainSpec check failed) would fail again: the
execution fails at once. The decisions are pure functions; `local_cluster`
acts on them.

With a `num_workers` range 'MIN:MAX' the group also changes size
(`size_after_death`, `grow_to`), as torchrun's `--nnodes=MIN:MAX`:

  - it shrinks at a restart when a worker cannot be brought back: the
    capacity check (`local_cluster.capacity`) allows fewer workers than
    the group has, or a worker died again within `REDEATH_WINDOW_S` of a
    restart (the restart did not hold). One worker fewer each time (fewer
    still if capacity says so), never below MIN; below MIN there is no
    group to restart and the execution fails;
  - it grows back toward MAX at a restart point: once a shrunk group has
    trained `GROW_AFTER_S` and its chief has written a resume checkpoint
    since it started, when capacity allows more workers, every worker is
    asked to stop as on a SIGTERM (all stop at one step, which is saved),
    and the group starts again bigger from that step: 0 steps repeated,
    one start-up paid. A grow follows a shrink (or a start below MAX, on a
    machine with room for fewer), and a shrink follows a death, which
    `max_restarts` counts: so grows are at most `max_restarts` + 1, and a
    group at MAX never restarts to grow.
"""

from typing import Any, Dict, List, Optional, Tuple

import attr

from generic_trainer import errors


@attr.s(frozen=True)
class WorkerFailure:
  """How one worker of a local group failed.

  Attributes:
    worker: The worker's index (0 is the chief).
    how: How it ended, e.g. 'was killed by signal 9 (SIGKILL)'.
    error: The error it reported (a GenericTrainerError), or None when it
      died without reporting one.
    after_s: Seconds from the start of its group to its end.
  """
  worker = attr.ib(type=int)
  how = attr.ib(type=str)
  error = attr.ib(type=Optional[Exception], default=None)
  after_s = attr.ib(type=float, default=0.0)


# A worker that dies this soon after its group (re)started, after a death
# had restarted it, is taken as one that cannot be brought back.
REDEATH_WINDOW_S = 60.0
# How long a shrunk group trains before it may grow back (a start-up of a
# local group of TensorFlow processes costs ~10-30 s on 2 cores).
GROW_AFTER_S = 120.0


@attr.s(frozen=True)
class Restart:
  """One restart of the group: the failure that caused it, and where the
  training resumed (`resume.describe`; None: from the beginning)."""
  failure = attr.ib(type=WorkerFailure)
  resumed_from = attr.ib(type=Optional[str])

  def to_json(self) -> Dict[str, Any]:
    return {'worker': self.failure.worker, 'how': self.failure.how,
            'after_s': round(self.failure.after_s, 1),
            'resumed_from': self.resumed_from}


@attr.s(frozen=True)
class SizeChange:
  """The group restarted with another number of workers.

  Attributes:
    old: Workers before.
    new: Workers after.
    why: Why, as the log and `workers.json` say it.
    resumed_from: Where the new group resumed (`resume.describe`).
  """
  old = attr.ib(type=int)
  new = attr.ib(type=int)
  why = attr.ib(type=str)
  resumed_from = attr.ib(type=Optional[str], default=None)

  def to_json(self) -> Dict[str, Any]:
    return {'from': self.old, 'to': self.new, 'why': self.why,
            'resumed_from': self.resumed_from}

  def line(self) -> str:
    """The log line of the change."""
    verb = 'shrinks' if self.new < self.old else 'grows'
    where = (f'from the checkpoint at {self.resumed_from}' if
             self.resumed_from else 'from the beginning')
    return (f'The local worker group {verb} from {self.old} to {self.new} '
            f'workers: {self.why}; it restarts {where}.')


def size_after_death(size: int, least: int, capacity: int,
                     failure: WorkerFailure, after_restart: bool
                     ) -> Tuple[Optional[int], str]:
  """(workers of the restarted group, why it changed, '' if not) after a
  worker of a `size`-worker group died; (None, why) when fewer than `least`
  could run.

  Args:
    size: Workers of the group that lost one.
    least: The range's MIN (`size` for a fixed group).
    capacity: Workers this machine can run now (`local_cluster.capacity`).
    failure: The death.
    after_restart: Whether that group had been started by a restart after
      a death (not the first group, nor one started to grow).
  """
  if capacity < size:
    why = (f'the capacity check allows {capacity} worker(s) on this machine '
           'now')
    if capacity < least:
      return None, why
    return capacity, why
  if after_restart and failure.after_s < REDEATH_WINDOW_S and size > least:
    return size - 1, (
        f'worker {failure.worker} {failure.how} {failure.after_s:.1f} s after '
        f'the restart (within {REDEATH_WINDOW_S:.0f} s): it cannot be brought '
        'back')
  return size, ''


def grow_to(size: int, most: int, capacity: int, trained_s: float,
            checkpointed: bool) -> Optional[int]:
  """The size a running `size`-worker group grows to now, or None.

  Growing costs a restart, so only a shrunk group grows (`size` < `most`),
  once it has trained `GROW_AFTER_S` and written a checkpoint since it
  started (a restart point: the group is past its start-up), and only when
  the machine can run more workers now.
  """
  if size >= most or trained_s < GROW_AFTER_S or not checkpointed:
    return None
  target = min(most, capacity)
  return target if target > size else None


def should_restart(failure: WorkerFailure, restarts_done: int,
                   limit: int) -> bool:
  """Restart when the worker died without an error, within the limit."""
  return failure.error is None and restarts_done < limit


def restart_line(failure: WorkerFailure, count: int, restart: int,
                 limit: int, resumed_from: Optional[str],
                 new_count: Optional[int] = None) -> str:
  """The log line of a restart: which worker died, how, where it resumes
  (and with how many, when the group changes size: `new_count`)."""
  where = (f'from the checkpoint at {resumed_from}' if resumed_from else
           'from the beginning (no checkpoint was written yet)')
  who = (f'all {count}' if new_count in (None, count) else
         f'with {new_count} workers')
  return (f'Worker {failure.worker} of the local {count}-worker training '
          f'{failure.how} after {failure.after_s:.1f} s. The other workers '
          f'were stopped; restarting {who} (restart {restart} of at '
          f'most {limit}) {where}.')


def history(failure: WorkerFailure, restarts: List[Restart],
            limit: int) -> str:
  """What the error that ends the execution adds to its message: every
  restart before it, or, for a death with restarts off, that they are."""
  if not restarts:
    return (f' The workers were not restarted: max_restarts={limit}.'
            if failure.error is None and limit == 0 else '')
  done = '; '.join(
      f'restart {i}: worker {r.failure.worker} {r.failure.how} after '
      f'{r.failure.after_s:.1f} s, resumed from '
      f'{r.resumed_from or "the beginning"}'
      for i, r in enumerate(restarts, 1))
  return (f' The workers had been restarted {len(restarts)} time(s) '
          f'(max_restarts={limit}): {done}.')


def final_error(failure: WorkerFailure, count: int, restarts: List[Restart],
                limit: int) -> Exception:
  """The error that ends the execution: the worker's own error (same
  class), or TrainingProcessError for a death; with the restarts before."""
  suffix = history(failure, restarts, limit)
  if failure.error is not None:
    return type(failure.error)(
        f'Worker {failure.worker} failed: {failure.error}{suffix}')
  return errors.TrainingProcessError(
      f'Worker {failure.worker} of the local {count}-worker training '
      f"{failure.how} without reporting an error; its output is above, "
      f"prefixed '[worker {failure.worker}]'. The other workers were "
      f'stopped. Nothing was published.{suffix}')


def no_capacity_error(failure: WorkerFailure, count: int, least: int,
                      why: str, restarts: List[Restart],
                      limit: int) -> Exception:
  """The error when a group that lost a worker cannot restart with at least
  `least` workers (row 261)."""
  return errors.TrainingProcessError(
      f'Worker {failure.worker} of the local {count}-worker training '
      f'{failure.how}, and the group cannot restart: {why}, fewer than the '
      f'{least} the num_workers range needs. Expected room for at least '
      f'{least} worker(s). Received: num_workers at least {least}, room for '
      f'fewer. Free memory or cores, or lower the range\'s MIN; running the '
      'same training again resumes from the last checkpoint. Nothing was '
      f'published.{history(failure, restarts, limit)}')
