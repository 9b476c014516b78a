"""Runs a training in a child Python process, and reads back its result.

Used for training under the other Keras or on another Keras backend
(`dispatch`, through `train_in_child`, in the environment
`TrainingPlan.child_env` gives), and for each worker of a local
multi-worker training (`local_cluster`). The parent writes
a request JSON (a `TrainingRequest`: artifacts as TFX serialises them, exec
properties, where the export goes) and starts `python -m generic_trainer.training.child REQUEST`
(`CHILD_MODULE`); the child writes a result JSON: `{}` on success, or the name and message of
the error it raised. The child dies with its parent (PR_SET_PDEATHSIG), so no
training outlives a killed orchestrator; a parent that gets SIGTERM forwards
it to the child instead, and waits (at most `keys.PREEMPTION_WAIT_S`) while
the child saves its step (`generic_trainer.system.preemption`). A child
alive but stalled (no new step for `keys.STALL_LIMIT_S`: `stall_watch`) is
killed.
"""

import json
import os
import signal
import subprocess
import sys
from typing import Any, Callable, Dict, List, Optional
import site
import sysconfig

from generic_trainer.system import atomic_files
from generic_trainer import errors
from generic_trainer.system import scratch
from generic_trainer.system import trust
from generic_trainer.system import preemption
from generic_trainer.keys import HEARTBEAT_FILE_ENV, PREEMPTION_WAIT_S
from generic_trainer.keys import PARENT_PID_ENV
from generic_trainer.keys import VERIFIED_FOLDERS_ENV
from generic_trainer.plan.request import TrainingRequest
from generic_trainer.launch import stall_watch
from generic_trainer.system.lazy import ctypes

CHILD_MODULE = 'generic_trainer.training.child'


def train_in_child(request: TrainingRequest, env: Dict[str, str],
                   what: str) -> None:
  """Trains `request` in one child process whose environment is this one's
  plus `env`, and waits for it.

  `what` names the child in messages: 'tf_keras', 'jax backend'.

  Raises:
    The child's error as the same GenericTrainer error class, with the
    child's message; `TrainingProcessError` if it died without reporting
    one, or stalled (`stall_watch`).
  """
  seconds = stall_watch.limit()
  with scratch.folder('child') as tmp:
    request_path = os.path.join(tmp, 'request.json')
    result_path = os.path.join(tmp, 'result.json')
    heartbeat = os.path.join(tmp, stall_watch.HEARTBEAT_FILE)
    write_request(request_path, request, result_path)
    watch = stall_watch.StallWatch([f'the {what} training process'],
                                   [heartbeat], [None], seconds)
    process = start(request_path, child_env({**env,
                                             HEARTBEAT_FILE_ENV: heartbeat}))
    try:
      returncode = wait(process, watch)
    except errors.TrainingProcessError:
      process.kill()
      process.wait()
      raise
    error = read_error(result_path, f'raised in the {what} training process')
    if error is not None:
      raise error
    if preemption.requested():
      raise errors.PreemptedError(
          f'SIGTERM ended the {what} training process (it '
          f'{describe_exit(returncode)}) before or after its training steps, '
          'so no step was lost; nothing was published. Expected after a '
          'SIGTERM: the process stops and saves. Received: SIGTERM. Run the '
          'same training '
          'again: it resumes from its last resume checkpoint.')
    if returncode != 0 or not reported(result_path):
      raise errors.TrainingProcessError(
          f'The {what} training process {describe_exit(returncode)} without '
          'reporting an error; its output is above. Expected it to train and '
          f'report. Received: it {describe_exit(returncode)}. Look at its '
          'output for the cause (out of memory, a crash in native code), and '
          'run the training again. Nothing was published.')


def write_request(path: str, request: TrainingRequest,
                  result_path: str) -> None:
  """Writes what the child needs: the request, and where to report."""
  atomic_files.write_json(path, {'request': request.to_json(),
                                'result_path': result_path}, mode=0o600)


def read_request(path: str) -> Dict[str, Any]:
  """What `write_request` wrote at `path`, read only from a folder of this
  user's alone (`trust`): the folder and the file are opened without
  following a link and checked on their descriptors, so that nobody else
  can have put a request of theirs (and the module it names) there.

  Raises:
    UnsafeFolderError: the folder or the file is not this user's alone,
      or is a link.
  """
  folder, name = os.path.split(os.path.abspath(path))
  folder_fd, why = trust.open_trusted(folder, folder=True)
  where = f'its folder {folder} is {why}'
  fd = None
  if folder_fd is not None:
    try:
      fd, why = trust.open_trusted(name, dir_fd=folder_fd)
      where = f'it is {why}'
    finally:
      os.close(folder_fd)
  if fd is None:
    raise errors.UnsafeFolderError(
        f'The training request {path} is not safe to read: {where}. A '
        'training process reads its request (the module it imports, the data '
        'it reads, where it writes) only from a scratch folder of yours '
        'alone, which nobody else can have written. Expected a file of '
        'yours, not writable by group or others, in such a folder. Received: '
        f'{path}. Run the training again; if this happens again, check who '
        'else can write the temporary folder (TMPDIR).')
  with os.fdopen(fd, encoding='utf-8') as f:
    return json.load(f)


