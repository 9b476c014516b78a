"""Resuming a killed training: where checkpoints live and how to use them.

A training killed (preempted node, OOM, Ctrl-C, an orchestrator's retry) and
started again on the same inputs continues from its last checkpoint. The
checkpoint directory, `fn_args.checkpoint_dir`, is keyed by a fingerprint of
the input artifacts and the execution properties (train/eval args, custom
config, the module, which TFX packages with a content hash), not by the
execution or the pipeline run: a retry, or a new run of the same pipeline on
the same inputs after a crash, finds it; changed inputs or code start fresh.
It is deleted once the model is published, so a finished training never
leaks into a later one (warm-start from a previous model with `base_model`).

TrainSpec modules resume automatically, at epoch boundaries. A `run_fn`
module adds one of:

    model.fit(..., callbacks=[resume.keras_callback(fn_args)])   # Keras

    manager, step = resume.checkpoint_manager(fn_args, tf.train.Checkpoint(
        model=model, optimizer=optimizer))                       # own loop
    ... manager.save(checkpoint_number=step) every N steps ...
"""

import hashlib
import json
import os
from typing import Any, Dict, List, Optional, Tuple

from absl import logging

RESUME_PREFIX = 'resume-'


def fingerprint(input_dict: Dict[str, List[Any]],
                exec_properties: Dict[str, Any]) -> str:
  """A short hash of what defines a training: its inputs and properties."""
  from tfx.utils import json_utils  # pylint: disable=g-import-not-at-top
  inputs = {key: sorted(a.uri for a in artifacts)
            for key, artifacts in sorted(input_dict.items())}
  module_hash = ''
  source = _module_source(exec_properties)
  if source and os.path.isfile(source):
    with open(source, 'rb') as f:
      module_hash = hashlib.sha256(f.read()).hexdigest()
  blob = json.dumps({'inputs': inputs, 'module': module_hash,
                     'properties': json_utils.dumps(exec_properties)},
                    sort_keys=True)
  return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _module_source(exec_properties: Dict[str, Any]) -> Optional[str]:
  """The user module's source file, whichever way it was given."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  from generic_trainer.keys import MODULE_FILE_KEY, MODULE_PATH_KEY, RUN_FN_KEY  # pylint: disable=g-import-not-at-top
  if exec_properties.get(MODULE_FILE_KEY):
    return exec_properties[MODULE_FILE_KEY]
  name = exec_properties.get(MODULE_PATH_KEY) or (
      exec_properties.get(RUN_FN_KEY) or '').rpartition('.')[0]
  if not name or '@' in name:  # A packaged wheel's name holds its hash.
    return None
  try:
    spec = importlib.util.find_spec(name)
  except (ImportError, ValueError):
    return None
  return spec.origin if spec else None


def checkpoint_dir(input_dict: Dict[str, List[Any]],
                   exec_properties: Dict[str, Any], model_run_uri: str,
                   stateful_working_dir: Optional[str]) -> str:
  """The resume directory of this training.

  Under TFX it sits beside the node's stateful working dirs
  (`<node>/.system/stateful_working_dir/resume-<fingerprint>`), which TFX
  neither deletes on failure nor shares between nodes; called directly, in
  the ModelRun artifact (stable when a retry reuses the output URIs, as
  Kubeflow's retries do).
  """
  base = (os.path.dirname(stateful_working_dir.rstrip('/'))
          if stateful_working_dir else model_run_uri)
  return os.path.join(base, RESUME_PREFIX + fingerprint(input_dict,
                                                        exec_properties))


def remove(directory: Optional[str]) -> None:
  """Deletes a resume directory once its model is published."""
  from tfx.dsl.io import fileio  # pylint: disable=g-import-not-at-top
  if directory and fileio.exists(directory):
    fileio.rmtree(directory)


def keras_callback(fn_args, save_freq='epoch'):
  """`keras.callbacks.BackupAndRestore` on `fn_args.checkpoint_dir`.

  It restores the weights, the optimizer and the epoch at `fit`'s start, and
  keeps its backup after training: GenericTrainer deletes it once the model
  is published. It is `tf.keras`'s, so it is tf.keras 2's callback when the
  module runs with keras_version='tf_keras', and Keras 3's otherwise.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.keras.callbacks.BackupAndRestore(
      fn_args.checkpoint_dir, save_freq=save_freq, delete_checkpoint=False)


def checkpoint_manager(fn_args, checkpoint,
                       max_to_keep: int = 2) -> Tuple[Any, int]:
  """A `tf.train.CheckpointManager` on `fn_args.checkpoint_dir`, restored.

  Returns the manager and the step restored from (0 when starting fresh;
  the step is the checkpoint number given to `manager.save`).
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
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
