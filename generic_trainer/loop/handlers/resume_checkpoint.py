"""ResumeCheckpoint: what a killed training resumes from, saved as it trains.

It replaces Keras's `BackupAndRestore`, which saves weights, optimizer and
epoch, and restarts the epoch. Saved here, with every checkpoint: the
values of the model's and the optimizer's variables (`variables.npz`),
where training is
(epochs done, batches done in the next one, the step), the running values
of the train metrics (so the resumed epoch's logs are those of an
uninterrupted one), whether a handler had stopped the training, and the
state of every handler that has one (`handler_state`). The folder layout
and the atomic write are `generic_trainer.resume`'s.

After a SIGTERM (`PreemptionStop.stopping`), it saves the step where the
training stopped, on every worker, and not the end of that epoch: the
resumed training repeats no step.

The variables are saved as they are (`model.variables`, the random seeds'
state among them, then `optimizer.variables`), in that order, one array
each, their paths and shapes in `state.json`; a resume assigns each back
after checking that the model has the same ones. Keras's `save_weights`,
which wrote them before, spent most of its time walking the model's
objects to name them: three epoch-end checkpoints of the benchmark's
model took 80-87 ms with it and 24-26 ms now on TFX 1.16, 77 and 17 ms
on TFX 1.21 (`python -m benchmarks.handler_cost`). Keras's weights file
also left out the random seeds' state: a resumed Dropout started its masks
over. A checkpoint an earlier release wrote (`model.weights.h5`) is still
read with Keras's `load_weights`.
"""

import json
import os
from typing import Any, Dict, List, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from generic_trainer.system import atomic_files
from generic_trainer.system import paths
from generic_trainer.system import removal
from generic_trainer.system import scratch
from generic_trainer.system import trust
from generic_trainer import resume
from generic_trainer.errors import CheckpointError
from generic_trainer.loop.handlers import handler_state
from generic_trainer.loop.handlers.preemption_stop import PreemptionStop

VARIABLES_FILE = 'variables.npz'
# What releases up to 0.2.0 wrote (Keras's save_weights); still read.
WEIGHTS_FILE = 'model.weights.h5'
STATE_FILE = 'state.json'
ARRAYS_FILE = 'arrays.npz'
_ARRAY_REF = '__array__'


