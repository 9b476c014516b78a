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
Validation and publication stay in the parent. The child is run by
`child_process`, and dies with its parent. Whether to do so is
`dispatch`'s decision.
"""

import os
import sys
from typing import Dict, Optional

from generic_trainer.core.request import TrainingRequest
from generic_trainer.keys import KERAS3, TF_KERAS
from generic_trainer.launch import backend_process
from generic_trainer.launch import child_process

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


def run_in_child(request: TrainingRequest) -> None:
  """Trains `request` in a child process under `request.keras_version` (on
  the component's `backend`, when it names one).

  Raises the child's error as the same GenericTrainer error class, with the
  child's message; `TrainingProcessError` if it died without reporting one.
  """
  env = {**keras_env(request.keras_version),
         **backend_process.backend_env(request.backend)}
  child_process.train_in_child(request, env, request.keras_version)


def keras_env(keras_version: Optional[str]) -> Dict[str, str]:
  """The environment variable that makes `tf.keras` mean `keras_version`."""
  if not keras_version:
    return {}
  return {_LEGACY_ENV: '1' if keras_version == TF_KERAS else '0'}
