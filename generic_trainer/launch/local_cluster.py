"""Runs an N-worker training on this machine, one process per worker.

Each worker is a `child_process` with its own TF_CONFIG: a cluster of N
'worker' tasks on `localhost` ports, worker 0 being the chief. The workers
run in a network of their own that no other process can reach
(`private_network`; where the machine allows no such network, on ports of
this machine reserved until the workers bind them, with a warning). The
chief exports into the staging folder the executor validates and
publishes; the others export into scratch folders removed afterwards.

A worker writes its output to a file of the group's scratch folder, never
to a pipe (`worker_process`: its lines go to stderr prefixed `[worker i]`,
dropped where stderr is closed); once the group ends, each file is appended
to `worker-logs/worker-<i>.log` in the ModelRun (`LOGS_DIR`), so a closed
terminal never loses the reason a training failed.

Waits are bounded: as soon as one worker fails the others are killed;
once one worker has finished, the others get `FINISH_GRACE_S` to finish;
stopping the group waits `worker_process.STOP_WAIT_S` in all.
A worker that died without reporting an error (SIGKILL, OOM) restarts the
whole group from the last checkpoint, up to `max_restarts` times
(`restarts` decides); a reported error, or one death too many, is raised.
Every process started here is killed before `run` returns or raises, and
dies with the executor anyway. With a `num_workers` range the group
restarts smaller when a worker cannot come back and grows back later
(`restarts` decides when and to what size, `TrainingPlan.with_workers`
sets it). After a SIGTERM, forwarded to every worker
(`preemption`), the workers stop at one step the chief chooses
(`cluster_environment.LocalGroup`), all save it, and the group is not restarted:
PreemptedError.
"""

import contextlib
import os
import signal
import subprocess
import time
from typing import Any, Dict, List, Optional

from absl import logging
import portpicker
import tensorflow as tf

from generic_trainer.system import atomic_files
from generic_trainer import errors
from generic_trainer.system import machine
from generic_trainer.system import preemption
from generic_trainer.system import removal
from generic_trainer import resume
from generic_trainer.system import scratch
from generic_trainer.plan.cluster import LocalGroup
from generic_trainer.plan.request import TrainingRequest
from generic_trainer.keys import HEARTBEAT_FILE_ENV, PREEMPTION_WAIT_S
from generic_trainer.launch import child_process
from generic_trainer.launch import cluster_environment
from generic_trainer.launch import private_network
from generic_trainer.launch import restarts as restarts_lib
from generic_trainer.launch import stall_watch
from generic_trainer.launch import worker_process
from generic_trainer.system.lazy import fileio
from generic_trainer.keys import WORKER_LOGS_DIR as LOGS_DIR
from generic_trainer.keys import WORKERS_SUMMARY_FILE as SUMMARY_FILE

FINISH_GRACE_S = 180.0
PRIVATE_PORT = 20000  # The first worker's port in a private network.
WORKER_MEMORY = 1 << 30  # A TensorFlow worker's RSS is 0.5-1 GiB.


def capacity(cores: int, memory: Optional[int]) -> int:
  """How many local workers a machine with `cores` and `memory` bytes free
  can run: two per core (they wait on each other much of the time) and one
  per WORKER_MEMORY."""
  by_memory = memory // WORKER_MEMORY if memory is not None else cores * 2
  return max(1, min(cores * 2, by_memory))


def check_capacity(count: int) -> None:
  """Raises InvalidArgumentError when `count` workers exceed `capacity`."""
  cores, memory = machine.cores(), machine.available_memory()
  limit = capacity(cores, memory)
  if count > limit:
    free = f'{memory / (1 << 30):.1f} GiB' if memory is not None else 'unknown'
    raise errors.InvalidArgumentError(
        f'num_workers={count} would start {count} TensorFlow processes on '
        f'this machine, which can run about {limit}: {cores} core(s) and '
        f'{free} of free memory{machine.limits_note()}, at two workers a '
        f'core and {WORKER_MEMORY >> 30} GiB each. Expected at most {limit} '
        f'workers here. Received: num_workers={count}. Use num_workers <= '
        f'{limit} here, or run the trainer in a cluster that sets TF_CONFIG, '
        'one worker a replica (README.md, "Scaling out"). Nothing was '
        'started.')


