"""Where a killed training resumes from, and the helpers run_fn modules use."""

import os

import pytest

from generic_trainer import resume
from generic_trainer.plan import resume_folder


def _artifact(uri):
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  artifact = standard_artifacts.Examples()
  artifact.uri = uri
  return artifact


def checkpoint_dir(input_dict, props, module_file, model_run, swd):
  """A pipeline's checkpoint folder, as its plan names it."""
  return resume_folder.checkpoint_folder(
      resume_folder.pipeline_resume(input_dict, props, model_run, swd),
      'module_file', module_file)


def test_checkpoint_dir_is_stable_for_the_same_training(tmp_path):
  """Same inputs and properties: the same dir, whatever the attempt."""
  inputs = {'examples': [_artifact('/data/examples/1')]}
  props = {'train_args': '{"num_steps": 5}', 'module_path': 'm@/w/a.whl'}
  first = checkpoint_dir(inputs, props, None, str(tmp_path / 'run'),
                         str(tmp_path / 'swd' / '1'))
  retry = checkpoint_dir(inputs, props, None, str(tmp_path / 'run'),
                         str(tmp_path / 'swd' / '2'))
  assert first == retry
  assert os.path.dirname(first) == str(tmp_path / 'swd')


def test_checkpoint_dir_changes_with_inputs_or_properties(tmp_path):
  """New data or new arguments start fresh, not from old checkpoints."""
  inputs = {'examples': [_artifact('/data/examples/1')]}
  props = {'train_args': '{"num_steps": 5}'}
  base = checkpoint_dir(inputs, props, None, 'run', None)
  other_data = checkpoint_dir(
      {'examples': [_artifact('/data/examples/2')]}, props, None, 'run', None)
  other_args = checkpoint_dir(
      inputs, {'train_args': '{"num_steps": 6}'}, None, 'run', None)
  assert len({base, other_data, other_args}) == 3


def test_checkpoint_dir_follows_module_file_contents(tmp_path):
  """Editing the module file starts fresh."""
  module = tmp_path / 'm.py'
  module.write_text('a = 1\n')
  props = {'module_file': str(module)}
  before = checkpoint_dir({}, props, str(module), 'run', None)
  module.write_text('a = 2\n')
  assert checkpoint_dir({}, props, str(module), 'run', None) != before


