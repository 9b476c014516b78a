"""Every entry point reaches the user's code through one path: the stack at
the moment the user's code is entered, recorded, not read from the code.

A `run_fn` module and a TrainSpec module that write Python's stack to a
file when `run_fn` and `build_model` are entered; each trained from the
executor's `Do`, the command (`cli.main`, what the installed
`generic-trainer` runs), the notebook `Estimator`, a local group's worker
(a process of its own) and a member of a TF_CONFIG cluster that is not
its chief (an executor in a process of its own). The stacks are what
docs/architecture/index.md shows
(`test_the_architecture_page_shows_the_stacks`).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, command_env
import worker_pair

PACKAGE_DIR = os.path.join(REPO, 'generic_trainer')
STACK_ENV = 'GENERIC_TRAINER_TEST_STACK_FILE'
# The most of the package's modules between an entry point and the user's
# code (issue 45): at `run_fn` and at a TrainSpec's `build_model`.
MOST_AT_RUN_FN = 5
MOST_AT_BUILD_MODEL = 7
# Every entry point goes through these, in this order: the attempt, then
# the one launcher.
THE_PATH = ['generic_trainer.training.attempt',
            'generic_trainer.launch.launcher']

_RECORDER = '''
import json, os, traceback

def record_import():
  """Appends 'import' to the test's file: the module is being imported."""
  path = os.environ.get({env!r})
  if path:
    with open(path, 'a') as f:
      f.write('"import"\\n')


def record_stack():
  """Appends the stack of this call, as file names, to the test's file."""
  path = os.environ.get({env!r})
  if path:
    with open(path, 'a') as f:
      f.write(json.dumps([frame.filename for frame in
                          traceback.extract_stack()[:-1]]) + '\\n')
