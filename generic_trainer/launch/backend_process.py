"""Runs training on the Keras backend it asks for (TensorFlow or JAX).

Keras 3 reads its backend from `KERAS_BACKEND` once, when `keras` is first
imported, and keeps it for the life of the process. So, as for `tf.keras`
(`keras_process`):
  - Keras not imported yet: the variable may still choose (`backend_env`;
    only the `generic-trainer` command does so, for --backend, as the one
    training of its process);
  - Keras already on the backend asked for: train in this process;
  - otherwise: train in a child process with `KERAS_BACKEND` set, so that
    one pipeline process (whose Evaluator needs TensorFlow's Keras) can run
    a JAX training. Validation and publication stay in the parent, which
    needs TensorFlow only: the JAX export is a TensorFlow SavedModel.
Whether to do so is `dispatch`'s decision.

Importing TensorFlow costs about 1.5 s more once jax is installed, in every
process: `tensorflow/lite/python/util.py` imports jax when it can.
"""

import sys
from typing import Dict, Optional

from generic_trainer.core.request import TrainingRequest
from generic_trainer.keys import KERAS_BACKEND_ENV
from generic_trainer.launch import child_process


def process_backend() -> str:
  """The Keras backend of this process ('tensorflow', 'jax'...); imports
  Keras when nothing has yet, which fixes it from `KERAS_BACKEND`."""
  import keras  # pylint: disable=g-import-not-at-top
  return keras.backend.backend()


def can_train_in_process(backend: Optional[str]) -> bool:
  """Whether Keras here computes with `backend` (None: any will do)."""
  return backend is None or process_backend() == backend


def backend_env(backend: Optional[str]) -> Dict[str, str]:
  """The environment that makes a new process's Keras compute with
  `backend`."""
  return {KERAS_BACKEND_ENV: backend} if backend else {}


def choose_before_import(backend: Optional[str]) -> Dict[str, str]:
  """`backend_env(backend)` when Keras is not imported yet (the process may
  still choose its backend), else {} (it is fixed; a child must train)."""
  return {} if 'keras' in sys.modules else backend_env(backend)


def run_in_child(request: TrainingRequest, backend: str) -> None:
  """Trains `request` in a child process whose Keras runs on `backend`.

  Raises the child's error as the same GenericTrainer error class, with the
  child's message; `TrainingProcessError` if it died without reporting one.
  """
  child_process.train_in_child(request, backend_env(backend),
                               f'{backend} backend')