def test_checkpoint_manager_restores_the_latest_step(tmp_path):
  """A run_fn's tf.train.Checkpoint is restored, with the step it saved."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs.fn_args import FnArgs  # pylint: disable=g-import-not-at-top
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


def test_a_checkpoint_counts_once_the_pointer_names_it(tmp_path):
  """A write that fails half-way leaves the previous checkpoint the latest;
  the next write removes what the failed one left."""
  import pytest  # pylint: disable=g-import-not-at-top
  directory = str(tmp_path / 'resume')

  def files(folder):
    with open(os.path.join(folder, 'state.json'), 'w') as f:
      f.write('{}')

  def fails(folder):
    files(folder)
    raise OSError('disk full')

  resume.write_checkpoint(directory, 10, files, {'epoch': 1, 'batch': 0,
                                                 'step': 10})
  with pytest.raises(OSError):
    resume.write_checkpoint(directory, 12, fails, {'epoch': 1, 'batch': 2,
                                                   'step': 12})
  assert resume.latest(directory)['checkpoint'] == 'checkpoint-000000010'
  assert any(n.startswith('.tmp-') for n in os.listdir(directory))
  resume.write_checkpoint(directory, 14, files, {'epoch': 1, 'batch': 4,
                                                 'step': 14})
  assert resume.latest(directory) == {
      'checkpoint': 'checkpoint-000000014', 'epoch': 1, 'batch': 4,
      'step': 14}
  assert sorted(os.listdir(directory)) == ['checkpoint-000000014',
                                           'latest.json']
  assert resume.describe(directory) == 'step 14 (epoch 2, batch 4)'


def test_a_damaged_pointer_is_refused_with_what_to_do(tmp_path):
  """latest.json that is not the pointer: CheckpointError, saying to delete
  the folder (or --no-resume)."""
  import pytest  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import CheckpointError  # pylint: disable=g-import-not-at-top
  directory = tmp_path / 'resume'
  directory.mkdir()
  (directory / 'latest.json').write_text('{"epoch": 2}')
  with pytest.raises(CheckpointError, match=(
      rf"^The resume checkpoint pointer {directory}/latest.json cannot be "
      r"read \(KeyError\('checkpoint'\)\); it should be JSON naming a "
      r'checkpoint folder, with epoch, batch and step. Delete the folder '
      rf'{directory} to start the training over \(with the generic-trainer '
      r'command: --no-resume\).$')):
    resume.latest(str(directory))


def _checkpoint(folder):
  os.makedirs(folder / 'checkpoint-000000010')
  (folder / 'latest.json').write_text('{"checkpoint": "checkpoint-000000010"}')
  return str(folder)


def test_remove_renames_the_checkpoint_aside_before_deleting_it(
    tmp_path, monkeypatch):
  """A kill while the checkpoint is deleted leaves no checkpoint under its
  name, only the renamed folder, which the next removal deletes."""
  checkpoint = _checkpoint(tmp_path / 'resume-abc')

  def killed(path):
    raise KeyboardInterrupt(path)

  monkeypatch.setattr(resume, '_remove_aside', killed)
  with pytest.raises(KeyboardInterrupt) as killed_at:
    resume.remove(checkpoint)
  aside = f'{checkpoint}{resume.REMOVED_SUFFIX}{os.getpid()}'
  assert str(killed_at.value) == aside
  assert not os.path.lexists(checkpoint)
  assert sorted(os.listdir(aside)) == ['checkpoint-000000010', 'latest.json']
  monkeypatch.undo()
  resume.remove(checkpoint)
  assert os.listdir(tmp_path) == []


def test_remove_never_follows_a_link(tmp_path):
  """A checkpoint folder that is a link: the link goes, what it points to
  stays."""
  target = _checkpoint(tmp_path / 'elsewhere')
  link = tmp_path / 'resume-abc'
  os.symlink(target, link)
  resume.remove(str(link))
  assert not os.path.lexists(link)
  assert sorted(os.listdir(target)) == ['checkpoint-000000010', 'latest.json']
  resume.remove(None)  # No resume: nothing to do.


def test_the_attempt_removes_the_checkpoint_last_once_published(
    tmp_path, monkeypatch):
  """The chief's attempt publishes, commits, then removes the checkpoint;
  an attempt that fails before publication keeps it."""
  from generic_trainer.plan import plan as plan_lib  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan.request import TrainingRequest  # pylint: disable=g-import-not-at-top
  from generic_trainer.training import attempt  # pylint: disable=g-import-not-at-top
  checkpoint = _checkpoint(tmp_path / 'resume-abc')
  steps = []
  monkeypatch.setattr(resume, 'remove', lambda path: steps.append(
      ('remove', path)))

  def published(staged, train, checks):
    steps.append(('publish', None))
    return attempt.Published('serving')

  monkeypatch.setattr(attempt, '_attempt', published)
  plan = plan_lib.TrainingPlan('module_file', 'm.py',
                               checkpoint_dir=checkpoint)
  request = TrainingRequest({}, {}, {}, 'serving', 'eval', plan)
  publication = attempt.Publication(
      None, lambda: None, commit=lambda: steps.append(('commit', None)))
  attempt.run(request, None, publication)
  assert steps == [('publish', None), ('commit', None),
                   ('remove', checkpoint)]

  def fails(staged, train, checks):
    raise RuntimeError('rejected')

  steps.clear()
  monkeypatch.setattr(attempt, '_attempt', fails)
  with pytest.raises(RuntimeError, match='rejected'):
    attempt.run(request, None, publication)
  assert not steps


def test_remove_on_an_object_store_leaves_nothing(tmp_path):
  """On an object store (TensorFlow's ram://), where a rename copies, the
  checkpoint and its pointer go, and nothing is left aside."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  base = f'ram://{tmp_path.name}/swd'
  checkpoint = f'{base}/resume-abc'
  tf.io.gfile.makedirs(f'{checkpoint}/checkpoint-000000010')
  for name in ('checkpoint-000000010/model.weights.h5', 'latest.json'):
    with tf.io.gfile.GFile(f'{checkpoint}/{name}', 'w') as f:
      f.write('{}')
  resume.remove(checkpoint)
  assert tf.io.gfile.glob(f'{base}/*') == []