record_import()
'''.format(env=STACK_ENV)


def package_modules(filenames):
  """The package's modules on a stack, outermost first, each run of frames
  of one module counted once."""
  modules = []
  for filename in filenames:
    path = os.path.realpath(filename)
    if not path.startswith(PACKAGE_DIR + os.sep):
      continue
    name = os.path.relpath(path, REPO)[:-3].replace(os.sep, '.')
    name = name[:-len('.__init__')] if name.endswith('.__init__') else name
    if not modules or modules[-1] != name:
      modules.append(name)
  return modules


def _module(tmp_path, name, body):
  path = tmp_path / f'{name}.py'
  path.write_text(_RECORDER + textwrap.dedent(body))
  return str(path)


@pytest.fixture
def run_fn_module(tmp_path):
  """A run_fn module: the penguin module's run_fn, the stack recorded."""
  return _module(tmp_path, 'stack_run_fn', f'''
      import sys
      sys.path.insert(0, {os.path.join(REPO, 'module_files')!r})
      import penguin_keras

      def run_fn(fn_args):
        record_stack()
        penguin_keras.run_fn(fn_args)
      ''')


@pytest.fixture
def spec_module(tmp_path):
  """A TrainSpec module: the penguin spec, the stack recorded at
  build_model."""
  return _module(tmp_path, 'stack_spec', f'''
      import sys
      sys.path.insert(0, {os.path.join(REPO, 'tests')!r})
      import spec_fixtures

      class StackSpec(spec_fixtures.PenguinSpec):
        epochs = 1

        def build_model(self):
          record_stack()
          return super().build_model()
      ''')


@pytest.fixture
def stacks(tmp_path, monkeypatch):
  """Reads the stacks recorded so far (each a list of package modules)."""
  path = tmp_path / 'stacks.jsonl'
  monkeypatch.setenv(STACK_ENV, str(path))

  def read(imports=False):
    """The stacks; with `imports`, the records as they came: 'import' for
    each import of the module, a stack for each entry into user code."""
    if not path.exists():
      return []
    records = [json.loads(line) for line in path.read_text().splitlines()]
    if imports:
      return ['import' if r == 'import' else 'stack' for r in records]
    return [package_modules(r) for r in records if r != 'import']
  return read


def _executor(module, trainer_io):
  _executor_with(module, trainer_io)


def _executor_with(module, trainer_io, **properties):
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  GenericExecutor().Do(*trainer_io(module_file=module, **properties))


def _command(module, tmp_path, penguin_csvs):
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  assert cli.main(['--module-file', module, '--train-data', penguin_csvs[0],
                   '--eval-data', penguin_csvs[1], '--output-dir',
                   str(tmp_path / 'out'), '--steps', '3',
                   '--parsed-rows-cache', 'off']) == 0


def _estimator(module, tmp_path, penguin_csvs):
  import importlib.util  # pylint: disable=g-import-not-at-top
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location('stack_spec_nb', module)
  loaded = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(loaded)
  Estimator(loaded.StackSpec, str(tmp_path / 'nb'),
            parsed_rows_cache=False).train(penguin_csvs[0], steps=3)


def _check(stack, most):
  assert stack, 'the user code was not reached'
  assert len(stack) <= most, stack
  assert len(set(stack)) == len(stack), f'a module entered twice: {stack}'
  assert [m for m in stack if m in THE_PATH] == THE_PATH, stack


# What the architecture page shows; the tests below compare with it.
_ATTEMPT = ['generic_trainer.training.attempt',
            'generic_trainer.launch.launcher']
_SPEC = ['generic_trainer.loop.runner', 'generic_trainer.loop.fit_loop',
         'generic_trainer.trainspec.spec']
_EXECUTOR = ['generic_trainer.component.executor']
_COMMAND = ['generic_trainer.command.cli', 'generic_trainer.command.run']
EXPECTED = {
    ('executor', 'run_fn'): _EXECUTOR + _ATTEMPT,
    ('command', 'run_fn'): _COMMAND + _ATTEMPT,
    ('local worker', 'run_fn'): ['generic_trainer.training.child'] + _ATTEMPT,
    ('TF_CONFIG worker', 'run_fn'): _EXECUTOR + _ATTEMPT,
    ('step job chief', 'run_fn'): _EXECUTOR + _ATTEMPT,
    ('executor', 'build_model'): _EXECUTOR + _ATTEMPT + _SPEC,
    ('command', 'build_model'): _COMMAND + _ATTEMPT + _SPEC,
    ('notebook', 'build_model'): ['generic_trainer.notebook.estimator'] +
                                 _ATTEMPT + _SPEC,
}


def test_package_modules_collapses_a_modules_frames():
  """The count takes a module once per run of its frames, and leaves out
  what is not the package's."""
  executor = os.path.join(PACKAGE_DIR, 'component', 'executor.py')
  here = os.path.join(PACKAGE_DIR, 'launch', 'here.py')
  assert package_modules(['/usr/lib/x.py', executor, executor, here,
                          executor]) == [
                              'generic_trainer.component.executor',
                              'generic_trainer.launch.here',
                              'generic_trainer.component.executor']
  with pytest.raises(AssertionError, match='entered twice'):
    _check(['a'] + THE_PATH + ['a'], 6)


def test_run_fn_is_reached_through_one_path(run_fn_module, trainer_io,
                                            tmp_path, penguin_csvs, stacks):
  """From the executor and the command, `run_fn` is entered through the
  attempt and the launcher: at most 5 of the package's modules, none
  twice."""
  _executor(run_fn_module, trainer_io)
  _command(run_fn_module, tmp_path, penguin_csvs)
  executor, command = stacks()
  for stack in (executor, command):
    _check(stack, MOST_AT_RUN_FN)
  assert executor == EXPECTED[('executor', 'run_fn')]
  assert command == EXPECTED[('command', 'run_fn')]


def test_build_model_is_reached_through_one_path(spec_module, trainer_io,
                                                 tmp_path, penguin_csvs,
                                                 stacks):
  """From the executor, the command and the notebook Estimator, a
  TrainSpec's `build_model` is entered through the attempt, the launcher
  and the runner: at most 7 of the package's modules, none twice."""
  _executor(spec_module, trainer_io)
  _command(spec_module, tmp_path, penguin_csvs)
  _estimator(spec_module, tmp_path, penguin_csvs)
  executor, command, notebook = stacks()
  for stack in (executor, command, notebook):
    _check(stack, MOST_AT_BUILD_MODEL)
  assert executor == EXPECTED[('executor', 'build_model')]
  assert command == EXPECTED[('command', 'build_model')]
  assert notebook == EXPECTED[('notebook', 'build_model')]


def test_a_local_groups_workers_reach_run_fn_through_the_same_attempt(
    run_fn_module, trainer_io, stacks):
  """Each worker of a local group (processes the executor starts) enters
  `run_fn` through the attempt and the launcher, from the child program:
  the chief and the worker alike."""
  _executor_with(run_fn_module, trainer_io, num_workers=2)
  workers = stacks()
  assert len(workers) == 2, workers
  for stack in workers:
    _check(stack, MOST_AT_RUN_FN)
    assert stack == EXPECTED[('local worker', 'run_fn')]


_MEMBER = '''
import json, sys
from tfx.types import artifact_utils
from generic_trainer.component.executor import GenericExecutor
from absl import logging
logging.set_verbosity(logging.INFO)
request = json.load(open(sys.argv[1]))
GenericExecutor().Do(artifact_utils.parse_artifact_dict(request['inputs']),
                     artifact_utils.parse_artifact_dict(request['outputs']),
                     request['properties'])