class ResumeCheckpoint(keras.callbacks.Callback):
  """Saves a resume checkpoint at every epoch end and every `every_steps`
  steps; gives it all back in `on_train_begin` when `resume_from` is set.

  It must be the last handler: it restores the others' state after they
  reset themselves in their own `on_train_begin`, and saves it after they
  updated it in `on_epoch_end`. Only the chief writes into `directory`
  (two writers would corrupt it; the others write to `scratch_dir`, see
  `_save`);
  every worker restores from the same checkpoint.

  Args:
    directory: `fn_args.checkpoint_dir`.
    handlers: The training's other handlers; those with state are saved.
    is_chief: Whether this process writes the checkpoints.
    every_steps: Also checkpoint every N steps; None: at epoch ends only.
    steps_per_epoch: Steps per epoch when known (no step checkpoint is
      written on an epoch's last step: the epoch's end writes one).
    resume_from: `resume.latest(directory)`, read before `fit` (the fit
      calls depend on it); None starts fresh.
    scratch_dir: Where a worker that is not the chief writes its copy (in
      its model_run, which is scratch for it: removed when it ends, even
      when it is killed).
  """

  def __init__(self, directory: str, handlers: List[Any], is_chief: bool,
               every_steps: Optional[int] = None,
               steps_per_epoch: Optional[int] = None,
               resume_from: Optional[Dict[str, Any]] = None,
               scratch_dir: Optional[str] = None):
    super().__init__()
    self.directory = directory
    self.is_chief = is_chief
    self.scratch_dir = scratch_dir
    self.every_steps = every_steps
    self.steps_per_epoch = steps_per_epoch
    self.resume_from = resume_from
    self._stateful = handler_state.keys(handlers)
    self._preemption = next(
        (h for h in handlers if isinstance(h, PreemptionStop)), None)
    self._saved_preempted = False
    self._epoch = 0
    self._last_batch = -1
    self._step = 0
    self._metrics: Optional[List[np.ndarray]] = None

  def on_train_begin(self, logs=None):
    for key, handler in self._stateful.items():
      to_files(handler_state.get_state(handler), key)  # Unsavable: fail now.
    self._step = 0
    self._saved_preempted = False
    if self.resume_from:
      self._restore(self.resume_from)

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch
    self._last_batch = -1
    point = self.resume_from
    if point and point['batch'] and epoch == point['epoch']:
      self._last_batch = point['batch'] - 1  # Batches before were trained.
      if self._metrics is not None:  # `fit` reset them just before.
        for variable, value in zip(self.model.metrics_variables,
                                   self._metrics):
          variable.assign(value)
        self._metrics = None

  def on_train_batch_end(self, batch, logs=None):
    before, self._step = self._step, self._step + batch - self._last_batch
    self._last_batch = batch
    if self._preempted():
      if not self._saved_preempted:
        self._saved_preempted = True
        if batch + 1 == self.steps_per_epoch:  # The epoch's last step.
          self._save(self._epoch + 1, 0, stopped=False)
        else:
          self._save(self._epoch, batch + 1, stopped=False)
      return
    if (self.every_steps and
        self._step // self.every_steps > before // self.every_steps and
        batch + 1 != self.steps_per_epoch):
      self._save(self._epoch, batch + 1)

  def on_epoch_end(self, epoch, logs=None):
    if self._preempted():
      return  # Saved at the step it stopped; the epoch did not finish.
    self._save(epoch + 1, 0)

  def _preempted(self) -> bool:
    return self._preemption is not None and self._preemption.stopping

  def _save(self, epoch: int, batch: int,
            stopped: Optional[bool] = None) -> None:
    """Writes a checkpoint: the chief into `directory`, every other worker
    into `scratch_dir`. All must read the same variables in
    the same order: under MultiWorkerMirroredStrategy reading a metric
    (an on-read variable) is a collective op every worker joins.
    `stopped`: whether training is over; None: `model.stop_training`."""
    if stopped is None:
      stopped = bool(self.model.stop_training)
    point = {'epoch': epoch, 'batch': batch, 'step': self._step,
             'stopped': stopped}
    states = {key: handler_state.get_state(h)
              for key, h in self._stateful.items()}
    metrics = [keras.ops.convert_to_numpy(v)
               for v in self.model.metrics_variables]

    variables = model_variables(self.model)
    values = [keras.ops.convert_to_numpy(v) for v in variables]

    def write_files(folder):
      np.savez(os.path.join(folder, VARIABLES_FILE),
               **{f'v{i}': value for i, value in enumerate(values)})
      document, arrays = to_files({'handlers': states, 'metrics': metrics})
      atomic_files.write_json(
          os.path.join(folder, STATE_FILE),
          {**point, **document, 'variables': describe(variables)},
          sort_keys=True)
      np.savez(os.path.join(folder, ARRAYS_FILE), **arrays)

    if self.is_chief:
      resume.write_checkpoint(self.directory, self._step, write_files, point)
      return
    removal.remove_tree(self.scratch_dir, ignore_errors=True)
    trust.make_private(self.scratch_dir, 0o700)  # Whatever the umask.
    write_files(self.scratch_dir)

  def _restore(self, point: Dict[str, Any]) -> None:
    folder = os.path.join(self.directory, point['checkpoint'])
    try:
      with _readable(folder) as local:
        with open(os.path.join(local, STATE_FILE)) as f:
          document = json.load(f)
        with np.load(os.path.join(local, ARRAYS_FILE),
                     allow_pickle=False) as arrays:
          saved = from_files(document, dict(arrays))
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
          with self.model.distribute_strategy.scope():
            optimizer.build(self.model.trainable_variables)
        if 'variables' in document:
          with np.load(os.path.join(local, VARIABLES_FILE),
                       allow_pickle=False) as saved_values:
            assign(self.model, document['variables'], saved_values, folder)
        else:  # Written by an earlier release.
          self.model.load_weights(os.path.join(local, WEIGHTS_FILE))
    except (OSError, ValueError, KeyError) as e:
      raise CheckpointError(
          f'The resume checkpoint {folder} cannot be read ({e!r}); it '
          f'should hold {VARIABLES_FILE}, {STATE_FILE} and {ARRAYS_FILE} '
          'written for this model. Delete ' + self.directory + ' to '
          'start the training over (with the generic-trainer command: '
          '--no-resume).') from e
    for key, handler in self._stateful.items():
      if key in saved['handlers']:
        handler_state.set_state(handler, saved['handlers'][key])
    self._metrics = saved['metrics']
    self._step = point['step']


def model_variables(model) -> List[Any]:
  """What a checkpoint saves: the model's variables (its weights and its
  random seeds' state), then the optimizer's (none while it is unbuilt)."""
  optimizer = getattr(model, 'optimizer', None)
  return list(model.variables) + (
      list(optimizer.variables) if optimizer is not None else [])


