"""A resumed TrainSpec continues where it stopped: at the step, with every
handler's state, its data read on in the same order.

The trainings here are interrupted in-process, by an exception a handler
raises (what a kill leaves is the same: the last checkpoint, written
atomically); `test_fault_injection.py` SIGKILLs real processes.
"""

import json
import os
import random
import shutil

import keras
import numpy as np
import pytest

from generic_trainer import CheckpointError, Estimator, resume
from generic_trainer.loop.fit_schedule import FitCall, fit_calls
from generic_trainer.loop.handlers.resume_checkpoint import assign
from message_parts import assert_four_parts
from spec_fixtures import BestOnlySpec, PenguinSpec, WorseFromEpoch3


class Killed(Exception):
  """What the tests raise to interrupt a training."""


class Killer(keras.callbacks.Callback):
  """Raises Killed at the end of step `at_step`, or at the start of epoch
  index `at_epoch` (None: never)."""

  at_step = None
  at_epoch = None

  def on_train_batch_end(self, batch, logs=None):
    if int(self.model.optimizer.iterations.numpy()) == Killer.at_step:
      raise Killed()

  def on_epoch_begin(self, epoch, logs=None):
    if epoch == Killer.at_epoch:
      raise Killed()


@pytest.fixture(autouse=True)
def _no_kill():
  yield
  Killer.at_step = Killer.at_epoch = None


def _interrupted_then_resumed(spec_class, tmp_path, data, steps, **kill):
  """Trains until Killer fires, then trains again in a new Estimator on the
  same checkpoint folder; returns (the Estimator that finished, its result,
  the checkpoint pointer the interrupted training left)."""
  for name, value in kill.items():
    setattr(Killer, name, value)
  checkpoint = str(tmp_path / 'resume')
  first = Estimator(spec_class, str(tmp_path / 'interrupted'))
  first.checkpoint_dir = checkpoint
  with pytest.raises(Killed):
    first.train(*data, steps=steps)
  left = resume.latest(checkpoint)
  Killer.at_step = Killer.at_epoch = None
  second = Estimator(spec_class, str(tmp_path / 'interrupted'))
  second.checkpoint_dir = checkpoint
  return second, second.train(*data, steps=steps), left


def _history(est):
  with open(os.path.join(est.run_dir, 'history.json')) as f:
    return json.load(f)


