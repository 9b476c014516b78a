"""GenericTrainer's constructor and spec: parity with tfx Trainer, early errors."""

import os
import re

import pytest

from conftest import PENGUIN_MODULE, TESTDATA
from generic_trainer.errors import InvalidArgumentError, UserModuleError


@pytest.fixture(scope='module')
def examples():
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  return Channel(type=standard_artifacts.Examples)


def _trainer(**kwargs):
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  return GenericTrainer(**kwargs)


def test_spec_matches_tfx_trainer_spec():
  """Every TrainerSpec parameter, input and output exists with the same
  type; GenericTrainer adds its parameters, `statistics` (which TFX's own
  Trainer has from 1.21) and `parsed_rows`."""
  from tfx.types.standard_component_specs import TrainerSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainerSpec  # pylint: disable=g-import-not-at-top
  for group in ('PARAMETERS', 'INPUTS', 'OUTPUTS'):
    ours, theirs = getattr(GenericTrainerSpec, group), getattr(TrainerSpec,
                                                               group)
    for key, parameter in theirs.items():
      assert key in ours, f'{group} lacks {key}'
      assert ours[key].type == parameter.type, key
      assert ours[key].optional == parameter.optional, key
  assert set(GenericTrainerSpec.PARAMETERS) - set(TrainerSpec.PARAMETERS) == {
      'keras_version', 'num_workers', 'strategy', 'allow_signature_change',
      'backend', 'max_restarts', 'pod_settings'}
  # TFX 1.21's Trainer takes `statistics` too (the first loop checked it).
  added = {'statistics', 'parsed_rows'} - set(TrainerSpec.INPUTS)
  assert added >= {'parsed_rows'}
  assert set(GenericTrainerSpec.INPUTS) - set(TrainerSpec.INPUTS) == added
  assert set(GenericTrainerSpec.OUTPUTS) - set(TrainerSpec.OUTPUTS) == {
      'updated_parsed_rows'}
  assert GenericTrainerSpec.OUTPUTS['updated_parsed_rows'].optional


def test_outputs_are_model_and_model_run(examples):
  """The component exposes Model and ModelRun outputs like tfx Trainer."""
  trainer = _trainer(examples=examples, module_file=PENGUIN_MODULE)
  assert trainer.outputs['model'].type_name == 'Model'
  assert trainer.outputs['model_run'].type_name == 'ModelRun'
  assert trainer.exec_properties['train_args'] is not None


def test_constructs_with_run_fn_path(examples):
  """run_fn as a dotted path is accepted."""
  trainer = _trainer(examples=examples, run_fn='my_pkg.trainer.run_fn')
  assert trainer.exec_properties['run_fn'] == 'my_pkg.trainer.run_fn'


def test_a_num_workers_range_is_kept_as_min_colon_max(examples):
  """num_workers=(2, 3) and '2:3' are the same execution property, '2:3';
  an int stays an int."""
  for setting in ((2, 3), '2:3'):
    trainer = _trainer(examples=examples, module_file=PENGUIN_MODULE,
                       num_workers=setting)
    assert trainer.exec_properties['num_workers'] == '2:3'
  assert _trainer(examples=examples, module_file=PENGUIN_MODULE,
                  num_workers=2).exec_properties['num_workers'] == 2


@pytest.mark.parametrize('kwargs, message', [
    ({}, r"Exactly one of 'module_file', 'module_path' or 'run_fn' must be "
     r'supplied. Received: none of them'),
    ({'module_file': PENGUIN_MODULE, 'run_fn': 'a.run_fn'},
     r'Received: module_file, run_fn'),
    ({'run_fn': 'run_fn'}, r"'run_fn' must be a dotted path"),
    ({'module_file': PENGUIN_MODULE, 'keras_version': 'keras2'},
     r"'keras_version' must be one of keras3, tf_keras, or unset \(whatever "
     r"tf.keras is in the process\). Received: keras_version='keras2'"),
    ({'module_file': PENGUIN_MODULE, 'custom_config': ['a']},
     r"'custom_config' must be a dict. Received: custom_config that is a "
     r'list'),
    ({'module_file': PENGUIN_MODULE, 'custom_config': {'f': object()}},
     r"'custom_config' must be JSON-serialisable"),
    ({'module_file': PENGUIN_MODULE, 'train_args': {'num_steps': 3}},
     r"'train_args' must be a trainer_pb2.TrainArgs.*Received: train_args "
     r'that is a dict'),
    ({'module_file': PENGUIN_MODULE, 'max_restarts': -1},
     r"^'max_restarts' must be a non-negative int: how many times a "
     r'multi-worker training restarts its workers from the last checkpoint '
     r'after one died \(0: the execution fails at the first death; None: '
     r'2\)\. Received: max_restarts=-1\. Set 0 or more, or leave it unset\.$'),
    ({'module_file': PENGUIN_MODULE, 'num_workers': '3:2'},
     r"^'num_workers' must be a positive int .* or a range MIN:MAX .*"
     r"Received: num_workers='3:2'\."),
])
def test_argument_errors(examples, kwargs, message):
  """Wrong arguments fail at construction with a message naming them."""
  with pytest.raises(InvalidArgumentError, match=message):
    _trainer(examples=examples, **kwargs)


def test_negative_steps(examples):
  """Negative num_steps fail at construction."""
  from tfx.proto import trainer_pb2  # pylint: disable=g-import-not-at-top
  with pytest.raises(InvalidArgumentError, match=(
      r"'eval_args.num_steps' must be positive.*Received: num_steps=-5")):
    _trainer(examples=examples, module_file=PENGUIN_MODULE,
             eval_args=trainer_pb2.EvalArgs(num_steps=-5))