def child_env(overrides: Optional[Dict[str, str]] = None) -> Dict[str, str]:
  """This process's environment, `overrides`, the folders this process
  found safe to hold this user's folders (`trust.verified_env`), and this
  package importable.

  Run from a checkout, the checkout goes first on PYTHONPATH, so that the
  child imports the same code; installed, PYTHONPATH is left as the user
  set it (putting site-packages first would shadow the user's own path).
  """
  env = dict(os.environ)
  env.update(overrides or {})
  env[VERIFIED_FOLDERS_ENV] = trust.verified_env()  # `trust.check_ancestors`
  parent = _package_parent()
  if not _installed(parent):
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in [parent, env.get('PYTHONPATH')] if p)
  return env


def start(request_path: str, env: Dict[str, str],
          wrap_command: Optional[Callable[[List[str]], List[str]]] = None,
          **popen_kwargs) -> subprocess.Popen:
  """Starts the child on `request_path`; it dies if this process dies, and
  gets the SIGTERM this process gets (`preemption.track`).

  `wrap_command(command)`, when given, returns the command to run instead,
  one that execs `command` in the end (`private_network.Entry.command`).
  Nothing runs between fork and exec (no preexec_fn): the child asks for
  its death signal itself (`die_with_parent`). With a preexec_fn Python
  forks with the process's fork handlers, and where gRPC is busy in this
  process (Beam's runner after a Transform, an ML Metadata client) its
  handlers can start a poller in the forked copy, whose descriptors the
  copy then closes before exec: gRPC aborts it, and the child is reported
  killed by SIGABRT before it began (3 of 300 starts beside busy gRPC
  threads with the preexec_fn this used before, none without:
  `tests/test_child_process_start.py`).
  """
  env = dict(env, **{PARENT_PID_ENV: str(os.getpid())})
  command = [sys.executable, '-m', CHILD_MODULE, request_path]
  process = subprocess.Popen(
      wrap_command(command) if wrap_command else command, env=env,
      **popen_kwargs)
  preemption.track(process)
  return process


def die_with_parent() -> None:
  """In a child `start` started (`PARENT_PID_ENV` set), first thing: asks
  the kernel to SIGKILL it when the thread that started it ends
  (PR_SET_PDEATHSIG), then ends it at once, saying so, if that process
  has already gone (the child was left to another parent meanwhile)."""
  parent = os.environ.get(PARENT_PID_ENV)
  if not parent:
    return
  die = _die_with_parent_fn()
  if die is not None:
    die()
  if os.getppid() != int(parent):
    sys.stderr.write(
        f'The process that started this training (pid {parent}) ended '
        'before it began; nothing was trained.\n')
    raise SystemExit(1)


def wait(process: subprocess.Popen,
         watch: Optional[stall_watch.StallWatch] = None) -> int:
  """Waits for `process`; returns its exit status. After a SIGTERM (which
  `preemption` forwarded to it) it waits `PREEMPTION_WAIT_S` at most, then
  kills it.

  Raises:
    TrainingProcessError: `watch` says it stalled (the caller kills it).
  """
  while True:
    try:
      return process.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
      pass
    stalled = watch.stalled() if watch and not preemption.requested() else None
    if stalled:
      raise errors.TrainingProcessError(stall_watch.message(
          stalled, 'the training', watch.seconds))
    if preemption.requested():
      try:
        return process.wait(timeout=PREEMPTION_WAIT_S)
      except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def read_error(result_path: str, where: str) -> Optional[Exception]:
  """The error the child reported, as the same GenericTrainer class, or None.

  `where` ends the message, e.g. 'raised in the tf_keras training process'.
  """
  if not os.path.exists(result_path):
    return None
  with open(result_path) as f:
    try:
      result = json.load(f)
    except ValueError:
      return None
  if not result.get('error'):
    return None
  cls = getattr(errors, result['error'], None)
  if not (isinstance(cls, type) and
          issubclass(cls, errors.GenericTrainerError)):
    cls = errors.TrainingProcessError
  # Where it was raised ends the reason, before the traceback it carries.
  reason, header, frames = result['message'].partition(
      errors.TRACEBACK_HEADER)
  return cls(f'{reason}\n({where}){header}{frames}')


def reported(result_path: str) -> bool:
  """Whether the child wrote its result (it always does unless something
  ended the process under it: a signal, or `os._exit` outside user code)."""
  return os.path.exists(result_path)


def describe_exit(returncode: int) -> str:
  """'was killed by signal 9 (SIGKILL)' or 'exited with code 1'."""
  if returncode < 0:
    try:
      name = f' ({signal.Signals(-returncode).name})'
    except ValueError:
      name = ''
    return f'was killed by signal {-returncode}{name}'
  return f'exited with code {returncode}'


def _package_parent() -> str:
  """The folder that holds the `generic_trainer` package."""
  package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  return os.path.dirname(package)


def _installed(folder: str) -> bool:
  """Whether `folder` is one of the interpreter's site-packages folders
  (the child finds the package there without PYTHONPATH)."""
  folders = set(getattr(site, 'getsitepackages', lambda: [])())
  folders.add(getattr(site, 'getusersitepackages', lambda: '')())
  folders.update(sysconfig.get_paths().get(k, '') for k in ('purelib',
                                                            'platlib'))
  real = os.path.realpath(folder)
  return any(f and os.path.realpath(f) == real for f in folders)


def _die_with_parent_fn():
  """A function that sets PR_SET_PDEATHSIG (SIGKILL) for this process, or
  None where libc has no prctl."""
  try:
    prctl = ctypes.CDLL('libc.so.6', use_errno=True).prctl
  except (OSError, AttributeError):
    return None
  return lambda: prctl(1, signal.SIGKILL)  # 1 is PR_SET_PDEATHSIG.
