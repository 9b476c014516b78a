"""Runs `training.train` in a child Python process, and reads back its result.

Used for training under the other Keras (`keras_process`) and for each
worker of a local multi-worker training (`local_cluster`). The parent writes
a request JSON (artifacts as TFX serialises them, exec properties, where the
export goes) and starts `python -m generic_trainer.launch.child_process REQUEST`;
the child writes a result JSON: `{}` on success, or the name and message of
the error it raised. The child dies with its parent (PR_SET_PDEATHSIG), so no
training outlives a killed orchestrator.
"""

import json
import os
import signal
import subprocess
import sys
from typing import Any, Dict, List, Optional

from generic_trainer import errors


def write_request(path: str, input_dict: Dict[str, List[Any]],
                  output_dict: Dict[str, List[Any]],
                  exec_properties: Dict[str, Any], serving_dir: str,
                  eval_dir: str, result_path: str,
                  checkpoint_dir: Optional[str] = None) -> None:
  """Writes what the child needs to call `training.train`."""
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.utils import json_utils  # pylint: disable=g-import-not-at-top
  with open(path, 'w') as f:
    json.dump({
        'input_dict': artifact_utils.jsonify_artifact_dict(input_dict),
        'output_dict': artifact_utils.jsonify_artifact_dict(output_dict),
        'exec_properties': json_utils.dumps(exec_properties),
        'serving_dir': serving_dir,
        'eval_dir': eval_dir,
        'checkpoint_dir': checkpoint_dir,
        'result_path': result_path,
    }, f)


def child_env(overrides: Optional[Dict[str, str]] = None) -> Dict[str, str]:
  """This process's environment, `overrides`, and this package importable."""
  env = dict(os.environ)
  env.update(overrides or {})
  env['PYTHONPATH'] = os.pathsep.join(
      p for p in [_package_parent(), env.get('PYTHONPATH')] if p)
  return env


def start(request_path: str, env: Dict[str, str],
          **popen_kwargs) -> subprocess.Popen:
  """Starts the child on `request_path`; it dies if this process dies."""
  return subprocess.Popen(
      [sys.executable, '-m', 'generic_trainer.launch.child_process', request_path],
      env=env, preexec_fn=_die_with_parent_fn(), **popen_kwargs)


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
  return cls(f"{result['message']}\n({where})")


def describe_exit(returncode: int) -> str:
  """'was killed by signal 9' or 'exited with code 1'."""
  if returncode < 0:
    return f'was killed by signal {-returncode}'
  return f'exited with code {returncode}'


def _package_parent() -> str:
  """The folder that holds the `generic_trainer` package."""
  package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  return os.path.dirname(package)


def _die_with_parent_fn():
  """A function for Popen's preexec_fn that sets PR_SET_PDEATHSIG, or None.

  libc is loaded here, in the parent: between fork and exec the child only
  makes the call (loading a library there can deadlock when the parent has
  threads, as it does while it streams workers' logs).
  """
  try:
    import ctypes  # pylint: disable=g-import-not-at-top
    prctl = ctypes.CDLL('libc.so.6', use_errno=True).prctl
  except (OSError, AttributeError):
    return None
  return lambda: prctl(1, signal.SIGKILL)  # 1 is PR_SET_PDEATHSIG.


def _main(request_path: str) -> int:
  with open(request_path) as f:
    request = json.load(f)
  result = {}
  try:
    from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
    from tfx.utils import json_utils  # pylint: disable=g-import-not-at-top
    from generic_trainer.core import training  # pylint: disable=g-import-not-at-top
    training.train(
        artifact_utils.parse_artifact_dict(request['input_dict']),
        artifact_utils.parse_artifact_dict(request['output_dict']),
        json_utils.loads(request['exec_properties']),
        request['serving_dir'], request['eval_dir'],
        request.get('checkpoint_dir'))
    strategies = sys.modules.get('generic_trainer.core.strategies')
    if strategies is not None and strategies.replicas_in_sync():
      result['replicas_in_sync'] = max(strategies.replicas_in_sync().values())
  except Exception as e:  # pylint: disable=broad-except
    result = {'error': type(e).__name__, 'message': str(e)}
  with open(request['result_path'], 'w') as f:
    json.dump(result, f)
  return 1 if result.get('error') else 0


if __name__ == '__main__':
  sys.exit(_main(sys.argv[1]))
