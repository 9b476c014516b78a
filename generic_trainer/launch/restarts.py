"""Whether a local worker group restarts after a failure, and what it says.

A worker that dies without reporting an error (SIGKILL, the OOM killer, a
crash) says nothing about the training: the group is stopped and started
again from the last checkpoint, up to `max_restarts` times, as Ray Train
and TorchElastic restart a worker group. A worker that reports an error
(the run_fn raised, a TrainSpec check failed) would fail again: the
execution fails at once. The decisions are pure functions; `local_cluster`
acts on them.
"""

from typing import Any, Dict, List, Optional

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


def should_restart(failure: WorkerFailure, restarts_done: int,
                   limit: int) -> bool:
  """Restart when the worker died without an error, within the limit."""
  return failure.error is None and restarts_done < limit


def restart_line(failure: WorkerFailure, count: int, restart: int,
                 limit: int, resumed_from: Optional[str]) -> str:
  """The log line of a restart: which worker died, how, where it resumes."""
  where = (f'from the checkpoint at {resumed_from}' if resumed_from else
           'from the beginning (no checkpoint was written yet)')
  return (f'Worker {failure.worker} of the local {count}-worker training '
          f'{failure.how} after {failure.after_s:.1f} s. The other workers '
          f'were stopped; restarting all {count} (restart {restart} of at '
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