def free_ports(count: int) -> List[int]:
  ports = []
  while len(ports) < count:
    port = portpicker.pick_unused_port()
    if port not in ports:
      ports.append(port)
  return ports


def run(request: TrainingRequest) -> None:
  """Trains `request` with `num_workers` local processes; the chief exports
  to `request.serving_dir`, the others to scratch.

  Every worker gets the same `checkpoint_dir`: the chief writes the resume
  checkpoints, every worker restores from them, also after the group was
  restarted because a worker died. With a `num_workers` range, the group
  starts with as many workers as the range and the machine allow, and
  restarts smaller or bigger as `restarts` decides; the log and
  `workers.json` say each change and why.

  Raises:
    The failed worker's error (same class, its message, which worker), or
    TrainingProcessError if it died without reporting one more often than
    `max_restarts` allows, or did not finish, or fewer workers than the
    range's MIN can run.
  """
  least, most = request.plan.worker_bounds()
  stall_watch.limit()  # Refuses a wrong setting before anything starts.
  private_network.check_outside_paths(_outside_paths(request), most)
  if least == most:
    check_capacity(most)
    count = most
  else:
    check_capacity(least)
    count = min(most, _capacity_now())
  limit = request.plan.max_restarts
  done: List[restarts_lib.Restart] = []
  changes: List[restarts_lib.SizeChange] = []
  after_restart = False
  while True:
    entries, failure, grow = _run_group(request.with_workers(count), count)
    if preemption.requested():
      raise errors.PreemptedError(
          f'SIGTERM stopped the local {count}-worker training; every worker '
          'stopped at the same step and the chief saved it: the resume '
          f'checkpoint in {request.checkpoint_dir} is at '
          f'{resume.describe(request.checkpoint_dir) or "no step yet"}. '
          'Expected after a SIGTERM: stop and save. Received: SIGTERM. '
          'Nothing was published. Run the same training again: it resumes '
          'there, repeating no step.')
    if grow is not None:
      change = restarts_lib.SizeChange(
          count, grow, f'the machine can run {grow} worker(s) again',
          resume.describe(request.checkpoint_dir))
      logging.warning(change.line())
      changes.append(change)
      count, after_restart = grow, False
      _clear_outputs(request)
      continue
    if failure is None:
      _write_summary(request.model_run_dir(), entries, done, changes)
      return
    if not restarts_lib.should_restart(failure, len(done), limit):
      raise restarts_lib.final_error(failure, count, done, limit)
    # A fixed group restarts at its size, as it always did.
    size, why = restarts_lib.size_after_death(
        count, least, _capacity_now() if least < most else count, failure,
        after_restart)
    if size is None:
      raise restarts_lib.no_capacity_error(failure, count, least, why, done,
                                           limit)
    resumed_from = resume.describe(request.checkpoint_dir)
    logging.warning(restarts_lib.restart_line(
        failure, count, len(done) + 1, limit, resumed_from, size))
    done.append(restarts_lib.Restart(failure, resumed_from))
    if size != count:
      change = restarts_lib.SizeChange(count, size, why, resumed_from)
      logging.warning(change.line())
      changes.append(change)
    count, after_restart = size, True
    _clear_outputs(request)


def _clear_outputs(request: TrainingRequest) -> None:
  for folder in (request.serving_dir, request.eval_dir):
    _clear(folder)  # The chief may have died exporting.


def _capacity_now(running: int = 0) -> int:
  """How many workers this machine can run now (`capacity`), counting the
  memory of the `running` workers of a group as free (they would be
  replaced)."""
  memory = machine.available_memory()
  if memory is not None:
    memory += running * WORKER_MEMORY
  return capacity(machine.cores(), memory)


