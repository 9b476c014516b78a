"""Trains a request where its plan says (`core.plan.Where`): a switch.

  - `LOCAL_WORKERS`: `num_workers` local processes (`local_cluster`);
  - `KERAS_CHILD`, `BACKEND_CHILD`: one child process under the plan's
    tf.keras or Keras backend (`child_process`): a tf.keras 2 module in a
    Keras 3 pipeline, a JAX training in a TensorFlow process;
  - `HERE`: this process (`core.training`).

The decision itself is `core.plan.resolve`'s; nothing here asks again.
Validation and publication stay with the caller (`core.attempt`).
"""

from typing import Any, Callable, Optional

from absl import logging

from generic_trainer.core import plan as plan_lib
from generic_trainer.core import training
from generic_trainer.core.plan import Where
from generic_trainer.core.request import TrainingRequest
from generic_trainer.launch import child_process


def train(request: TrainingRequest,
          entry: Optional[Callable[[Any], None]] = None) -> None:
  """Trains `request` where `request.plan.where` says.

  `entry` is the entry point, when the caller's process loaded it (the plan
  resolved here); otherwise the process that trains loads it
  (`plan.complete`).

  Raises:
    What the training raises (see `core.training.train`), in whichever
      process it ran; TrainingProcessError when a child process cannot
      give what the plan says, or died without reporting an error.
  """
  plan = request.plan
  if plan.where == Where.LOCAL_WORKERS:
    from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
    local_cluster.run(request)
  elif plan.where == Where.KERAS_CHILD:
    _in_child(request, plan.keras_version)
  elif plan.where == Where.BACKEND_CHILD:
    _in_child(request, f'{plan.backend} backend')
  else:
    if entry is None:
      completed, entry = plan_lib.complete(plan)
      request = TrainingRequest(
          request.input_dict, request.output_dict, request.exec_properties,
          request.serving_dir, request.eval_dir, completed)
    training.train(request, entry)


def _in_child(request: TrainingRequest, what: str) -> None:
  logging.info('Training in a child process with %s.', what)
  child_process.train_in_child(request.in_child(), request.plan.child_env(),
                               what)
