"""Resuming a killed training: where checkpoints live and how to use them.

A training killed (preempted node, OOM, Ctrl-C, an orchestrator's retry) and
started again on the same inputs continues from its last checkpoint. The
checkpoint directory, `fn_args.checkpoint_dir`, is keyed (`plan.plan`'s
`resume_key`, decided with the plan) by a fingerprint of
the input artifacts and the execution properties (train/eval args, custom
config, the module, which TFX packages with a content hash), not by the
execution or the pipeline run: a retry, or a new run of the same pipeline on
the same inputs after a crash, finds it; changed inputs or code start fresh.
It is deleted once the model is published, so a finished training never
leaks into a later one (warm-start from a previous model with `base_model`).

TrainSpec modules resume automatically, at the step of their last
checkpoint, with their handlers' state (`loop.handlers.resume_checkpoint`
writes it; this module says where and in what layout). A `run_fn` module
adds one of:

    model.fit(..., callbacks=[resume.keras_callback(fn_args)])   # Keras

    manager, step = resume.checkpoint_manager(fn_args, tf.train.Checkpoint(
        model=model, optimizer=optimizer))                       # own loop
    ... manager.save(checkpoint_number=step) every N steps ...

A TrainSpec's checkpoints, in `checkpoint_dir`:

    checkpoint-000000120/      one complete checkpoint (written as
      variables.npz            .tmp-checkpoint-...; renamed when complete)
      state.json               epoch, batch, step, handlers' state
      arrays.npz               the arrays of that state (best weights...)
    latest.json                {"checkpoint": "checkpoint-000000120",
                                "epoch": 3, "batch": 0, "step": 120, ...}

A checkpoint counts once `latest.json` names it: that file is replaced in
one step (a rename on a file system, an object write on GCS or S3), so a
kill at any moment leaves the previous checkpoint or the new one, never a
half-written one. On a local disk every file of the checkpoint, its folder
and the folder above are fsynced before `latest.json` names it, so a power
cut cannot leave a pointer to files still in the page cache. Older
checkpoints are deleted after the pointer moved. A checkpoint for an
object store is written in a local scratch folder first
(`system.scratch`: locked by this process, removed by the next one that
makes a scratch folder if a SIGKILL left it).
"""

import json
import os
from typing import Any, Callable, Dict, Optional, Tuple

from absl import logging

from generic_trainer.system import atomic_files
from generic_trainer.system import paths
from generic_trainer.system import removal
from generic_trainer.system import scratch
from generic_trainer.system import trust
from generic_trainer.errors import CheckpointError
import tensorflow as tf

LATEST_FILE = 'latest.json'
CHECKPOINT_PREFIX = 'checkpoint-'
_TMP_PREFIX = '.tmp-'
# Keras's BackupAndRestore (run_fn modules' `keras_callback`) writes this.
_KERAS_METADATA_FILE = 'training_metadata.json'


# A resume folder being removed is first renamed to its name + this + the
# process id: what has that name is a folder on its way out, which the next
# removal of the same folder (or the command's next run) finishes.
REMOVED_SUFFIX = '-published-'


def remove(directory: Optional[str]) -> None:
  """Deletes the resume folder `directory` (None: nothing to delete), so
  that a kill at any moment leaves the checkpoint whole or no checkpoint,
  never a `latest.json` naming files half gone: it is renamed aside first
  (`directory` + `REMOVED_SUFFIX` + the process id, logged), then what was
  renamed is deleted; a link is removed itself, never what it points to.
  On an object store, where a rename copies every object, its pointers
  (`latest.json`, Keras's metadata) are deleted first instead. Folders an
  earlier removal left aside are deleted too.

  The attempt's last step once its model is published
  (`training.attempt.run`), for every entry point; also a diverged
  training's checkpoint (`loop.fit_loop`).
  """
  if not directory:
    return
  directory = directory.rstrip('/')
  aside = f'{directory}{REMOVED_SUFFIX}{os.getpid()}'
  if paths.is_remote(directory):
    gfile = tf.io.gfile
    if gfile.exists(directory):
      for pointer in (LATEST_FILE, _KERAS_METADATA_FILE):
        if gfile.exists(os.path.join(directory, pointer)):
          gfile.remove(os.path.join(directory, pointer))
      gfile.rename(directory, aside, overwrite=True)
    leftovers = gfile.glob(f'{directory}{REMOVED_SUFFIX}*')
  else:
    if os.path.lexists(directory):
      os.rename(directory, aside)  # A link: the link itself.
    parent, name = os.path.split(directory)
    leftovers = [os.path.join(parent, n) for n in os.listdir(parent or '.')
                 if n.startswith(name + REMOVED_SUFFIX)] if os.path.isdir(
                     parent or '.') else []
  for path in leftovers:
    logging.info('Removing the resume checkpoint %s (renamed to %s).',
                 directory, path)
    _remove_aside(path)


def _remove_aside(path: str) -> None:
  """Deletes what `remove` renamed aside: a file or a link itself, a
  folder with all it holds (links in it are not followed)."""
  removal.remove_tree(path)


def keras_callback(fn_args, save_freq='epoch'):
  """`keras.callbacks.BackupAndRestore` on `fn_args.checkpoint_dir`.

  It restores the weights, the optimizer and the epoch at `fit`'s start, and
  keeps its backup after training: GenericTrainer deletes it once the model
  is published. It is `tf.keras`'s, so it is tf.keras 2's callback when the
  module runs with keras_version='tf_keras', and Keras 3's otherwise.
  """
  return tf.keras.callbacks.BackupAndRestore(
      fn_args.checkpoint_dir, save_freq=save_freq, delete_checkpoint=False)