def _outside_paths(request: TrainingRequest) -> List[str]:
  """The request's paths on another machine (an object store: '://'):
  its artifacts, outputs, checkpoints, local inputs and module file."""
  found = []
  def walk(value):
    if isinstance(value, str):
      if '://' in value:
        found.append(value)
    elif isinstance(value, dict):
      for item in value.values():
        walk(item)
    elif isinstance(value, (list, tuple)):
      for item in value:
        walk(item)
  walk([request.serving_dir, request.eval_dir, request.checkpoint_dir,
        request.local_inputs.to_json() if request.local_inputs else None,
        request.plan.source])
  for artifacts in (request.input_dict, request.output_dict):
    for items in artifacts.values():
      walk([artifact.uri for artifact in items])
  return found


def _run_group(request: TrainingRequest, count: int,
               why_not_private: Optional[str] = None):
  """Starts the `count` workers, waits, stops them all; returns (their
  `workers.json` entries, the first failure or None, the size to grow to
  or None: see `_wait`). `why_not_private`: why this group runs on ports
  of this machine even where private networks can be made."""
  why_not_private = why_not_private or private_network.why_public()
  reservation = None
  if why_not_private:
    reservation = private_network.PortReservation(count)
    ports = reservation.ports
    logging.warning(
        'The %d workers listen on ports %s of this machine, reachable from '
        'its network (TensorFlow binds every interface): %s. See '
        'docs/threat-model.md.', count, ports, why_not_private)
  else:
    ports = [PRIVATE_PORT + i for i in range(count)]
  workers: List[worker_process.Worker] = []
  with contextlib.ExitStack() as stack:
    root = stack.enter_context(scratch.folder('workers'))
    if reservation:
      stack.callback(reservation.release)
    logs_dir = os.path.join(request.model_run_dir(), LOGS_DIR)
    stack.callback(_keep_logs, workers, logs_dir)  # After stop_all.
    stack.callback(worker_process.stop_all, workers)
    logging.info('Starting %d training workers on localhost ports %s%s; '
                 'their output is kept in %s.', count, ports,
                 '' if reservation else ', in a network of their own',
                 logs_dir)
    group = LocalGroup(ports, root)
    namespaces: List[int] = []  # The group's network, once worker 0 made it.
    stack.callback(_close_all, namespaces)
    index = 0
    try:
      for index in range(count):
        worker_dir = os.path.join(root, f'worker-{index}')
        os.mkdir(worker_dir, 0o700)  # Private: the child checks (`read_request`).
        # A worker that is not the chief exports into scratch of its own
        # (its attempt's role says so); the chief into the staging folder.
        member = group.member(index)
        worker_request = request.for_member(member)
        request_path = os.path.join(worker_dir, 'request.json')
        result = os.path.join(worker_dir, 'result.json')
        log_path = os.path.join(worker_dir, 'output.log')
        child_process.write_request(request_path, worker_request, result)
        env = child_process.child_env({
            **request.plan.child_env(),
            **cluster_environment.member_environ(member),
            **({'TF_GRPC_REUSE_PORT': '1'} if reservation else {}),
            HEARTBEAT_FILE_ENV: os.path.join(worker_dir,
                                             stall_watch.HEARTBEAT_FILE),
        })
        entry = None if reservation else private_network.Entry(
            tuple(namespaces) or None)
        process, made = _start(request_path, env, log_path, entry)
        namespaces.extend(made)
        workers.append(worker_process.Worker(index, process, result,
                                             log_path))
    except private_network.NotEntered as e:
      worker_process.stop_all(workers)
      if preemption.requested():  # The SIGTERM ended it: `run` says so.
        return [], None, None
      # The probe's fresh process could make a namespace; this worker
      # could not. Start this group again on reserved ports; the next
      # group tries a private network again.
      workers.clear()
      stack.close()
      return _run_group(request, count, (
          f'starting worker {index} in a private network failed ({e}), '
          'so this group (only) runs on reserved ports of this machine'))
    watch = stall_watch.StallWatch(
        [f'worker {w.index}' for w in workers],
        [os.path.join(root, f'worker-{w.index}', stall_watch.HEARTBEAT_FILE)
         for w in workers], [w.log_path for w in workers])
    failure, grow = _wait(workers, request, watch)
    return [{
        'index': w.index,
        'chief': w.index == 0,
        'address': f'localhost:{ports[w.index]}',
        'seconds': w.seconds,
        'replicas_in_sync': w.report().get('replicas_in_sync'),
    } for w in workers], failure, grow


