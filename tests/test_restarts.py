"""When a local worker group restarts, and what the log and the errors say.

The decisions are pure functions (`launch.restarts`); the restart itself,
with real processes, is `test_multi_worker.py::
test_a_killed_worker_restarts_the_group_from_the_checkpoint`.
"""

import pytest

from generic_trainer.errors import InvalidArgumentError, RunFnError, TrainingProcessError  # pylint: disable=g-multiple-import
from generic_trainer.plan import plan as plan_lib
from generic_trainer.plan import settings
from generic_trainer.plan.entry_points import COMMAND
from generic_trainer.launch import restarts
from generic_trainer.launch.child_process import describe_exit

KILLED = restarts.WorkerFailure(worker=1, how=describe_exit(-9), after_s=31.25)
RAISED = restarts.WorkerFailure(worker=1, how=describe_exit(1),
                                error=RunFnError('run_fn raised'), after_s=4)


def test_max_restarts_defaults_to_two():
  """Unset, a group is restarted at most twice; 0 is kept."""
  assert settings.restarts(None) == 2
  assert settings.restarts(None) == 2
  assert settings.restarts(0) == 0


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


def _plan_with(num_workers):
  from generic_trainer.plan import plan  # pylint: disable=g-import-not-at-top
  return plan.from_settings({'module_file': '/m.py',
                             'num_workers': num_workers})


@pytest.mark.parametrize('setting, bounds', [
    (None, None), (1, (1, 1)), (3, (3, 3)), ('2:3', (2, 3)), ((2, 4), (2, 4)),
    ([1, 1], (1, 1)), ('3:3', (3, 3))])
def test_num_workers_is_an_int_or_a_range(setting, bounds):
  """N, 'MIN:MAX' and (MIN, MAX) are read as (at least, at most)."""
  assert settings.worker_range(setting) == bounds


@pytest.mark.parametrize('setting', [
    0, -1, True, 2.0, '3:2', '0:2', '2:', ':3', 'two:three', '2:3:4', '2',
    (3,), (2, 3.0)])
def test_a_wrong_num_workers_range_is_refused_with_what_to_do(setting):
  """Anything but a positive int or a range MIN <= MAX is refused before
  training, in the four parts, as the component or the flag spells it."""
  from generic_trainer import errors  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan import plan  # pylint: disable=g-import-not-at-top
  from message_parts import missing_parts  # pylint: disable=g-import-not-at-top
  with pytest.raises(errors.InvalidArgumentError, match=(
      r"^'num_workers' must be a positive int .* or a range MIN:MAX")) as info:
    settings.check_settings(num_workers=setting)
  assert not missing_parts(str(info.value))
  with pytest.raises(errors.InvalidArgumentError, match=(
      r'^--num-workers must be a positive int')):
    settings.check_settings(COMMAND, num_workers=setting)


def test_the_plan_carries_the_range_and_is_where_the_count_is_set():
  """A range starts at its MAX as local workers; `with_workers` sets a
  count within it, and refuses one outside."""
  from generic_trainer.plan.plan import Where  # pylint: disable=g-import-not-at-top
  plan = _plan_with('2:3')
  assert (plan.num_workers, plan.worker_bounds(), plan.where) == (
      3, (2, 3), Where.LOCAL_WORKERS)
  two = plan.with_workers(2)
  assert (two.num_workers, two.worker_bounds()) == (2, (2, 3))
  from generic_trainer.plan.cluster import LocalGroup  # pylint: disable=g-import-not-at-top
  member = LocalGroup([4001, 4002], '/group').member(1)
  assert two.for_member(member).role.num_workers == 2
  assert type(plan).from_json(two.to_json()) == two
  with pytest.raises(InvalidArgumentError, match=(
      r'4 workers is outside num_workers 2:3\. Expected a count from 2 to 3\. '
      r'Received: count=4\. Pass')):
    plan.with_workers(4)
  fixed = _plan_with(2)
  assert fixed.worker_bounds() == (2, 2) and fixed.min_workers is None


