"""The one launcher: every training runs through `train(request, entry)`.

The executor and the command reach it through `checks.attempt`, the
notebook `Estimator` directly, a child process and each local worker from
their program (`launch.child`); none of them asks where it trains. The
plan decided that (`plan.plan.Where`), and it names the launcher:

  - `LOCAL_WORKERS`: `num_workers` local processes (`local_cluster`);
  - `KERAS_CHILD`, `BACKEND_CHILD`: one child process under the plan's
    tf.keras or Keras backend (`child_process`): a tf.keras 2 module in a
    Keras 3 pipeline, a JAX training in a TensorFlow process;
  - `HERE`: this process (`here`).

Validation and publication stay with the caller (`checks.attempt`).
"""

from typing import Any, Callable, Dict, Optional

from absl import logging

from generic_trainer.launch import child_process
from generic_trainer.launch import here
from generic_trainer.launch import local_cluster
from generic_trainer.loop import train_result
from generic_trainer.plan import plan as plan_lib
from generic_trainer.plan.plan import Where
from generic_trainer.plan.request import TrainingRequest


def train(request: TrainingRequest,
          entry: Optional[Callable[[Any], None]] = None
          ) -> Optional[Dict[str, Any]]:
  """Trains `request` with the launcher its plan names; returns the
  training record it wrote (`loop.train_result`), or None (a `run_fn`
  that wrote none).

  `entry` is the entry point, when the caller's process loaded it (the
  plan resolved here); otherwise the process that trains loads it
  (`plan.complete`).

  Raises:
    What the training raises (see `here.train`), in whichever process it
      ran; TrainingProcessError when a child process cannot give what the
      plan says, or died without reporting an error.
  """
  _LAUNCHERS[request.plan.where](request, entry)
  return train_result.read(request.model_run_dir())


def _here(request: TrainingRequest, entry) -> None:
  if entry is None:
    plan, entry = plan_lib.complete(request.plan)
    request = request.with_plan(plan)
  here.train(request, entry)


def _local_workers(request: TrainingRequest, entry) -> None:
  del entry  # Each worker loads the module itself.
  local_cluster.run(request)


def _keras_child(request: TrainingRequest, entry) -> None:
  del entry  # The child loads the module under its own tf.keras.
  _in_child(request, request.plan.keras_version)


def _backend_child(request: TrainingRequest, entry) -> None:
  del entry  # The child loads the module on its own backend.
  _in_child(request, f'{request.plan.backend} backend')


def _in_child(request: TrainingRequest, what: str) -> None:
  logging.info('Training in a child process with %s.', what)
  child_process.train_in_child(request.in_child(), request.plan.child_env(),
                               what)


_LAUNCHERS = {Where.HERE: _here, Where.LOCAL_WORKERS: _local_workers,
              Where.KERAS_CHILD: _keras_child,
              Where.BACKEND_CHILD: _backend_child}