def _start(request_path: str, env: Dict[str, str], log_path: str,
           entry: Optional[private_network.Entry]):
  """Starts one worker on `request_path`, its output appended to the new
  file `log_path` (read back by `worker_process.Worker._stream`); with
  `entry`, in the group's network, returning once it is in. Returns the
  process, and descriptors of the namespaces it made (else ()).

  Raises:
    private_network.NotEntered: it could not enter (it was killed).
  """
  log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                os.O_APPEND | os.O_CLOEXEC, 0o600)
  made = ()
  try:
    process = child_process.start(
        request_path, env, wrap_command=entry.command if entry else None,
        pass_fds=entry.pass_fds if entry else (), stdout=log,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if entry:
      try:
        made = entry.entered(process)
      except private_network.NotEntered:
        process.kill()
        process.wait()
        raise
  finally:
    os.close(log)
    if entry:
      entry.close()
  return process, made


def _close_all(fds: List[int]) -> None:
  for fd in fds:
    os.close(fd)
  fds.clear()


def _wait(workers: List[worker_process.Worker], request: TrainingRequest,
          watch: stall_watch.StallWatch):
  """(None, None) when all workers succeeded; (the first failure, None) as
  soon as one failed (the others are still running); (None, N) when the
  group, shrunk, stopped at one step to grow to N workers
  (`restarts.grow_to`).

  Raises:
    TrainingProcessError: every worker alive and none progressing for the
      stall limit (`stall_watch`); or late to finish (`FINISH_GRACE_S`).
  """
  count = len(workers)
  first_done = None
  started = time.monotonic()
  _, most = request.plan.worker_bounds()
  start_step = _step(request.checkpoint_dir) if count < most else None
  next_look = started
  while True:
    codes = [w.poll() for w in workers]
    failed = [w for w, code in zip(workers, codes) if code not in (None, 0) or
              (code == 0 and not child_process.reported(w.result_path))]
    if preemption.requested():
      _wait_saved(workers)  # `run` raises PreemptedError.
      return None, None
    if failed:
      first = _first_failure(failed)
      if first.report().get('error') == errors.PreemptedError.__name__:
        _wait_saved(workers)  # The others stop at the same step and save.
      return _failure(first, count), None
    if all(code == 0 for code in codes):
      return None, None
    if count < most and first_done is None and time.monotonic() > next_look:
      next_look = time.monotonic() + 1.0
      grow = restarts_lib.grow_to(
          count, most, _capacity_now(running=count),
          time.monotonic() - started,
          _step(request.checkpoint_dir) not in (None, start_step))
      if grow is not None:
        return _stop_to_grow(workers, grow)
    if first_done is None and 0 in codes:
      first_done = time.monotonic()
    if first_done is not None and (
        time.monotonic() - first_done > FINISH_GRACE_S):
      late = [w.index for w, code in zip(workers, codes) if code is None]
      raise errors.TrainingProcessError(
          f'Worker(s) {late} of the local {count}-worker training were still '
          f'running {FINISH_GRACE_S:.0f} s after another had finished, so '
          'they were stopped. A worker that returns from run_fn early (or '
          'trains fewer steps) leaves the others waiting for it: every '
          'worker must run the same training. Expected every worker to '
          f'finish within {FINISH_GRACE_S:.0f} s of the first. Received: '
          f'{late} still running. Make every worker train the same steps. '
          'Their output is above, '
          "prefixed '[worker i]'. Nothing was published.")
    stalled = watch.stalled()
    if stalled:
      raise errors.TrainingProcessError(stall_watch.message(
          stalled, f'the local {count}-worker training', watch.seconds))
    time.sleep(worker_process.POLL_S)


def _step(checkpoint_dir: Optional[str]) -> Optional[int]:
  """The step of the last resume checkpoint, or None."""
  try:
    point = resume.latest(checkpoint_dir) if checkpoint_dir else None
  except errors.CheckpointError:
    return None
  return point['step'] if point else None


def _stop_to_grow(workers: List[worker_process.Worker], grow: int):
  """Asks every worker to stop as on a SIGTERM (they agree on one step and
  save it), waits; (None, `grow`), or (None, None) if they had finished."""
  logging.info('Stopping the %d workers at one step, saved, to restart '
               'them as %d.', len(workers), grow)
  for worker in workers:
    if worker.poll() is None:
      worker.process.send_signal(signal.SIGTERM)
  _wait_saved(workers)
  if all(w.poll() == 0 and child_process.reported(w.result_path)
         for w in workers):
    return None, None  # They finished first.
  return None, grow


def _wait_saved(workers: List[worker_process.Worker]) -> None:
  """After a SIGTERM: waits until every worker ended (each saves its step
  first), `PREEMPTION_WAIT_S` at most."""
  deadline = time.monotonic() + PREEMPTION_WAIT_S
  while (any(w.poll() is None for w in workers) and
         time.monotonic() < deadline):
    time.sleep(worker_process.POLL_S)


def _first_failure(failed: List[worker_process.Worker]) -> worker_process.Worker:
  """The worker whose failure came first: one that died without reporting
  an error (the others' errors follow from losing it), else the first to
  report."""
  def when(worker):
    if worker.report().get('error') is None:
      return -1.0  # Died: the cause.
    try:
      return os.path.getmtime(worker.result_path)
    except OSError:
      return float('inf')
  return min(failed, key=lambda w: (when(w), w.index))


def _failure(worker: worker_process.Worker, count: int) -> restarts_lib.WorkerFailure:
  """How `worker` failed. A worker that SIGTERM stopped with its group (it
  got the signal alone: its machine was preempted, not this process)
  lost nothing, and is no error of the training: a death, restarted."""
  where = (f'raised in worker {worker.index} of the local {count}-worker '
           'training; the other workers were stopped')
  error = child_process.read_error(worker.result_path, where)
  how = child_process.describe_exit(worker.process.returncode)
  if isinstance(error, errors.PreemptedError):
    error, how = None, ('was stopped by SIGTERM (the group stopped at one '
                        'step and saved it)')
  return restarts_lib.WorkerFailure(worker=worker.index, how=how,
                                    error=error,
                                    after_s=worker.seconds or 0.0)


def _keep_logs(workers: List[worker_process.Worker], logs_dir: str) -> None:
  """Appends each stopped worker's output to `logs_dir`/worker-<i>.log."""
  try:
    tf.io.gfile.makedirs(logs_dir)
    for worker in workers:
      with open(worker.log_path, 'rb') as f:
        new = f.read()
      kept = os.path.join(logs_dir, f'worker-{worker.index}.log')
      old = b''
      if tf.io.gfile.exists(kept):
        with tf.io.gfile.GFile(kept, 'rb') as f:
          old = f.read()
      atomic_files.write_bytes(kept, old + new)
      if worker.dropped:
        logging.warning('%d line(s) of worker %d could not be shown (stderr '
                        'closed); all its output is in %s.', worker.dropped,
                        worker.index, kept)
  except (OSError, tf.errors.OpError) as e:
    logging.warning('The workers\' output could not be kept in %s: %s',
                    logs_dir, e)


def _clear(directory: str) -> None:
  """Empties the chief's export folder before its group starts again."""
  if directory:
    removal.remove_tree(directory)


def _write_summary(model_run: str, entries: List[Dict[str, Any]],
                   restarts: List[restarts_lib.Restart],
                   changes: List[restarts_lib.SizeChange]) -> None:
  """Writes `workers.json` into the ModelRun: who trained, how long (the
  group that finished), every restart before it, and every change of the
  group's size (`size_changes`: from, to, why, where it resumed)."""
  summary = {'num_workers': len(entries), 'workers': entries,
             'restarts': [r.to_json() for r in restarts],
             'size_changes': [c.to_json() for c in changes]}
  fileio.makedirs(model_run)
  atomic_files.write_json(os.path.join(model_run, SUMMARY_FILE), summary,
                          indent=2)
