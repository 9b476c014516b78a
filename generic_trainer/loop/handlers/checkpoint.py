"""The checkpoint handler: Keras's ModelCheckpoint, configured from a spec,
each file written whole.

Keras's ModelCheckpoint saves with h5py's 'w', in place: a save interrupted
(killed, disk full) leaves a truncated `best.weights.h5` and the previous
best is gone. `AtomicModelCheckpoint` saves to a temporary file in the same
folder and renames it into place (`atomic_files`).
"""

import os
from typing import Optional

import keras

from generic_trainer.system import atomic_files
from generic_trainer.errors import SpecError


class AtomicModelCheckpoint(keras.callbacks.ModelCheckpoint):
  """Keras's ModelCheckpoint whose files replace the old ones atomically."""

  def _save_model(self, epoch, batch, logs):
    final = self._get_file_path(epoch, batch, logs or {})
    if '://' in final:  # An object store: an object appears whole.
      super()._save_model(epoch, batch, logs)
      return
    folder, name = os.path.split(final)
    # Keras wants '.weights.h5' or '.keras' at the end of the name.
    temp = os.path.join(folder, f'{atomic_files.TEMP_PREFIX}{os.getpid()}-'
                        f'{name}')
    pattern = self.filepath
    self.filepath = temp.replace('{', '{{').replace('}', '}}')
    try:
      super()._save_model(epoch, batch, logs)
    except BaseException:
      if os.path.lexists(temp):
        os.unlink(temp)
      raise
    finally:
      self.filepath = pattern
    if os.path.lexists(temp):  # Not saved when the metric did not improve.
      atomic_files.put_in_place(temp, final)


def checkpoint_handler(directory: str, steps_per_epoch: Optional[int],
                       every_epochs: Optional[int] = None,
                       every_steps: Optional[int] = None,
                       best_only: bool = False, monitor: str = 'val_loss',
                       mode: str = 'auto') -> keras.callbacks.ModelCheckpoint:
  """Saves weights into `directory` every N epochs or steps, or the best.

  Files are `epoch-003.weights.h5` (or `epoch-001-batch-000120.weights.h5`),
  or one
  `best.weights.h5` that is replaced only when `monitor` improves.
  """
  if every_epochs and every_steps:
    raise SpecError(
        "checkpoint takes 'every_epochs' or 'every_steps', not both. "
        'Expected one of them. Received: '
        f'every_epochs={every_epochs}, every_steps={every_steps}. Remove one.')
  if every_steps:
    save_freq = every_steps
    name = 'epoch-{epoch:03d}-batch-{batch:06d}.weights.h5'
  else:
    every_epochs = every_epochs or 1
    if every_epochs > 1 and not steps_per_epoch:
      raise SpecError(
          f'checkpoint every_epochs={every_epochs} needs a known number of '
          'steps per epoch: set train_args.num_steps, or pass statistics to '
          'the component, or use every_epochs=1. Received: an unknown number '
          'of steps per epoch.')
    save_freq = 'epoch' if every_epochs == 1 else every_epochs * steps_per_epoch
    name = 'epoch-{epoch:03d}.weights.h5'
  if best_only:
    name = 'best.weights.h5'
  atomic_files.make_folders(directory)
  return AtomicModelCheckpoint(
      os.path.join(directory, name), monitor=monitor, mode=mode,
      save_best_only=best_only, save_weights_only=True, save_freq=save_freq)
