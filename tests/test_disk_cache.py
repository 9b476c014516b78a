"""Parsed rows cached on local disk (TrainSpec.cache='disk', or when they do
not fit in memory): trained on, and removed when training ends."""

import logging
import os
import re
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO, command_env
from generic_trainer.system import progress
from generic_trainer.errors import NonFiniteLossError, SpecError
from generic_trainer.notebook.estimator import Estimator
from spec_fixtures import PenguinSpec


class DiskSpec(PenguinSpec):
  cache = 'disk'
  epochs = 3


class DivergesInEpoch2(DiskSpec):
  """A NaN loss in the second epoch: training fails with the cache open."""

  def preprocess(self, features):
    return features

  def handlers(self):
    import keras  # pylint: disable=g-import-not-at-top

    class Poison(keras.callbacks.Callback):

      def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
          for w in self.model.trainable_weights:
            w.assign(w * float('nan'))

    return [Poison()]


@pytest.fixture
def own_tmpdir(tmp_path, monkeypatch):
  """TMPDIR, where the cache folders go, set to an empty folder."""
  folder = tmp_path / 'tmp'
  folder.mkdir()
  monkeypatch.setenv('TMPDIR', str(folder))
  monkeypatch.setattr(tempfile, 'tempdir', None)
  return folder


def _cache_folders(tmpdir):
  """The cache folders in `tmpdir` (TensorFlow writes its own files there
  too)."""
  return [n for n in os.listdir(tmpdir)
          if n.startswith('generic-trainer-cache-')]


def _cache_lines(caplog):
  return [r.getMessage() for r in caplog.records
          if r.getMessage().startswith('cache: ')]


def test_rows_cached_on_disk_train_and_are_removed_after(
    tmp_path, penguin_csvs, own_tmpdir, caplog):
  """Train and eval rows go to folders of TMPDIR, the epochs after the first
  read them back, and nothing is left when training ends."""
  caplog.set_level(logging.INFO, logger=progress.LOGGER)
  est = Estimator(DiskSpec, str(tmp_path / 'run'))
  result = est.train(penguin_csvs[0], eval_data=penguin_csvs[1])
  lines = _cache_lines(caplog)
  assert len(lines) == 2, lines
  folders = [re.match(r'cache: on disk for \S+, in (\S+) ', line).group(1)
             for line in lines]
  assert all(f.startswith(str(own_tmpdir) + os.sep) for f in folders)
  accuracy = result['eval']['sparse_categorical_accuracy']
  assert result['epochs'] == 3 and accuracy > 0.6, result
  assert _cache_folders(own_tmpdir) == []


def test_a_failed_training_removes_its_disk_cache(
    tmp_path, penguin_csvs, own_tmpdir):
  """A run that fails mid-training leaves no cache files behind."""
  est = Estimator(DivergesInEpoch2, str(tmp_path / 'run'))
  with pytest.raises(NonFiniteLossError):
    est.train(penguin_csvs[0], eval_data=penguin_csvs[1])
  assert _cache_folders(own_tmpdir) == []


def test_an_unknown_cache_setting_fails_before_training(tmp_path, penguin_csvs):
  """cache='memory' is refused by the Estimator as by pipelines, before any
  data is read."""

  class Memory(PenguinSpec):
    cache = 'memory'

  with pytest.raises(SpecError, match=r"Received: cache='memory'\."):
    Estimator(Memory, str(tmp_path / 'run')).train(
        penguin_csvs[0], eval_data=penguin_csvs[1])


def test_a_training_leaves_nothing_in_tmpdir_not_even_compiled_python(
    tmp_path, penguin_csvs):
  """The command, in a person's session (Python writes compiled files,
  no PYTHONDONTWRITEBYTECODE), trains and leaves TMPDIR as it found it:
  autograph's generated modules leave no `__pycache__` there."""
  tmp = tmp_path / 'tmp'
  tmp.mkdir()
  env = dict(command_env(), TMPDIR=str(tmp))
  env.pop('PYTHONDONTWRITEBYTECODE', None)
  done = subprocess.run(
      [sys.executable, '-m', 'generic_trainer', '--module-file',
       os.path.join(REPO, 'module_files', 'penguin_spec.py'), '--train-data',
       penguin_csvs[0], '--output-dir', str(tmp_path / 'out'), '--steps',
       '5'], env=env, cwd=str(tmp_path), capture_output=True, text=True,
      timeout=600, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  assert os.listdir(tmp) == []