'''


def test_a_tf_config_member_reaches_run_fn_through_the_same_attempt(
    run_fn_module, trainer_io, tmp_path, stacks):
  """A member of a TF_CONFIG cluster that is not its chief (a TFJob's
  worker replica) runs the executor's same attempt, its role switching
  publication off: no second path to `run_fn`."""
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  inputs, outputs, properties = trainer_io(module_file=run_fn_module,
                                           train_steps=4)
  request = tmp_path / 'request.json'
  request.write_text(json.dumps({
      'inputs': artifact_utils.jsonify_artifact_dict(inputs),
      'outputs': artifact_utils.jsonify_artifact_dict(outputs),
      'properties': properties}))
  script = tmp_path / 'member.py'
  script.write_text(_MEMBER)
  processes = {}
  for task_type, tf_config in worker_pair.tf_configs().items():
    env = dict(command_env(), TF_CONFIG=tf_config)
    env[STACK_ENV] = str(tmp_path / f'stacks-{task_type}.jsonl')
    processes[task_type] = subprocess.Popen(
        [sys.executable, str(script), str(request)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  logs = worker_pair.ended(processes, timeout_s=420)
  for task_type, process in processes.items():
    assert process.returncode == 0, logs[task_type][-4000:]
  assert 'training as worker 1 of 2' in logs['worker']
  assert 'export validated: ' in logs['chief'] and (
      'export validated: ' not in logs['worker'])
  for task_type in ('chief', 'worker'):
    with open(tmp_path / f'stacks-{task_type}.jsonl') as f:
      found = [package_modules(json.loads(line)) for line in f
               if line.strip() != '"import"']
    assert found == [EXPECTED[('TF_CONFIG worker', 'run_fn')]], task_type


def test_a_kubeflow_steps_job_trains_and_is_launched_through_the_attempt(
    run_fn_module, trainer_io, tmp_path, stacks, monkeypatch):
  """The chief pod of a Kubeflow step's job (a JobSet pod, the step's
  variable in its environment too) enters `run_fn` through the same
  attempt and launcher, and records what it published for the step; the
  step itself reaches its job through the attempt and the launcher too:
  the executor has no path of its own."""
  import traceback  # pylint: disable=g-import-not-at-top
  from generic_trainer import keys  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import StepJobError  # pylint: disable=g-import-not-at-top
  step_variable = json.dumps({'kind': 'TrainJob', 'image': 'img',
                              'resources': None})
  record = tmp_path / 'record.json'
  for name, value in {
      'JOBSET_NAME': 'gt-1', 'REPLICATED_JOB_NAME': 'node',
      'JOB_INDEX': '0', 'JOB_COMPLETION_INDEX': '0',
      'GENERIC_TRAINER_NUM_NODES': '1', keys.STEP_JOB_ENV: step_variable,
      keys.STEP_JOB_RECORD_ENV: json.dumps(
          {'job': 'gt-1', 'nonce': 'n', 'path': str(record)})}.items():
    monkeypatch.setenv(name, value)
  monkeypatch.delenv('TF_CONFIG', raising=False)
  _executor_with(run_fn_module, trainer_io, train_steps=3)
  assert stacks() == [EXPECTED[('step job chief', 'run_fn')]]
  assert json.loads(record.read_text())['job'] == 'gt-1'
  assert json.loads(record.read_text())['model_digest'].startswith('sha256:')
  for name in ('JOBSET_NAME', 'REPLICATED_JOB_NAME', 'JOB_INDEX',
               'JOB_COMPLETION_INDEX', 'GENERIC_TRAINER_NUM_NODES',
               keys.STEP_JOB_RECORD_ENV):
    monkeypatch.delenv(name)
  # The step: outside a pod it cannot reach the API, and says so from
  # where its launcher launches the job.
  with pytest.raises(StepJobError, match='not in one with a service '
                     'account') as raised:
    _executor_with(run_fn_module, trainer_io, num_workers=2)
  path = package_modules(
      [frame.filename for frame in traceback.extract_tb(raised.tb)])
  assert path[:4] == _EXECUTOR + _ATTEMPT + ['generic_trainer.kubeflow.'
                                             'step_job.step'], path
  assert stacks() == [EXPECTED[('step job chief', 'run_fn')]]  # No training.


def test_the_module_is_imported_once_per_training(spec_module, trainer_io,
                                                  tmp_path, penguin_csvs,
                                                  stacks):
  """The executor and the command import the user's module once for a
  training (the plan loads it; nothing loads it again)."""
  _executor(spec_module, trainer_io)
  _command(spec_module, tmp_path, penguin_csvs)
  assert stacks(imports=True) == ['import', 'stack'] * 2


def test_the_architecture_page_shows_the_stacks():
  """docs/architecture/index.md lists each stack above, as recorded."""
  with open(os.path.join(REPO, 'docs', 'architecture', 'index.md')) as f:
    page = f.read()
  for (entry, user_code), modules in EXPECTED.items():
    shown = ' -> '.join(m[len('generic_trainer.'):] for m in modules)
    assert f'{entry} to `{user_code}`: {shown}' in page, (entry, user_code)