def test_a_range_in_a_tf_config_cluster_takes_the_cluster_size():
  """Under TF_CONFIG a range must hold the cluster's size; the cluster
  decides it, and nothing shrinks."""
  import json  # pylint: disable=g-import-not-at-top
  from generic_trainer import errors  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import cluster_environment  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan import plan as plan_lib  # pylint: disable=g-import-not-at-top
  tf_config = json.dumps({'cluster': {'worker': ['a:1', 'b:2']},
                          'task': {'type': 'worker', 'index': 1}})
  cluster = cluster_environment.TFConfig(tf_config)
  plan = plan_lib.from_settings({'module_file': '/m.py',
                                 'num_workers': '1:3'}, cluster=cluster)
  assert (plan.num_workers, plan.worker_bounds()) == (2, (2, 2))
  with pytest.raises(errors.InvalidArgumentError, match=(
      r"The component asks for num_workers='3:4', but TF_CONFIG describes a "
      r"cluster of 2 \(chief and workers\). Expected a range that holds the "
      r"cluster's size")):
    plan_lib.from_settings({'module_file': '/m.py', 'num_workers': '3:4'},
                           cluster=cluster)


SOON = restarts.WorkerFailure(worker=2, how=describe_exit(-9), after_s=12.0)
LATE = restarts.WorkerFailure(worker=2, how=describe_exit(-9), after_s=90.0)


@pytest.mark.parametrize('size, least, capacity, failure, after, expected', [
    (3, 2, 6, KILLED, False, 3),   # The first death: same size.
    (3, 2, 6, SOON, True, 2),      # Dead again soon after a restart.
    (3, 2, 6, LATE, True, 3),      # ... but not soon (90 s > 60 s).
    (2, 2, 6, SOON, True, 2),      # Never below MIN.
    (3, 2, 2, KILLED, False, 2),   # Capacity allows 2.
    (3, 1, 1, KILLED, False, 1),   # ... or 1.
    (3, 2, 1, KILLED, False, None),  # Below MIN: no group.
    (3, 3, 6, SOON, True, 3),      # A fixed group keeps its size.
])
def test_a_group_shrinks_only_when_a_worker_cannot_come_back(
    size, least, capacity, failure, after, expected):
  """The size after a death: the capacity's, or one fewer after a quick
  second death, never below MIN."""
  got, why = restarts.size_after_death(size, least, capacity, failure, after)
  assert got == expected
  assert bool(why) == (expected != size)


def test_the_shrink_says_why():
  """The reason names the worker, how soon it died, and the capacity."""
  assert restarts.size_after_death(3, 2, 6, SOON, True)[1] == (
      'worker 2 was killed by signal 9 (SIGKILL) 12.0 s after the restart '
      '(within 60 s): it cannot be brought back')
  assert restarts.size_after_death(3, 2, 2, KILLED, False)[1] == (
      'the capacity check allows 2 worker(s) on this machine now')


@pytest.mark.parametrize('size, most, capacity, trained_s, checkpointed, to', [
    (2, 3, 6, 200.0, True, 3),    # A restart point, room: grow.
    (2, 3, 6, 60.0, True, None),  # Too soon after its start.
    (2, 3, 6, 200.0, False, None),  # No checkpoint since its start.
    (2, 3, 2, 200.0, True, None),   # No room.
    (2, 4, 3, 200.0, True, 3),      # Room for one more only.
    (3, 3, 6, 200.0, True, None),   # At MAX: never a restart to grow.
])
def test_a_shrunk_group_grows_back_at_a_restart_point(
    size, most, capacity, trained_s, checkpointed, to):
  """Only a shrunk group grows, after GROW_AFTER_S and a checkpoint, as far
  as capacity allows."""
  assert restarts.grow_to(size, most, capacity, trained_s,
                          checkpointed) == to


