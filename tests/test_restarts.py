"""When a local worker group restarts, and what the log and the errors say.

The decisions are pure functions (`launch.restarts`); the restart itself,
with real processes, is `test_multi_worker.py::
test_a_killed_worker_restarts_the_group_from_the_checkpoint`.
"""

import pytest

from generic_trainer.errors import RunFnError, TrainingProcessError
from generic_trainer.core import args
from generic_trainer.launch import restarts
from generic_trainer.launch.child_process import describe_exit

KILLED = restarts.WorkerFailure(worker=1, how=describe_exit(-9), after_s=31.25)
RAISED = restarts.WorkerFailure(worker=1, how=describe_exit(1),
                                error=RunFnError('run_fn raised'), after_s=4)


def test_max_restarts_defaults_to_two():
  """Unset, a group is restarted at most twice; 0 is kept."""
  assert args.max_restarts(None) == 2
  assert args.max_restarts(None) == 2
  assert args.max_restarts(0) == 0


@pytest.mark.parametrize('failure, done, limit, expected', [
    (KILLED, 0, 2, True),   # A death, within the limit.
    (KILLED, 1, 2, True),
    (KILLED, 2, 2, False),  # One too many.
    (KILLED, 0, 0, False),  # Restarts off: fail fast.
    (RAISED, 0, 2, False),  # An error would come again.
])
def test_only_deaths_within_the_limit_restart(failure, done, limit,
                                              expected):
  """A worker that died without an error restarts the group, up to the
  limit; a worker that reported an error never does."""
  assert restarts.should_restart(failure, done, limit) is expected


def test_exit_says_the_signal_by_name():
  """A signal is named: the OOM killer's SIGKILL reads as such."""
  assert describe_exit(-9) == 'was killed by signal 9 (SIGKILL)'
  assert describe_exit(3) == 'exited with code 3'


def test_restart_line_says_who_died_how_and_where_it_resumes():
  """The log line names the worker, the signal, and the checkpoint."""
  assert restarts.restart_line(KILLED, 2, 1, 2, 'step 14 (epoch 3, batch 4)') == (
      'Worker 1 of the local 2-worker training was killed by signal 9 '
      '(SIGKILL) after 31.2 s. The other workers were stopped; restarting '
      'all 2 (restart 1 of at most 2) from the checkpoint at step 14 (epoch '
      '3, batch 4).')
  assert restarts.restart_line(KILLED, 2, 2, 2, None).endswith(
      '(restart 2 of at most 2) from the beginning (no checkpoint was '
      'written yet).')


def test_final_error_lists_every_restart():
  """Beyond max_restarts, the error's message has each restart."""
  done = [restarts.Restart(KILLED, 'step 14 (epoch 3, batch 4)'),
          restarts.Restart(KILLED, None)]
  assert restarts.history(KILLED, done, 2) == (
      ' The workers had been restarted 2 time(s) (max_restarts=2): restart '
      '1: worker 1 was killed by signal 9 (SIGKILL) after 31.2 s, resumed '
      'from step 14 (epoch 3, batch 4); restart 2: worker 1 was killed by '
      'signal 9 (SIGKILL) after 31.2 s, resumed from the beginning.')


def test_no_restart_says_why_only_for_a_death_with_restarts_off():
  """max_restarts=0 is named when a death fails the execution; an error,
  or a first death, adds nothing."""
  assert restarts.history(KILLED, [], 0) == (
      ' The workers were not restarted: max_restarts=0.')
  assert restarts.history(RAISED, [], 0) == ''
  assert restarts.history(RAISED, [], 2) == ''


def test_a_restart_is_recorded_in_workers_json_as_json():
  """workers.json's entry: worker, how, seconds, where it resumed."""
  assert restarts.Restart(KILLED, 'step 14 (epoch 3, batch 4)').to_json() == {
      'worker': 1, 'how': 'was killed by signal 9 (SIGKILL)', 'after_s': 31.2,
      'resumed_from': 'step 14 (epoch 3, batch 4)'}


def test_a_death_beyond_max_restarts_fails_with_every_restart():
  """The third death with max_restarts=2 fails the execution as the first
  one did without restarts, and lists both restarts."""
  done = [restarts.Restart(KILLED, 'step 14 (epoch 3, batch 4)'),
          restarts.Restart(KILLED, 'step 20 (the end of epoch 4)')]
  error = restarts.final_error(KILLED, 2, done, 2)
  assert isinstance(error, TrainingProcessError)
  assert str(error) == (
      'Worker 1 of the local 2-worker training was killed by signal 9 '
      "(SIGKILL) without reporting an error; its output is above, prefixed "
      "'[worker 1]'. The other workers were stopped. Nothing was published. "
      'The workers had been restarted 2 time(s) (max_restarts=2): restart 1: '
      'worker 1 was killed by signal 9 (SIGKILL) after 31.2 s, resumed from '
      'step 14 (epoch 3, batch 4); restart 2: worker 1 was killed by signal '
      '9 (SIGKILL) after 31.2 s, resumed from step 20 (the end of epoch 4).')


def test_a_reported_error_fails_with_its_own_class_and_message():
  """A worker's error ends the execution as that error, naming the worker."""
  error = restarts.final_error(RAISED, 2, [], 2)
  assert isinstance(error, RunFnError)
  assert str(error) == 'Worker 1 failed: run_fn raised'
