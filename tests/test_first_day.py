"""The first day's small things: a quiet stderr, an honest plan, a canned
spec on JAX refused when the pipeline is built."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, command_env

CANNED_MODULE = os.path.join(REPO, 'module_files', 'penguin_canned.py')
SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')
CANNED_ON_JAX = (
    "{source} cannot train PenguinSpecies of {path}: it has a head (every "
    "canned spec has one), and a head's export signatures call the model "
    'from TensorFlow, which a JAX model cannot be called from. Expected a '
    'TrainSpec without a head on JAX, or TensorFlow. Received: {source}, '
    "{flag}='{path}'. Train it on TensorFlow (backend='tensorflow', or "
    'leave it unset), or drop the head and give build_loss and '
    'build_metrics.')


@pytest.fixture(scope='module')
def species_csv(tmp_path_factory):
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  return write_penguin_csv(str(tmp_path_factory.mktemp('species')),
                           string_labels=True)


@pytest.mark.slow
def test_the_command_stderr_has_no_tensorflow_start_up_lines_nor_warnings(
    tmp_path, species_csv):
  """A canned spec trained by the command: stderr holds the progress log
  only (no C++ start-up lines, no FutureWarning), and 200 steps of a
  one-epoch spec read as such, not as "1 epochs"."""
  env = command_env()
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  env.pop('PYTHONWARNINGS', None)
  proc = subprocess.run(
      [sys.executable, '-m', 'generic_trainer', '--module-file',
       CANNED_MODULE, '--train-data', species_csv, '--output-dir',
       str(tmp_path / 'out'), '--steps', '200', '--progress', 'lines'],
      capture_output=True, text=True, env=env, cwd=str(tmp_path),
      timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'Warning' not in proc.stderr, proc.stderr
  assert not re.search(r'^\d{4}-\d\d-\d\d [\d:.]+: [IWEF] ', proc.stderr,
                       re.M), proc.stderr
  assert [l for l in proc.stderr.splitlines() if not l.startswith(
      ('cache: ', 'epoch 1 '))] == [], proc.stderr
  assert ': 200 steps in one epoch (evaluated once, at the end), ' in (
      proc.stdout)
  assert '1 epochs' not in proc.stdout


def test_the_schedule_reads_as_steps_and_epochs():
  """Steps and epochs in words: one epoch says so; several say their size."""
  from generic_trainer.command.cli import schedule_text  # pylint: disable=g-import-not-at-top
  assert schedule_text(20000, 1) == (
      '20000 steps in one epoch (evaluated once, at the end)')
  assert schedule_text(20, 5) == '20 steps in 5 epochs of 4 steps'
  assert schedule_text(21, 5) == '21 steps in 5 epochs'


def test_a_canned_spec_on_jax_is_refused_when_the_pipeline_is_built():
  """GenericTrainer(backend='jax') with a canned spec's module: refused by
  the constructor, before any run."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  examples = Channel(type=standard_artifacts.Examples)
  with pytest.raises(InvalidArgumentError) as info:
    GenericTrainer(examples=examples, module_file=CANNED_MODULE,
                   backend='jax')
  assert str(info.value) == CANNED_ON_JAX.format(
      source="backend='jax'", path=CANNED_MODULE, flag='module_file')
  GenericTrainer(examples=examples, module_file=CANNED_MODULE)
  GenericTrainer(examples=examples, module_file=SPEC_MODULE, backend='jax')


def test_the_command_refuses_a_canned_spec_on_jax_before_tensorflow(
    tmp_path):
  """--backend jax with a canned spec: exit 2, TensorFlow not imported."""
  code = ('import json, sys\nfrom generic_trainer.command import cli\n'
          'status = cli.main(json.loads(sys.argv[1]))\n'
          "print(json.dumps([status, 'tensorflow' in sys.modules]))")
  import json  # pylint: disable=g-import-not-at-top
  data = tmp_path / 'p.csv'
  data.write_text('species,bill_length_mm\nAdelie,39.1\n')
  argv = ['--module-file', CANNED_MODULE, '--train-data', str(data),
          '--output-dir', str(tmp_path / 'out'), '--backend', 'jax']
  proc = subprocess.run([sys.executable, '-c', code, json.dumps(argv)],
                        capture_output=True, text=True, env=command_env(),
                        cwd=str(tmp_path), timeout=120, check=False)
  assert json.loads(proc.stdout.splitlines()[-1]) == [2, False], proc.stderr
  assert 'generic-trainer: error: ' + CANNED_ON_JAX.format(
      source='--backend=jax', path=CANNED_MODULE,
      flag='--module-file') in proc.stderr


@pytest.mark.parametrize('source, refused', [
    ('from generic_trainer.canned import DNNClassifierSpec as D\n'
     'class S(D):\n  backend = "jax"\n', True),
    ('from generic_trainer import canned\n'
     'class Base(canned.LinearClassifierSpec):\n  pass\n'
     'class S(Base):\n  backend = "jax"\n', True),
    ('from generic_trainer import TrainSpec\n'
     'from generic_trainer.heads import MultiClassHead\n'
     'class S(TrainSpec):\n  head = MultiClassHead(n_classes=3)\n'
     '  backend = "jax"\n', True),
    ('from generic_trainer.canned import DNNClassifierSpec\n'
     'class S(DNNClassifierSpec):\n  pass\n', False),
    ('from generic_trainer import TrainSpec\n'
     'from generic_trainer.canned import DNNClassifierSpec\n'
     'class A(TrainSpec):\n  backend = "jax"\n'
     'class S(DNNClassifierSpec):\n  backend = "jax"\n', False),
    ('from mylib import Base\n'
     'from generic_trainer.canned import DNNClassifierSpec\n'
     'class A(Base):\n  backend = "jax"\n', False),
], ids=['alias', 'through-a-base', 'own-head', 'on-tensorflow',
        'a-plain-spec-beside', 'unknown-base'])
def test_what_the_source_says_plainly_is_refused_and_no_more(
    tmp_path, source, refused):
  """A spec whose own backend is 'jax' and whose head the source shows is
  refused; where the entry point or the head is not plain, run time
  decides (errors row 115)."""
  from generic_trainer.usercode import static_spec  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InvalidArgumentError  # pylint: disable=g-import-not-at-top
  module = tmp_path / 'module.py'
  module.write_text(textwrap.dedent(source))
  if refused:
    with pytest.raises(InvalidArgumentError, match=(
        r"^S.backend='jax' cannot train S of .*module.py: it has a head")):
      static_spec.check_heads_on_jax(str(module), None, 'backend=None')
  else:
    static_spec.check_heads_on_jax(str(module), None, 'backend=None')