@pytest.fixture
def op_determinism():
  """TensorFlow's op determinism, and seeded Keras, for one test."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.framework import config  # pylint: disable=g-import-not-at-top
  tf.config.experimental.enable_op_determinism()
  try:
    yield
  finally:
    config.disable_op_determinism()


def test_fresh_training_is_one_fit_call():
  """No checkpoint: one call over every epoch."""
  assert fit_calls(4, 10) == [FitCall(0, 4, 10)]


def test_resume_at_an_epoch_end_skips_the_epochs_read():
  """After epoch 2 of 4: one call from epoch 2, the stream read on."""
  assert fit_calls(4, 10, {'epoch': 2, 'batch': 0}) == [
      FitCall(2, 4, 10, skip_batches=20)]


def test_resume_inside_an_epoch_is_two_fit_calls():
  """At batch 3 of epoch index 1: the 7 steps left of it, then the rest."""
  assert fit_calls(4, 10, {'epoch': 1, 'batch': 3}) == [
      FitCall(1, 2, 7, skip_batches=13, batch_offset=3),
      FitCall(2, 4, 10, skip_batches=20)]


def test_resume_inside_the_last_epoch_is_one_fit_call():
  """At batch 3 of the last epoch: its 7 steps left only."""
  assert fit_calls(4, 10, {'epoch': 3, 'batch': 3}) == [
      FitCall(3, 4, 7, skip_batches=33, batch_offset=3)]


def test_resume_with_epochs_of_unknown_length_skips_in_the_epoch():
  """One pass per epoch: the resumed epoch skips its trained batches only."""
  assert fit_calls(4, None, {'epoch': 1, 'batch': 3}) == [
      FitCall(1, 2, None, skip_batches=3, batch_offset=3),
      FitCall(2, 4, None)]


def test_finished_or_stopped_training_makes_no_fit_call():
  """Nothing to train after the last epoch, or after an early stop."""
  assert fit_calls(4, 10, {'epoch': 4, 'batch': 0}) == []
  assert fit_calls(4, 10, {'epoch': 2, 'batch': 0, 'stopped': True}) == []


def test_checkpoint_of_another_schedule_is_refused():
  """A batch past the epoch's steps: the checkpoint is not this training's."""
  with pytest.raises(CheckpointError, match=(
      r'^The resume checkpoint is at batch 12 of epoch 2, but this training '
      r'has 10 steps per epoch: it was written by another schedule. Delete '
      r'the checkpoint folder to start over. Received: ')):
    fit_calls(4, 10, {'epoch': 1, 'batch': 12})


def test_step_resume_trains_the_remaining_steps_to_the_same_weights(
    tmp_path, penguin_csvs, op_determinism):  # pylint: disable=redefined-outer-name,unused-argument
  """Interrupted at a random step and resumed from the last every-3-steps
  checkpoint: exactly the remaining steps are trained, and with op
  determinism the weights and history equal an uninterrupted training's."""
  steps_seen = []

  class Steps(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
      steps_seen.append(int(self.model.optimizer.iterations.numpy()))

  class Spec(PenguinSpec):
    epochs = 4
    checkpoint = {'every_steps': 3}

    def handlers(self):
      return [Killer(), Steps()]

  data = (penguin_csvs[0],)
  keras.utils.set_random_seed(7)
  reference = Estimator(Spec, str(tmp_path / 'uninterrupted'))
  reference.train(*data, steps=40)
  kill_at = random.Random(16).randint(4, 36)
  keras.utils.set_random_seed(7)
  del steps_seen[:]
  resumed, result, left = _interrupted_then_resumed(
      Spec, tmp_path, data, 40, at_step=kill_at)
  # Checkpoints every 3 steps and at epoch ends; Killer runs before the
  # checkpoint handler, so the kill step's own checkpoint is not written.
  assert left['step'] == max(s for s in range(kill_at)
                             if s % 3 == 0 or s % 10 == 0)
  assert (left['epoch'], left['batch']) == divmod(left['step'], 10)
  assert steps_seen == list(range(1, kill_at)) + list(
      range(left['step'] + 1, 41))
  assert (result['resumed_from_step'], result['steps'], result['epochs']) == (
      left['step'], 40, 4)
  for ours, theirs in zip(resumed.spec.model.get_weights(),
                          reference.spec.model.get_weights()):
    np.testing.assert_array_equal(ours, theirs)
  assert _history(resumed) == _history(reference)


def test_epochs_of_unknown_length_resume_at_the_step_too(tmp_path,
                                                        penguin_csvs):
  """Without num_steps (each epoch reads the split once: 12 batches of the
  228 rows), a resume inside epoch 2 trains the rest of it, then epoch 3.
  (Keras counts one optimizer iteration more per such epoch, the call that
  finds the data exhausted: Killer's step 17 is batch 4 of epoch 2.)"""
  batches = []

  class Batches(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
      batches.append(batch)

  class Spec(PenguinSpec):
    epochs = 3
    checkpoint = {'every_steps': 3}

    def handlers(self):
      return [Killer(), Batches()]

  resumed, result, left = _interrupted_then_resumed(
      Spec, tmp_path, (penguin_csvs[0],), None, at_step=17)
  assert (left['epoch'], left['batch'], left['step']) == (1, 3, 15)
  assert batches == list(range(12)) + list(range(3)) + list(
      range(3, 12)) + list(range(12))
  assert (result['resumed_from_step'], result['epochs']) == (15, 3)
  assert [e['epoch'] for e in _history(resumed)] == [1, 2, 3]


def test_early_stopping_resumed_stops_at_the_same_epoch(tmp_path,
                                                        penguin_csvs):
  """Patience counts on after a resume: a frozen model stops after 3 epochs
  (best, then 2 without improvement), interrupted after 2 or not."""
  class Frozen(PenguinSpec):
    epochs = 10
    early_stopping = {'monitor': 'val_loss', 'patience': 2}

    def build_model(self):
      model = super().build_model()
      model.trainable = False
      return model

    def handlers(self):
      return [Killer()]

  data = (penguin_csvs[0], penguin_csvs[1])
  uninterrupted = Estimator(Frozen, str(tmp_path / 'uninterrupted')).train(
      *data, steps=100)
  resumed, result, left = _interrupted_then_resumed(
      Frozen, tmp_path, data, 100, at_epoch=2)
  assert (left['epoch'], left['batch']) == (2, 0)
  assert uninterrupted['epochs'] == result['epochs'] == 3
  assert [e['epoch'] for e in _history(resumed)] == [1, 2, 3]


def test_best_only_checkpoint_is_not_overwritten_by_a_worse_model(
    tmp_path, penguin_csvs):
  """The best val_loss survives the resume: the worse epochs after it do
  not replace best.weights.h5."""
  class Spec(BestOnlySpec):

    def handlers(self):
      return [Killer(), WorseFromEpoch3()]

  resumed, _, left = _interrupted_then_resumed(
      Spec, tmp_path, penguin_csvs, 8, at_epoch=2)
  assert left['epoch'] == 2
  val_losses = [e['val_loss'] for e in _history(resumed)]
  assert len(val_losses) == 4 and min(val_losses[:2]) < min(val_losses[2:])
  resumed.spec.model.load_weights(
      os.path.join(resumed.run_dir, 'checkpoints', 'best.weights.h5'))
  assert resumed.evaluate(penguin_csvs[1])['loss'] == pytest.approx(
      min(val_losses), rel=1e-4)


def test_reduce_lr_on_plateau_counts_on_after_a_resume(tmp_path,
                                                       penguin_csvs):
  """Its wait and the learning rate are those of an uninterrupted training:
  halved after epochs 3 and 5 (2 without improvement each), not once."""
  class Frozen(PenguinSpec):
    epochs = 5

    def build_model(self):
      model = super().build_model()
      model.trainable = False
      return model

    def handlers(self):
      return [Killer(), keras.callbacks.ReduceLROnPlateau(
          monitor='val_loss', factor=0.5, patience=2)]

  data = (penguin_csvs[0], penguin_csvs[1])
  reference = Estimator(Frozen, str(tmp_path / 'uninterrupted'))
  reference.train(*data, steps=50)
  resumed, _, _ = _interrupted_then_resumed(Frozen, tmp_path, data, 50,
                                            at_epoch=2)
  rates = [float(est.spec.optimizer.learning_rate.numpy())
           for est in (reference, resumed)]
  assert rates == pytest.approx([0.0025, 0.0025])


def test_user_handler_state_is_saved_and_given_back(tmp_path, penguin_csvs):
  """A handler defining get_state/set_state gets its state back (arrays
  included) after its on_train_begin, as it was at the checkpoint."""
  class BatchCounter(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
      self.batches, self.mean_loss = 0, np.zeros([1])
      self.given_back = None

    def on_train_batch_end(self, batch, logs=None):
      self.batches += 1

    def get_state(self):
      return {'batches': self.batches, 'trace': np.full([2], self.batches)}

    def set_state(self, state):
      self.given_back = state
      self.batches = state['batches']

  class Spec(PenguinSpec):
    epochs = 4

    def handlers(self):
      return [Killer(), BatchCounter()]

  resumed, _, left = _interrupted_then_resumed(
      Spec, tmp_path, (penguin_csvs[0],), 20, at_epoch=3)
  counter = resumed.spec.user_handlers[1]
  assert left['epoch'] == 3
  assert counter.given_back['batches'] == 15
  np.testing.assert_array_equal(counter.given_back['trace'], [15, 15])
  assert counter.batches == 20


def test_handler_state_that_cannot_be_saved_fails_before_training(
    tmp_path, penguin_csvs):
  """A state holding a set is refused before the first step, naming the
  handler and the value."""
  class Sets(keras.callbacks.Callback):
    def get_state(self):
      return {'seen': {1, 2}}

    def set_state(self, state):
      pass

  class Spec(PenguinSpec):
    def handlers(self):
      return [Sets()]

  est = Estimator(Spec, str(tmp_path))
  est.checkpoint_dir = str(tmp_path / 'resume')
  with pytest.raises(CheckpointError, match=(
      r"^The state of handler 4\.Sets cannot be saved with the resume "
      r"checkpoint: get_state\(\)\['seen'\] is a set\. Expected: JSON values "
      r'\(dict with str keys, list, str, int, float, bool, None\) and numpy '
      r'arrays\. Received: \{1, 2\}\. Make its get_state\(\) return only '
      r'those\.$')):
    est.train(penguin_csvs[0], steps=4)
  assert int(est.spec.optimizer.iterations.numpy()) == 0


def test_a_missing_checkpoint_folder_is_refused_with_what_to_do(
    tmp_path, penguin_csvs):
  """A pointer whose folder is gone: CheckpointError before training."""
  checkpoint = tmp_path / 'resume'
  checkpoint.mkdir()
  (checkpoint / 'latest.json').write_text(json.dumps(
      {'checkpoint': 'checkpoint-000000004', 'epoch': 1, 'batch': 0,
       'step': 4}))
  est = Estimator(PenguinSpec, str(tmp_path / 'run'))
  est.checkpoint_dir = str(checkpoint)
  with pytest.raises(CheckpointError, match=(
      rf'^The resume checkpoint {checkpoint}/checkpoint-000000004 cannot be '
      r'read \(FileNotFoundError.*\); it should hold variables.npz, '
      r'state.json and arrays.npz written for this model. Delete '
      rf'{checkpoint} to start the training over \(with the generic-trainer '
      r'command: --no-resume\).$')):
    est.train(penguin_csvs[0], steps=4)


class EveryFourSteps(PenguinSpec):
  """Three epochs, a checkpoint every 4 steps, and Killer."""
  epochs = 3
  checkpoint = {'every_steps': 4}

  def handlers(self):
    return [Killer()]


def _killed_at_step(spec_class, tmp_path, data, steps, at_step):
  """A training of `spec_class` killed at `at_step`; its checkpoint folder
  and what `latest.json` names."""
  checkpoint = str(tmp_path / 'resume')
  Killer.at_step = at_step
  first = Estimator(spec_class, str(tmp_path / 'interrupted'))
  first.checkpoint_dir = checkpoint
  with pytest.raises(Killed):
    first.train(*data, steps=steps)
  Killer.at_step = None
  return checkpoint, resume.latest(checkpoint)


def test_a_checkpoint_an_earlier_release_wrote_resumes_to_the_same_weights(
    tmp_path, penguin_csvs, op_determinism):  # pylint: disable=redefined-outer-name,unused-argument
  """Releases up to 0.2.0 saved the variables with Keras's save_weights
  (model.weights.h5, no `variables` in state.json); such a checkpoint
  still resumes, and to the weights of the same checkpoint in today's
  layout; either layout also on an object store."""
  data = (penguin_csvs[0],)
  keras.utils.set_random_seed(3)
  checkpoint, left = _killed_at_step(EveryFourSteps, tmp_path, data, 30,
                                     at_step=14)
  assert left['step'] == 12
  folder = os.path.join(checkpoint, left['checkpoint'])
  with open(os.path.join(folder, 'state.json')) as f:
    state = json.load(f)
  kept = str(tmp_path / 'kept')
  shutil.copytree(checkpoint, kept)
  remote_today = _to_object_store(kept, tmp_path.name + '-today')
  today = Estimator(EveryFourSteps, str(tmp_path / 'today'))
  today.checkpoint_dir = kept
  today.train(*data, steps=30)

  # The same checkpoint as 0.2.0 wrote it.
  old = Estimator(EveryFourSteps, str(tmp_path / 'old-layout'))
  old.spec.model.compile(optimizer=old.spec.optimizer)
  old.spec.optimizer.build(old.spec.model.trainable_variables)
  with np.load(os.path.join(folder, 'variables.npz')) as saved:
    assign(old.spec.model, state['variables'], saved, folder)
  old.spec.model.save_weights(os.path.join(folder, 'model.weights.h5'))
  os.remove(os.path.join(folder, 'variables.npz'))
  del state['variables']
  with open(os.path.join(folder, 'state.json'), 'w') as f:
    json.dump(state, f)
  remote_earlier = _to_object_store(checkpoint, tmp_path.name + '-earlier')
  earlier = Estimator(EveryFourSteps, str(tmp_path / 'earlier'))
  earlier.checkpoint_dir = checkpoint
  result = earlier.train(*data, steps=30)
  assert result['resumed_from_step'] == 12
  for ours, theirs in zip(earlier.spec.model.get_weights(),
                          today.spec.model.get_weights()):
    np.testing.assert_array_equal(ours, theirs)

  # Both layouts, on an object store (TensorFlow's ram://): copied into
  # local scratch, then read as above, to the same weights.
  for name, source in (('today', remote_today),
                       ('earlier', remote_earlier)):
    remote = Estimator(EveryFourSteps, str(tmp_path / f'remote-{name}'))
    remote.checkpoint_dir = source
    assert remote.train(*data, steps=30)['resumed_from_step'] == 12, name
    for ours, theirs in zip(remote.spec.model.get_weights(),
                            today.spec.model.get_weights()):
      np.testing.assert_array_equal(ours, theirs)


def _to_object_store(local: str, bucket: str) -> str:
  """A copy of the checkpoint folder `local` in ram://`bucket`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  remote = f'ram://{bucket}/resume'
  for folder, _, files in os.walk(local):
    target = remote + folder[len(local):]
    tf.io.gfile.makedirs(target)
    for name in files:
      tf.io.gfile.copy(os.path.join(folder, name), f'{target}/{name}')
  return remote


def test_a_checkpoint_of_another_model_is_refused_saying_what_differs(
    tmp_path, penguin_csvs):
  """The module now builds a wider layer than the checkpoint was written
  for: CheckpointError before training, naming the first variable that
  differs, and nothing assigned."""
  data = (penguin_csvs[0],)
  checkpoint, left = _killed_at_step(EveryFourSteps, tmp_path, data, 30,
                                     at_step=9)
  folder = os.path.join(checkpoint, left['checkpoint'])
  wider = Estimator(EveryFourSteps, str(tmp_path / 'wider'),
                    hparams={'units': 12})
  wider.checkpoint_dir = checkpoint
  with pytest.raises(CheckpointError, match=(
      rf'^The resume checkpoint {folder} was written for other variables '
      r"than this model's\. Expected the variables it saved: 28, #4 "
      r"\['dense\w*/kernel', \[4, 8\], 'float32'\]\. Received: this model's "
      r"28, #4 \['dense\w*/kernel', \[4, 12\], 'float32'\] \(the first that "
      r'differs, as \[path, shape, dtype\]\)\. Build the model the module '
      rf'built when it was written, or delete {checkpoint} to start the '
      r'training over \(with the generic-trainer command: --no-resume\)\.$'
      )) as refused:
    wider.train(*data, steps=30)
  assert_four_parts(str(refused.value))
  assert int(wider.spec.optimizer.iterations.numpy()) == 0


class WithDropout(EveryFourSteps):
  """EveryFourSteps with a Dropout layer, whose masks come from its seed
  generator's state."""

  def build_model(self):
    inputs = {k: keras.Input(shape=(1,), name=k) for k in self.feature_keys}
    x = keras.layers.Concatenate()([inputs[k] for k in self.feature_keys])
    x = keras.layers.Dense(8, activation='relu')(x)
    x = keras.layers.Dropout(0.5)(x)
    outputs = keras.layers.Dense(self.num_classes, activation='softmax')(x)
    return keras.Model(inputs, outputs)


def test_a_model_with_dropout_resumes_to_the_uninterrupted_weights(
    tmp_path, penguin_csvs, op_determinism):  # pylint: disable=redefined-outer-name,unused-argument
  """The checkpoint keeps the dropout's seed state: the resumed steps drop
  what the uninterrupted training's steps dropped, and end at its weights
  (Keras's weights file, which 0.2.0 wrote, left the seeds out: the
  resumed dropout started its masks over)."""
  data = (penguin_csvs[0],)
  keras.utils.set_random_seed(5)
  reference = Estimator(WithDropout, str(tmp_path / 'uninterrupted'))
  reference.train(*data, steps=30)
  keras.utils.set_random_seed(5)
  checkpoint, left = _killed_at_step(WithDropout, tmp_path, data, 30,
                                     at_step=14)
  assert left['step'] == 12
  resumed = Estimator(WithDropout, str(tmp_path / 'interrupted'))
  resumed.checkpoint_dir = checkpoint
  assert resumed.train(*data, steps=30)['resumed_from_step'] == 12
  for ours, theirs in zip(resumed.spec.model.get_weights(),
                          reference.spec.model.get_weights()):
    np.testing.assert_array_equal(ours, theirs)
