"""Which `model.fit` calls a training makes, fresh or resumed: a pure decision.

Keras's `fit` starts at an epoch (`initial_epoch`), never inside one, so a
training resumed at batch b of epoch e makes two calls: the rest of epoch e
(`steps_per_epoch - b` steps, batches numbered from b), then the epochs
after. The train data is skipped to where the checkpoint was:

  - steps per epoch known (`train_args.num_steps`, or the statistics):
    the train dataset is one seeded stream across epochs, and step s of
    the training reads its batch s, so the calls skip the batches the
    steps before them read, and the order is that of an uninterrupted
    training;
  - unknown (each epoch reads the split once, to its end): each epoch
    iterates the dataset again; the resumed epoch skips b batches of a
    new iteration, whose order is not the interrupted one's.
"""

from typing import Any, Dict, List, Optional

import attr

from generic_trainer.errors import CheckpointError


@attr.s(frozen=True)
class FitCall:
  """One `model.fit` call.

  Attributes:
    initial_epoch: `fit`'s `initial_epoch`.
    epochs: `fit`'s `epochs` (the epoch it stops before).
    steps_per_epoch: `fit`'s `steps_per_epoch`; None: to the data's end.
    skip_batches: Batches of the train dataset to skip first.
    batch_offset: Batches already trained in `initial_epoch`, added to the
      index of every batch the handlers see.
  """
  initial_epoch = attr.ib(type=int)
  epochs = attr.ib(type=int)
  steps_per_epoch = attr.ib(type=Optional[int])
  skip_batches = attr.ib(type=int, default=0)
  batch_offset = attr.ib(type=int, default=0)


def fit_calls(epochs: int, steps_per_epoch: Optional[int],
              resumed: Optional[Dict[str, Any]] = None) -> List[FitCall]:
  """The `fit` calls of a training of `epochs` epochs.

  Args:
    epochs: Epochs of the whole training.
    steps_per_epoch: Steps per epoch; None when each epoch reads the train
      split once.
    resumed: Where the checkpoint resumed from (`resume.latest`: `epoch`
      done, `batch` done in the next, `stopped` by a handler), or None.

  Returns:
    The calls, in order; none when the checkpoint's training had finished
    or stopped (only the export is left).

  Raises:
    CheckpointError: the checkpoint's batch does not fit in an epoch.
  """
  if resumed is None:
    return [FitCall(0, epochs, steps_per_epoch)]
  epoch, batch = resumed['epoch'], resumed['batch']
  if resumed.get('stopped') or epoch >= epochs:
    return []
  if steps_per_epoch and batch >= steps_per_epoch:
    raise CheckpointError(
        f'The resume checkpoint is at batch {batch} of epoch {epoch + 1}, '
        f'but this training has {steps_per_epoch} steps per epoch: it was '
        'written by another schedule. Delete the checkpoint folder to start '
        f'over. Received: {resumed!r}. Expected a checkpoint of this '
        'schedule.')
  calls = []
  stream = bool(steps_per_epoch)
  if batch:
    calls.append(FitCall(
        epoch, epoch + 1, steps_per_epoch - batch if stream else None,
        skip_batches=epoch * steps_per_epoch + batch if stream else batch,
        batch_offset=batch))
    epoch += 1
  if epoch < epochs:
    calls.append(FitCall(epoch, epochs, steps_per_epoch,
                         skip_batches=epoch * steps_per_epoch if stream
                         else 0))
  return calls