def test_size_changes_are_logged_and_recorded_with_why():
  """The log line and workers.json's entry of a change."""
  change = restarts.SizeChange(3, 2, 'the capacity check allows 2 worker(s) '
                               'on this machine now', 'step 14 (epoch 1, '
                               'batch 14)')
  assert change.line() == (
      'The local worker group shrinks from 3 to 2 workers: the capacity check '
      'allows 2 worker(s) on this machine now; it restarts from the '
      'checkpoint at step 14 (epoch 1, batch 14).')
  assert change.to_json() == {
      'from': 3, 'to': 2, 'why': 'the capacity check allows 2 worker(s) on '
      'this machine now', 'resumed_from': 'step 14 (epoch 1, batch 14)'}
  assert restarts.restart_line(SOON, 3, 2, 6, None, 2).endswith(
      'restarting with 2 workers (restart 2 of at most 6) from the beginning '
      '(no checkpoint was written yet).')


def test_no_room_for_the_minimum_fails_with_what_to_do():
  """Fewer workers than MIN can run: TrainingProcessError, four parts."""
  from message_parts import missing_parts  # pylint: disable=g-import-not-at-top
  error = restarts.no_capacity_error(
      KILLED, 3, 2, 'the capacity check allows 1 worker(s) on this machine '
      'now', [], 2)
  assert isinstance(error, TrainingProcessError)
  assert str(error).startswith(
      'Worker 1 of the local 3-worker training was killed by signal 9 '
      '(SIGKILL), and the group cannot restart: the capacity check allows 1 '
      'worker(s) on this machine now, fewer than the 2 the num_workers range '
      'needs.')
  assert not missing_parts(str(error))


def test_the_command_takes_num_workers_as_a_flag_out_of_the_resume_key(
    tmp_path):
  """--num-workers N or MIN:MAX reaches the settings as the component's;
  a wrong one is refused with the flag's spelling; the count is not part
  of the resume key (the data order does not depend on it)."""
  from generic_trainer import errors  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import run as command_run  # pylint: disable=g-import-not-at-top
  csv = tmp_path / 'train.csv'
  csv.write_text('a,b\n1,2\n3,4\n')
  module = tmp_path / 'mod.py'
  module.write_text('x = 1\n')
  base = ['--module-file', str(module), '--train-data', str(csv),
          '--output-dir', str(tmp_path / 'out')]
  two = cli_args.parse(base + ['--num-workers', '2'], 0.0)
  ranged = cli_args.parse(base + ['--num-workers', '2:3'], 0.0)
  assert (two.num_workers, ranged.num_workers) == (2, '2:3')
  assert command_run.resume_key(two) == command_run.resume_key(ranged)
  with pytest.raises(errors.InvalidArgumentError, match=(
      r"^--num-workers must be a positive int .* Received: "
      r"--num-workers=3:2\.")):
    cli_args.parse(base + ['--num-workers', '3:2'], 0.0)


def test_a_global_batch_the_workers_cannot_share_evenly_is_refused():
  """batch_size 20 over 3 workers is refused before any step (Keras 3
  under MultiWorkerMirroredStrategy fails on uneven slices); 21 is not,
  nor any batch in one process; a range needs a batch every size divides."""
  from generic_trainer.trainspec import member_checks  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from message_parts import missing_parts  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError, match=(
      r'^TrainSpec.batch_size=20 \(the global batch.*Received: '
      r'batch_size=20, 3 workers\. Set batch_size to a multiple of 3 \(e\.g\. '
      r'18 or 21\)')) as info:
    member_checks.check_batch_split(20, [3])
  assert not missing_parts(str(info.value))
  with pytest.raises(SpecError, match=(
      r'between groups of 2 to 3 workers \(a num_workers range\).*'
      r'Received: batch_size=20, num_workers 2:3\. Set batch_size to a '
      r'multiple of 6 \(e\.g\. 18 or 24\)')) as info:
    member_checks.check_batch_split(20, range(2, 4))
  assert not missing_parts(str(info.value))
  for fits in ((20, [2]), (20, [1]), (21, [3]), (12, range(2, 4)),
               (None, [3])):
    member_checks.check_batch_split(*fits)
