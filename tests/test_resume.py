"""Where a killed training resumes from, and the helpers run_fn modules use."""

import os

from generic_trainer import resume


def _artifact(uri):
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  artifact = standard_artifacts.Examples()
  artifact.uri = uri
  return artifact


def test_checkpoint_dir_is_stable_for_the_same_training(tmp_path):
  """Same inputs and properties: the same dir, whatever the attempt."""
  inputs = {'examples': [_artifact('/data/examples/1')]}
  props = {'train_args': '{"num_steps": 5}', 'module_path': 'm@/w/a.whl'}
  first = resume.checkpoint_dir(inputs, props, str(tmp_path / 'run'),
                                str(tmp_path / 'swd' / '1'))
  retry = resume.checkpoint_dir(inputs, props, str(tmp_path / 'run'),
                                str(tmp_path / 'swd' / '2'))
  assert first == retry
  assert os.path.dirname(first) == str(tmp_path / 'swd')


def test_checkpoint_dir_changes_with_inputs_or_properties(tmp_path):
  """New data or new arguments start fresh, not from old checkpoints."""
  inputs = {'examples': [_artifact('/data/examples/1')]}
  props = {'train_args': '{"num_steps": 5}'}
  base = resume.checkpoint_dir(inputs, props, 'run', None)
  other_data = resume.checkpoint_dir(
      {'examples': [_artifact('/data/examples/2')]}, props, 'run', None)
  other_args = resume.checkpoint_dir(
      inputs, {'train_args': '{"num_steps": 6}'}, 'run', None)
  assert len({base, other_data, other_args}) == 3


def test_checkpoint_dir_follows_module_file_contents(tmp_path):
  """Editing the module file starts fresh."""
  module = tmp_path / 'm.py'
  module.write_text('a = 1\n')
  props = {'module_file': str(module)}
  before = resume.checkpoint_dir({}, props, 'run', None)
  module.write_text('a = 2\n')
  assert resume.checkpoint_dir({}, props, 'run', None) != before


def test_checkpoint_manager_restores_the_latest_step(tmp_path):
  """A run_fn's tf.train.Checkpoint is restored, with the step it saved."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.core.fn_args import FnArgs  # pylint: disable=g-import-not-at-top
  fn_args = FnArgs(checkpoint_dir=str(tmp_path / 'resume'))
  weight = tf.Variable(1.0)
  manager, step = resume.checkpoint_manager(fn_args,
                                            tf.train.Checkpoint(w=weight))
  assert step == 0
  weight.assign(7.0)
  manager.save(checkpoint_number=120)
  restored = tf.Variable(0.0)
  _, step = resume.checkpoint_manager(fn_args,
                                      tf.train.Checkpoint(w=restored))
  assert step == 120 and float(restored.numpy()) == 7.0