def describe(variables: List[Any]) -> List[List[Any]]:
  """[path, shape, dtype] of each variable, as `state.json` keeps them."""
  return [[v.path, [int(d) for d in v.shape], str(v.dtype)]
          for v in variables]


def assign(model, described: List[List[Any]], saved, folder: str) -> None:
  """Gives `model`'s variables the values `saved` holds (`v0`, `v1`...,
  as `described`), after checking that they are the same variables: as
  many, in the same order, of the same shapes and dtypes.

  Raises:
    CheckpointError: the model's variables are not those saved.
  """
  variables = model_variables(model)
  now = describe(variables)
  # Paths hold the layers' names, which Keras numbers in the order a
  # process makes them (dense_1 in one, dense_3 in another): the order,
  # shapes and dtypes must match, the paths are there to say which.
  if [v[1:] for v in now] != [v[1:] for v in described]:
    differ = next((i for i, (a, b) in enumerate(zip(now, described))
                   if a[1:] != b[1:]), min(len(now), len(described)))
    raise CheckpointError(
        f'The resume checkpoint {folder} was written for other variables '
        f'than this model\'s. Expected the variables it saved: '
        f'{len(described)}, #{differ} '
        f'{described[differ] if differ < len(described) else "none"}. '
        f'Received: this model\'s {len(variables)}, #{differ} '
        f'{now[differ] if differ < len(now) else "none"} (the first that '
        'differs, as [path, shape, dtype]). Build the model the module '
        f'built when it was written, or delete {os.path.dirname(folder)} to '
        'start the training over (with the generic-trainer command: '
        '--no-resume).')
  for i, variable in enumerate(variables):
    variable.assign(saved[f'v{i}'])


def to_files(state: Any, key: str = 'state'
             ) -> Tuple[Any, Dict[str, np.ndarray]]:
  """(JSON document, {name: array}): `state` with its arrays taken out.

  Raises:
    CheckpointError: a value is neither a JSON value nor an array.
  """
  arrays: Dict[str, np.ndarray] = {}

  def convert(value, where):
    if isinstance(value, np.ndarray) or hasattr(value, 'numpy'):
      name = f'a{len(arrays)}'
      arrays[name] = np.asarray(value)
      return {_ARRAY_REF: name}
    if isinstance(value, np.generic):
      return value.item()
    if value is None or isinstance(value, (str, bool, int, float)):
      return value
    if isinstance(value, (list, tuple)):
      return [convert(v, f'{where}[{i}]') for i, v in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
      return {k: convert(v, f'{where}[{k!r}]') for k, v in value.items()}
    raise CheckpointError(
        f'The state of handler {key} cannot be saved with the resume '
        f'checkpoint: {where} is a {type(value).__name__}. Expected: JSON '
        'values (dict with str keys, list, str, int, float, bool, None) '
        f'and numpy arrays. Received: {value!r:.80}. Make its get_state() '
        'return only those.')

  return convert(state, 'get_state()'), arrays


def from_files(document: Any, arrays: Dict[str, np.ndarray]) -> Any:
  """The state `to_files` took apart (tuples come back as lists)."""
  if isinstance(document, list):
    return [from_files(v, arrays) for v in document]
  if isinstance(document, dict):
    if set(document) == {_ARRAY_REF}:
      return arrays[document[_ARRAY_REF]]
    return {k: from_files(v, arrays) for k, v in document.items()}
  return document


class _readable:  # pylint: disable=invalid-name
  """A local folder with the files of `folder` (a copy when remote, in a
  scratch folder: removed after, or by the next process if this one is
  killed)."""

  def __init__(self, folder: str):
    self.folder = folder
    self._copy = None

  def __enter__(self) -> str:
    if not paths.is_remote(self.folder):
      return self.folder
    self._copy = scratch.folder('checkpoint')
    local = self._copy.__enter__()
    for name in (VARIABLES_FILE, STATE_FILE, ARRAYS_FILE, WEIGHTS_FILE):
      if name in (VARIABLES_FILE, WEIGHTS_FILE) and not tf.io.gfile.exists(
          os.path.join(self.folder, name)):
        continue  # A checkpoint has one of the two (WEIGHTS_FILE: 0.2.0).
      try:
        tf.io.gfile.copy(os.path.join(self.folder, name),
                         os.path.join(local, name), overwrite=True)
      except tf.errors.OpError as e:
        self.__exit__(None, None, None)
        raise OSError(f'{e.message} ({name})') from e
    return local

  def __exit__(self, *exc):
    if self._copy:
      copy, self._copy = self._copy, None
      copy.__exit__(None, None, None)
