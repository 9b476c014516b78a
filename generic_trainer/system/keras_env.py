"""Which Keras this process has, and the environment that chooses it.

Two facts are fixed once per process, and only then:
  - what `tf.keras` means (Keras 3 or tf.keras 2, `keras_version`): TF 2.16
    reads `TF_USE_LEGACY_KERAS` when `tf.keras` is first used. The variable
    alone does not tell which: importing `tensorflow_transform` sets it to
    1 if unset, after `tf.keras` may already mean Keras 3. So we read what
    `tf.keras` resolved to (`resolved_tf_keras`);
  - the Keras 3 backend (`backend`): Keras reads `KERAS_BACKEND` once, when
    `keras` is first imported.
The plan (`plan.plan`) asks these questions once, when it decides where a training
runs: in this process when it has (or can still be given) what the training
needs, else in a child process started with `child_env`.

Importing TensorFlow costs about 1.5 s more once jax is installed, in every
process: `tensorflow/lite/python/util.py` imports jax when it can.
"""

import os
import sys
from typing import Dict, Optional

from generic_trainer.keys import KERAS3, KERAS_BACKEND_ENV, TF_KERAS
from generic_trainer.system import versions
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import tf

_LEGACY_ENV = 'TF_USE_LEGACY_KERAS'


def resolved_tf_keras() -> Optional[str]:
  """What `tf.keras` means in this process, or None if not decided yet.

  Until first use, `tf.keras` is a `KerasLazyLoader`; once used, TF replaces
  it with the module it chose (`keras._tf_keras.keras` or `tf_keras...`).
  """
  imported = sys.modules.get('tensorflow')  # Not `tf`, which would import.
  current = vars(imported).get('keras') if imported is not None else None
  if current is None:
    return None
  state = vars(current)
  if type(current).__name__ == 'KerasLazyLoader':
    if not state.get('_tfll_initialized'):
      return None
    return (TF_KERAS if state.get('_tfll_keras_version') == 'tf_keras'
            else KERAS3)
  return TF_KERAS if current.__name__.startswith('tf_keras') else KERAS3


def claim_tf_keras(keras_version: Optional[str]) -> bool:
  """Whether `tf.keras` here is, or can now be made, `keras_version` (None:
  any will do). When it is not decided yet, decides it (imports TF)."""
  if not keras_version:
    return True
  current = resolved_tf_keras()
  if current is None:
    os.environ.update(keras_env(keras_version))
    tf.keras.layers  # pylint: disable=pointless-statement  # Resolves it.
    current = resolved_tf_keras()
  return current == keras_version


def trained_on() -> str:
  """The Keras a training in this process trains on, as every run says it
  (the logs, train_result.json's `keras`): 'Keras 3.12.0 (backend
  tensorflow)' or 'tf_keras 2.16.0 (tf.keras 2)', by what `tf.keras`
  means here (decided now, from the environment, if nothing has yet)."""
  if resolved_tf_keras() is None:
    tf.keras.layers  # pylint: disable=pointless-statement  # Resolves it.
  if resolved_tf_keras() == TF_KERAS:
    return f'{versions.keras_release(tf_keras=True)} (tf.keras 2)'
  return (f'{versions.keras_release(tf_keras=False)} (backend '
          f'{process_backend()})')


def process_backend() -> str:
  """The Keras backend of this process ('tensorflow', 'jax'...); imports
  Keras when nothing has yet, which fixes it from `KERAS_BACKEND`."""
  return keras.backend.backend()


def has_backend(backend: Optional[str]) -> bool:
  """Whether Keras here computes with `backend` (None: any will do)."""
  return backend is None or process_backend() == backend


def choose_before_import(keras_version: Optional[str],
                         backend: Optional[str]) -> None:
  """Sets the environment that gives this process `keras_version` and
  `backend`, for what is not imported yet (the `generic-trainer` command,
  whose one training owns its process). What is imported already stays:
  the plan then trains in a child."""
  if resolved_tf_keras() is None:
    os.environ.update(keras_env(keras_version))
  if 'keras' not in sys.modules:
    os.environ.update(backend_env(backend))


def keras_env(keras_version: Optional[str]) -> Dict[str, str]:
  """The environment variable that makes `tf.keras` mean `keras_version`."""
  if not keras_version:
    return {}
  return {_LEGACY_ENV: '1' if keras_version == TF_KERAS else '0'}


def backend_env(backend: Optional[str]) -> Dict[str, str]:
  """The environment that makes a new process's Keras compute with
  `backend`."""
  return {KERAS_BACKEND_ENV: backend} if backend else {}


def child_env(keras_version: Optional[str],
              backend: Optional[str]) -> Dict[str, str]:
  """The environment of a child process that trains with both."""
  return {**keras_env(keras_version), **backend_env(backend)}
