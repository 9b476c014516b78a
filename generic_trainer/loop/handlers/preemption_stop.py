"""PreemptionStop: after a SIGTERM, stop the training at the next step.

`generic_trainer.system.preemption` turns SIGTERM into a flag; this handler reads
it in `on_train_batch_end` and sets `model.stop_training`, as EarlyStopping
does, and `stopping`, which `ResumeCheckpoint` reads to save that step (not
the end of an epoch, and not as a training that stopped for good). The
epoch's evaluation, which Keras still runs after a stop, is cut to one
batch (`model.stop_evaluating`).

Workers of a group must stop at the same step: under
MultiWorkerMirroredStrategy the checkpoint reads values every worker joins
in, and a worker that trained one step more would wait for the others
forever. In a local group (`keys.STOP_FILE_ENV` names a file the group
shares) the chief decides: at its first step boundary after SIGTERM, it
writes the next step into the file and every worker stops there. No worker
can pass that step before the file is written: each step's gradients wait
for the chief's, and the chief writes before its next step. A worker that
got SIGTERM alone (its machine preempted, not the group's parent) asks the
chief for a stop through a file beside it (`request_file`); the chief
answers as if it had the signal, so the whole group stops at one step,
saves it, and ends with PreemptedError, which the parent restarts like a
death (`launch.restarts`) with no step repeated. The pods of a
TF_CONFIG cluster (a TFJob's, a TrainJob's) share the same file in the
resume checkpoint's folder, which they all reach (the executor names it);
without one, `watches` is False and SIGTERM ends the process at once.
"""

import os
from typing import Optional

import keras

from generic_trainer.system import preemption
from generic_trainer.keys import STOP_FILE_ENV


class PreemptionStop(keras.callbacks.Callback):
  """Stops the training at a step boundary once SIGTERM arrived.

  Args:
    is_chief: Whether this process decides the step of a group.
    num_workers: The processes that train together.
    stop_file: The file a local group's chief writes that step into; None
      (one process, the default from `keys.STOP_FILE_ENV`): stop at the
      first boundary after the signal.

  Attributes:
    stopping: Whether the training stopped for a preemption.
    watches: Whether it can stop at all: one process, or a group that
      shares a stop file.
  """

  def __init__(self, is_chief: bool = True, num_workers: int = 1,
               stop_file: Optional[str] = None):
    super().__init__()
    self.is_chief = is_chief
    self.stop_file = stop_file or os.environ.get(STOP_FILE_ENV) or None
    self.watches = num_workers <= 1 or self.stop_file is not None
    self.stopping = False
    self._batches = 0
    self._target: Optional[int] = None

  def on_train_begin(self, logs=None):
    self.stopping = False
    self._batches = 0
    self._target = None

  def on_train_batch_end(self, batch, logs=None):
    self._batches += 1
    if self.stopping:
      return
    target = self._decide()
    if target is not None and self._batches >= target:
      self.stopping = True
      self.model.stop_training = True

  def on_test_batch_end(self, batch, logs=None):
    if self.stopping:
      self.model.stop_evaluating = True

  def _decide(self) -> Optional[int]:
    """The count of step boundaries to stop at, once known."""
    if self._target is not None or not self.watches:
      return self._target
    if self.stop_file is None:
      if preemption.requested():
        self._target = self._batches
    elif self.is_chief:
      if preemption.requested() or os.path.exists(
          request_file(self.stop_file)):
        self._target = self._batches + 1
        preemption.write_stop_step(self.stop_file, self._target)
    elif os.path.exists(self.stop_file):
      self._target = preemption.read_stop_step(self.stop_file)
    elif preemption.requested() and not os.path.exists(
        request_file(self.stop_file)):
      preemption.write_stop_step(request_file(self.stop_file), 0)
    return self._target


def request_file(stop_file: str) -> str:
  """Where a worker that got SIGTERM asks its group's chief to stop."""
  return stop_file + '.request'

