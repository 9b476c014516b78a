"""Runs training under the Keras a component asks for.

In TF 2.16 `tf.keras` means Keras 3 or tf.keras 2 (`tf_keras`), chosen once
per process from `TF_USE_LEGACY_KERAS` when `tf.keras` is first used. The
variable alone does not tell which: importing `tensorflow_transform` sets it
to 1 if unset, after `tf.keras` may already mean Keras 3. So we read what
`tf.keras` actually resolved to:
  - not resolved yet: set the variable and resolve it now, train in-process;
  - resolved to the Keras asked for: train in-process;
  - resolved to the other one: train in a child process with the variable
    set, so one pipeline can mix Keras 3 and legacy module files.
Validation and publication stay in the parent. The child dies with its
parent (PR_SET_PDEATHSIG), so no training outlives a killed orchestrator.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional

from generic_trainer import errors

KERAS3 = 'keras3'
TF_KERAS = 'tf_keras'
KERAS_VERSIONS = (KERAS3, TF_KERAS)
_LEGACY_ENV = 'TF_USE_LEGACY_KERAS'


def resolved_tf_keras() -> Optional[str]:
  """What `tf.keras` means in this process, or None if not decided yet.

  Until first use, `tf.keras` is a `KerasLazyLoader`; once used, TF replaces
  it with the module it chose (`keras._tf_keras.keras` or `tf_keras...`).
  """
  tf = sys.modules.get('tensorflow')
  current = vars(tf).get('keras') if tf is not None else None
  if current is None:
    return None
  state = vars(current)
  if type(current).__name__ == 'KerasLazyLoader':
    if not state.get('_tfll_initialized'):
      return None
    return (TF_KERAS if state.get('_tfll_keras_version') == 'tf_keras'
            else KERAS3)
  return TF_KERAS if current.__name__.startswith('tf_keras') else KERAS3


def can_train_in_process(keras_version: Optional[str]) -> bool:
  """Whether `tf.keras` here is, or can now be made, `keras_version`."""
  if not keras_version:
    return True
  current = resolved_tf_keras()
  if current is None:
    os.environ[_LEGACY_ENV] = '1' if keras_version == TF_KERAS else '0'
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.keras.layers  # pylint: disable=pointless-statement  # Resolves it.
    current = resolved_tf_keras()
  return current == keras_version


def run_in_child(keras_version: str, input_dict: Dict[str, List[Any]],
                 output_dict: Dict[str, List[Any]],
                 exec_properties: Dict[str, Any], serving_dir: str,
                 eval_dir: str, checkpoint_dir: Optional[str] = None) -> None:
  """Runs `training.train` in a child process under `keras_version`.

  Raises the child's error as the same GenericTrainer error class, with the
  child's message; `TrainingProcessError` if it died without reporting one.
  """
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.utils import json_utils  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory(prefix='generic_trainer_') as tmp:
    request_path = os.path.join(tmp, 'request.json')
    result_path = os.path.join(tmp, 'result.json')
    with open(request_path, 'w') as f:
      json.dump({
          'input_dict': artifact_utils.jsonify_artifact_dict(input_dict),
          'output_dict': artifact_utils.jsonify_artifact_dict(output_dict),
          'exec_properties': json_utils.dumps(exec_properties),
          'serving_dir': serving_dir,
          'eval_dir': eval_dir,
          'checkpoint_dir': checkpoint_dir,
          'result_path': result_path,
      }, f)
    env = dict(os.environ)
    env[_LEGACY_ENV] = '1' if keras_version == TF_KERAS else '0'
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in [_package_parent(), env.get('PYTHONPATH')] if p)
    returncode = subprocess.call(
        [sys.executable, '-m', 'generic_trainer.keras_process', request_path],
        env=env, preexec_fn=_die_with_parent)
    if os.path.exists(result_path):
      with open(result_path) as f:
        result = json.load(f)
      if result.get('error'):
        cls = getattr(errors, result['error'], None)
        if not (isinstance(cls, type) and
                issubclass(cls, errors.GenericTrainerError)):
          cls = errors.TrainingProcessError
        raise cls(f"{result['message']}\n(raised in the {keras_version} "
                  'training process)')
    if returncode != 0:
      how = (f'was killed by signal {-returncode}' if returncode < 0 else
             f'exited with code {returncode}')
      raise errors.TrainingProcessError(
          f'The {keras_version} training process {how} without reporting an '
          'error; its output is above. Nothing was published.')


def _package_parent() -> str:
  return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _die_with_parent() -> None:
  try:
    import ctypes  # pylint: disable=g-import-not-at-top
    ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
  except OSError:
    pass


def _main(request_path: str) -> int:
  with open(request_path) as f:
    request = json.load(f)
  result = {}
  try:
    from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
    from tfx.utils import json_utils  # pylint: disable=g-import-not-at-top
    from generic_trainer import training  # pylint: disable=g-import-not-at-top
    training.train(
        artifact_utils.parse_artifact_dict(request['input_dict']),
        artifact_utils.parse_artifact_dict(request['output_dict']),
        json_utils.loads(request['exec_properties']),
        request['serving_dir'], request['eval_dir'],
        request.get('checkpoint_dir'))
  except Exception as e:  # pylint: disable=broad-except
    result = {'error': type(e).__name__, 'message': str(e)}
  with open(request['result_path'], 'w') as f:
    json.dump(result, f)
  return 1 if result else 0


if __name__ == '__main__':
  sys.exit(_main(sys.argv[1]))