def checkpoint_manager(fn_args, checkpoint,
                       max_to_keep: int = 2) -> Tuple[Any, int]:
  """A `tf.train.CheckpointManager` on `fn_args.checkpoint_dir`, restored.

  Returns the manager and the step restored from (0 when starting fresh;
  the step is the checkpoint number given to `manager.save`).
  """
  manager = tf.train.CheckpointManager(
      checkpoint, os.path.join(fn_args.checkpoint_dir, 'tf_checkpoints'),
      max_to_keep=max_to_keep)
  step = 0
  if manager.latest_checkpoint:
    checkpoint.restore(manager.latest_checkpoint)
    step = int(manager.latest_checkpoint.rsplit('-', 1)[-1])
    logging.info('Resumed from checkpoint %s (step %d).',
                 manager.latest_checkpoint, step)
  return manager, step


def latest(directory: Optional[str]) -> Optional[Dict[str, Any]]:
  """What `latest.json` in `directory` says: the last complete checkpoint
  (`checkpoint`, its folder's name) and where training was (`epoch`: epochs
  finished, `batch`: batches finished in the next one, `step`, `stopped`:
  whether a handler had stopped the training); None when there is none.

  Raises:
    CheckpointError: the file is there but cannot be read.
  """
  if not directory:
    return None
  path = os.path.join(directory, LATEST_FILE)
  if not tf.io.gfile.exists(path):
    return None
  try:
    with tf.io.gfile.GFile(path) as f:
      point = json.loads(f.read())
    for key in ('checkpoint', 'epoch', 'batch', 'step'):
      point[key]  # pylint: disable=pointless-statement
  except (ValueError, KeyError, TypeError, tf.errors.OpError) as e:
    raise CheckpointError(
        f'The resume checkpoint pointer {path} cannot be read ({e!r}); it '
        'should be JSON naming a checkpoint folder, with epoch, batch and '
        'step. Delete the folder ' + directory + ' to start the training '
        'over (with the generic-trainer command: --no-resume).') from e
  return point


def describe(directory: Optional[str]) -> Optional[str]:
  """Where a training restarted now would resume: 'step 40 (epoch 3, batch
  1)', 'epoch 2' for a run_fn's Keras BackupAndRestore, None for nowhere."""
  point = latest(directory)
  if point is not None:
    return describe_point(point)
  path = os.path.join(directory or '', _KERAS_METADATA_FILE)
  if directory and tf.io.gfile.exists(path):
    try:
      with tf.io.gfile.GFile(path) as f:
        return f"the end of epoch {json.loads(f.read())['epoch']}"
    except (ValueError, KeyError, tf.errors.OpError):
      return None
  return None


def describe_point(point: Dict[str, Any]) -> str:
  """'step 40 (epoch 3, batch 1)' or 'step 40 (the end of epoch 2)'."""
  if point['batch']:
    return (f"step {point['step']} (epoch {point['epoch'] + 1}, batch "
            f"{point['batch']})")
  return f"step {point['step']} (the end of epoch {point['epoch']})"


def write_checkpoint(directory: str, step: int,
                     write_files: Callable[[str], None],
                     point: Dict[str, Any]) -> str:
  """Writes one checkpoint atomically; returns its folder.

  `write_files(folder)` writes the checkpoint's files into a local folder;
  they are then moved into `directory` under a temporary name, renamed to
  `checkpoint-<step>`, and `latest.json` (`point` plus the folder's name)
  replaces the previous pointer. Older checkpoints are deleted last.
  """
  gfile = tf.io.gfile
  name = f'{CHECKPOINT_PREFIX}{step:09d}'
  final = os.path.join(directory, name)
  tmp = os.path.join(directory, f'{_TMP_PREFIX}{name}-{os.getpid()}')
  atomic_files.make_folders(directory)
  for stale in (tmp, final):
    if gfile.exists(stale):
      removal.remove_tree(stale)
  if '://' in directory:  # Remote: write locally, then copy.
    with scratch.folder('checkpoint') as local:
      write_files(local)
      gfile.makedirs(tmp)
      for file_name in os.listdir(local):
        if file_name != scratch.LOCK_FILE:
          gfile.copy(os.path.join(local, file_name),
                     os.path.join(tmp, file_name), overwrite=True)
  else:
    # The run's alone, whatever the umask user code set (`os.umask(0)`:
    # Keras would write the weights 0666, for a teammate to change before
    # a resume reads them back).
    trust.make_private(tmp, 0o700)
    write_files(tmp)
    for file_name in os.listdir(tmp):  # Whole on disk before it counts.
      if os.path.isfile(os.path.join(tmp, file_name)):
        atomic_files.sync_file(os.path.join(tmp, file_name))
    atomic_files.sync_folder(tmp)
  gfile.rename(tmp, final, overwrite=True)
  if '://' not in directory:
    atomic_files.sync_folder(directory)
  pointer = os.path.join(directory, LATEST_FILE)
  atomic_files.write_json(pointer, {**point, 'checkpoint': name},
                          sort_keys=True)
  for entry in gfile.listdir(directory):
    entry = entry.rstrip('/')
    if entry != name and entry.startswith((CHECKPOINT_PREFIX, _TMP_PREFIX)):
      removal.remove_tree(os.path.join(directory, entry))
  return final