def test_examples_required():
  """Without examples the constructor says which channel to pass."""
  with pytest.raises(InvalidArgumentError, match=r"'examples' is required"):
    _trainer(module_file=PENGUIN_MODULE)


def test_module_file_checked_at_construction(examples):
  """A missing module file fails when the pipeline is built, not at run."""
  with pytest.raises(UserModuleError, match=r'The module file does not exist'):
    _trainer(examples=examples, module_file='/no/such/penguin.py')


def test_trainer_fn_module_rejected_at_construction(examples):
  """A tf.estimator module fails at construction with the migration hint."""
  with pytest.raises(UserModuleError, match=r'add a `run_fn\(fn_args\)`'):
    _trainer(examples=examples,
             module_file=os.path.join(TESTDATA, 'trainer_fn_only.py'))


def test_errors_subclass_builtins():
  """Our errors can be caught as the built-in exception they refine."""
  assert issubclass(InvalidArgumentError, ValueError)
  assert issubclass(UserModuleError, ImportError)


def test_zero_steps_are_unset_and_negative_ones_refused(examples):
  """num_steps=0 is unset, as TFX's Trainer reads it (TrainArgs() is 0
  too); a negative one is refused by the rule the command uses
  (`settings.steps`), with its message."""
  from tfx.proto import trainer_pb2  # pylint: disable=g-import-not-at-top
  _trainer(examples=examples, module_file=PENGUIN_MODULE,
           train_args=trainer_pb2.TrainArgs(num_steps=0),
           eval_args=trainer_pb2.EvalArgs(num_steps=0))
  with pytest.raises(InvalidArgumentError, match=re.escape(
      "'train_args.num_steps' must be positive, or unset to read the split "
      "once (0 is unset, as TFX's Trainer reads it). Received: "
      'num_steps=-1. Set a positive number, or leave it unset.')):
    _trainer(examples=examples, module_file=PENGUIN_MODULE,
             train_args=trainer_pb2.TrainArgs(num_steps=-1))


def test_a_syntax_error_at_construction_has_a_short_traceback(examples,
                                                               tmp_path):
  """A module file with a syntax error fails GenericTrainer(...) with our
  message and no chained SyntaxError: the traceback ends in the
  constructor, a frame below the script's line."""
  import traceback  # pylint: disable=g-import-not-at-top
  path = tmp_path / 'broken.py'
  path.write_text('def run_fn(fn_args)\n  pass\n')
  with pytest.raises(UserModuleError, match=(
      r"has a syntax error at line 1: expected ':'")) as e:
    _trainer(examples=examples, module_file=str(path))
  assert e.value.__cause__ is None and e.value.__suppress_context__
  frames = traceback.extract_tb(e.value.__traceback__)
  assert [f.name for f in frames[1:]] == ['_trainer', '__init__'], frames


_TEAM_PIPELINE = '''
import os, sys
from tfx import v1 as tfx
from generic_trainer.component import GenericTrainer

root, data, module = sys.argv[1:4]
example_gen = tfx.components.CsvExampleGen(input_base=data)
trainer = GenericTrainer(
    module_file=module, examples=example_gen.outputs['examples'],
    train_args=tfx.proto.TrainArgs(num_steps=3),
    eval_args=tfx.proto.EvalArgs(num_steps=1))
tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
    pipeline_name='team', pipeline_root=os.path.join(root, 'pipeline_root'),
    components=[example_gen, trainer],
    metadata_connection_config=tfx.orchestration.metadata
    .sqlite_metadata_connection_config(os.path.join(root, 'metadata.sqlite'))))
'''


@pytest.mark.slow
def test_a_teams_own_pipeline_script_says_the_reason_first(tmp_path,
                                                          penguin_csvs):
  """A LocalDagRunner script of a team's own, outside the repository, whose
  run_fn raises: stderr has our reason first (before TFX's 'Execution N
  failed.' and Python's traceback), no chained traceback, and the whole
  traceback in the stateful working dir's traceback.txt it names."""
  import shutil  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from conftest import command_env  # pylint: disable=g-import-not-at-top
  (tmp_path / 'data').mkdir()
  shutil.copy(penguin_csvs[0], tmp_path / 'data' / 'train.csv')
  (tmp_path / 'pipeline.py').write_text(_TEAM_PIPELINE)
  (tmp_path / 'module.py').write_text(
      'def _load_vocabulary(path):\n'
      "  raise FileNotFoundError(f'vocabulary {path} is missing')\n\n\n"
      'def run_fn(fn_args):\n'
      "  _load_vocabulary('/no/such/vocab.txt')\n")
  env = command_env()
  env.pop('PYTHONPATH')  # The package as a team has it: installed.
  done = subprocess.run(
      [sys.executable, 'pipeline.py', str(tmp_path / 'out'),
       str(tmp_path / 'data'), str(tmp_path / 'module.py')],
      cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
      check=False)
  assert done.returncode == 1, done.stderr[-3000:]
  err = done.stderr
  reason = err.index('ERROR:absl:GenericTrainer failed: RunFnError: run_fn (')
  assert reason < err.index('failed.\nTraceback (most recent call last)')
  assert 'The above exception was the direct cause' not in err
  assert 'During handling of the above exception' not in err
  traceback_lines = err[err.index('Traceback (most recent call last)'):]
  assert len(traceback_lines.splitlines()) < 25, traceback_lines
  assert ('raised FileNotFoundError: vocabulary /no/such/vocab.txt is '
          'missing') in err[reason:]
  named = re.search(r'is in (\S+/stateful_working_dir/\S+/traceback\.txt)\n',
                    err[reason:]).group(1)
  with open(named) as f:
    kept = f.read()
  assert 'in _load_vocabulary' in kept and 'FileNotFoundError' in kept
