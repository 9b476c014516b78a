"""Each decision is made in one place: read from the code with `ast`, and
shown by behaviour where it can be."""

import ast
import os

import pytest

from conftest import REPO, TESTDATA
from test_layout import MODULES


def _constants(value):
  """{module: count} of the string constant `value` in the package's code
  (docstrings and longer strings that contain it do not count)."""
  found = {}
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    count = sum(1 for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and node.value == value)
    if count:
      found[module] = count
  return found


def _calls(attribute, on=None):
  """Modules that call `<on>.<attribute>(...)` (`on` None: any object)."""
  found = set()
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
           n.func.attr == attribute and
           (on is None or getattr(n.func.value, 'id', None) == on)
           for n in ast.walk(tree)):
      found.add(module)
  return found


def test_compression_is_told_from_the_file_name_in_one_place():
  """Only data.tfrecords knows that '.gz' means GZIP."""
  assert set(_constants('.gz')) == {'generic_trainer.data.tfrecords'}
  assert set(_constants('GZIP')) == {'generic_trainer.data.tfrecords'}


@pytest.mark.parametrize('key', ['module_file', 'module_path', 'run_fn'])
def test_source_keys_are_defined_once(key):
  """The three ways to name user code are constants of `keys`."""
  assert _constants(key) == {'generic_trainer.keys': 1}


def test_one_reader_of_a_module_files_top_level_names():
  """One place parses user source (source_tree); module_loader reads what
  a module file defines from it."""
  assert _calls('parse', on='ast') == {'generic_trainer.system.source_tree'}
  from generic_trainer.usercode import module_loader  # pylint: disable=g-import-not-at-top
  kinds = module_loader.top_level_names(os.path.join(TESTDATA,
                                                     'trainer_fn_only.py'))
  assert kinds['trainer_fn'] == 'function'


def test_fn_args_extra_fields_are_defined_once():
  """The pipeline's FnArgs and the local one share GenericTrainer's fields
  from one class."""
  import attr  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs.fn_args import FnArgs  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs.fields import GenericFnArgsFields  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs.local import LocalFnArgs  # pylint: disable=g-import-not-at-top
  assert issubclass(FnArgs, GenericFnArgsFields)
  assert issubclass(LocalFnArgs, GenericFnArgsFields)
  extra = [f.name for f in attr.fields(GenericFnArgsFields)]
  assert 'checkpoint_dir' in extra and 'num_examples' in extra
  for cls in (FnArgs, LocalFnArgs):
    assert [f.name for f in attr.fields(cls)][-len(extra):] == extra


def test_where_to_train_is_decided_in_one_function():
  """Only plan.plan asks what this process's Keras can give; only
  launch.launcher starts a child or trains in place, and only the attempt
  calls the launcher."""
  assert _calls('claim_tf_keras') == {'generic_trainer.plan.plan'}
  assert _calls('has_backend') == {'generic_trainer.plan.plan'}
  assert _calls('train_in_child') == {'generic_trainer.launch.launcher'}
  callers = {m for m, targets in __import__('test_layout').GRAPH.items()
             if 'generic_trainer.launch.launcher' in targets}
  assert callers == {'generic_trainer.training.attempt'}


def _importers(name):
  """Modules that import `name` from generic_trainer.keys."""
  found = set()
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    if any(isinstance(n, ast.ImportFrom) and n.module == 'generic_trainer.keys'
           and name in [a.name for a in n.names] for n in ast.walk(tree)):
      found.add(module)
  return found


def test_which_cluster_is_found_in_one_module():
  """Only launch.cluster_environment reads TF_CONFIG or a JobSet's
  variables from the environment, or names the stop file its members
  share (which the preemption handler reads)."""
  environment = 'generic_trainer.launch.cluster_environment'
  assert _importers('TF_CONFIG_ENV') == {environment}
  assert _importers('JOBSET_REQUIRED_ENV') == {environment}
  assert _importers('STOP_FILE_ENV') == {
      environment, 'generic_trainer.loop.handlers.preemption_stop'}
  assert set(_constants('TF_CONFIG')) == {'generic_trainer.keys'}


@pytest.mark.parametrize('module, facts', [
    ('generic_trainer.kubeflow.trainjob',
     ['trainjobs', 'trainingruntimes', 'trainer.kubeflow.org/v1alpha1',
      'jobset.sigs.k8s.io/jobset-name', 'Complete']),
    ('generic_trainer.kubeflow.tfjob',
     ['tfjobs', 'training.kubeflow.org/job-name', 'Succeeded']),
])
def test_a_job_kinds_facts_are_spelt_in_its_module(module, facts):
  """A kind's resources, its pods' label and the condition that ends it
  are its module's answers to `job_kind.JobKind`; the step asks the kind,
  and keeps no table keyed by kind."""
  for fact in facts:
    assert set(_constants(fact)) == {module}, fact


def test_estimator_trains_through_the_runners_sequence(tmp_path, penguin_csvs,
                                                      monkeypatch):
  """The notebook Estimator prepares and checks the spec with the same
  function as pipelines (loop.runner.prepare)."""
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import runner  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  prepared = []
  real = runner.prepare
  monkeypatch.setattr(runner, 'prepare',
                      lambda *a: prepared.append(a) or real(*a))
  Estimator(PenguinSpec, str(tmp_path)).train(penguin_csvs[0], steps=2)
  assert len(prepared) == 1


def test_evaluating_on_the_train_data_is_said_by_one_owner(
    tmp_path, penguin_csvs, caplog):
  """The notebook Estimator given no eval_data warns, as the command does
  for --eval-data train, that the eval figures are training-set figures:
  the same line (`plan.settings.eval_on_train_line`), in each one's
  spelling; given eval_data it says nothing of it. Its training record
  names the Keras it trained on."""
  import logging  # pylint: disable=g-import-not-at-top
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import holdout  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  caplog.set_level(logging.INFO)
  result = Estimator(PenguinSpec, str(tmp_path / 'a')).train(
      penguin_csvs[0], steps=2)
  said = [r.getMessage() for r in caplog.records
          if r.getMessage().startswith('Eval data:')]
  assert said == [
      'Eval data: the train data itself (no eval_data given). The eval '
      'figures will be training-set figures, not a measure of how the model '
      'does on data it has not seen; pass eval_data=FILES to measure that.']
  assert holdout.plan([], eval_on_train=True) == (
      'Eval data: the train data itself (--eval-data train). The eval '
      'figures will be training-set figures, not a measure of how the model '
      'does on data it has not seen.')
  assert result['keras'].startswith('Keras 3.'), result
  caplog.clear()
  Estimator(PenguinSpec, str(tmp_path / 'b')).train(
      penguin_csvs[0], eval_data=penguin_csvs[1], steps=2)
  assert not [r for r in caplog.records
              if r.getMessage().startswith('Eval data:')]


def test_command_shows_progress_by_logger_not_by_file(capsys):
  """The command shows the progress log's lines wherever they come from,
  and hides other INFO lines."""
  import logging  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import progress  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import console  # pylint: disable=g-import-not-at-top
  with console.command_lines(sys.stderr):
    progress.log().info('epoch 1 done in %.1fs', 1.0)
    logging.getLogger('absl').info('Component noise')
    logging.getLogger('absl').warning('a warning')
  err = capsys.readouterr().err
  assert err.splitlines() == ['epoch 1 done in 1.0s', 'WARNING: a warning']


class _Sentinel(Exception):
  """Raised by a replaced owner: whoever calls it, fails with this."""


def _entry_points(tmp_path, penguin_csvs, trainer_io):
  """{name: a call that reaches a training through its entry point}."""
  from tfx import types  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli_args  # pylint: disable=g-import-not-at-top
  module = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  flags = ['--module-file', module, '--train-data', penguin_csvs[0],
           '--output-dir', str(tmp_path / 'out'), '--steps', '2']
  return {
      'component': lambda: GenericTrainer(
          examples=types.Channel(type=standard_artifacts.Examples),
          module_file=module),
      'command arguments': lambda: cli_args.parse(flags, started=0.0),
      **_trainings(tmp_path, penguin_csvs, trainer_io),
  }


def _trainings(tmp_path, penguin_csvs, trainer_io):
  """{name: a call that trains to the end} of each entry point (the
  steps a TrainSpec of 5 epochs accepts)."""
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import run as command_run  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  module = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  return {
      'executor': lambda: GenericExecutor().Do(*trainer_io(
          train_steps=5, module_file=module)),
      'command run': lambda: command_run.run(command_run.Request(
          module_file=module, train_data=[penguin_csvs[0]],
          output_dir=str(tmp_path / 'run'), started=0.0, steps=5)),
      'command run_fn': lambda: command_run.run(command_run.Request(
          module_file=os.path.join(REPO, 'module_files', 'penguin_keras.py'),
          train_data=[penguin_csvs[0]], output_dir=str(tmp_path / 'run_fn'),
          started=0.0, steps=2)),
      'estimator train': lambda: Estimator(
          PenguinSpec, str(tmp_path / 'nb'), parsed_rows_cache=False).train(
              penguin_csvs[0], steps=2),
  }


def _all_follow(calls, names):
  """Each call of `names` fails with the replaced owner's _Sentinel (or
  with our error around it, where the owner ran inside user code)."""
  for name in names:
    with pytest.raises(Exception) as info:
      calls[name]()
      pytest.fail(f'{name} went around the owner')
    error = info.value
    while error is not None and not isinstance(error, _Sentinel):
      error = error.__cause__
    assert error is not None, f'{name}: {info.value!r}'



def _broken(name, reached=None):
  def broken(*args, **kwargs):
    if reached is not None:
      reached.append((args, kwargs))
    raise _Sentinel(name)
  return broken


def test_every_entry_point_checks_settings_through_the_plan(
    tmp_path, penguin_csvs, trainer_io, monkeypatch):
  """Breaking settings.check_settings breaks the component, the executor,
  the command and the notebook Estimator alike: the settings are checked
  in one place."""
  from generic_trainer.plan import settings  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(settings, 'check_settings', _broken('check_settings'))
  _all_follow(_entry_points(tmp_path, penguin_csvs, trainer_io),
              ['component', 'executor', 'command arguments', 'command run',
               'command run_fn', 'estimator train'])


def test_every_training_is_resolved_by_the_plan(
    tmp_path, penguin_csvs, trainer_io, monkeypatch):
  """Breaking plan.complete (the step of `resolve` that loads the user's
  code and decides where it trains) breaks the executor, the command and
  the notebook Estimator: one function resolves every training."""
  from generic_trainer.plan import plan  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(plan, 'complete', _broken('complete'))
  _all_follow(_entry_points(tmp_path, penguin_csvs, trainer_io),
              ['executor', 'command run', 'command run_fn',
               'estimator train'])


def test_every_entry_point_trains_through_the_one_launcher(
    tmp_path, penguin_csvs, trainer_io, monkeypatch):
  """Breaking launch.launcher.train breaks the executor, the command (a
  TrainSpec and a run_fn) and the notebook Estimator: none trains around
  it, and each hands it a plan that says where to train."""
  from generic_trainer.launch import launcher  # pylint: disable=g-import-not-at-top
  reached = []
  monkeypatch.setattr(launcher, 'train', _broken('launcher', reached))
  _all_follow(_entry_points(tmp_path, penguin_csvs, trainer_io),
              ['executor', 'command run', 'command run_fn',
               'estimator train'])
  assert [args[0].plan.where for args, _ in reached] == ['here'] * 4


def test_every_entry_point_trains_through_one_attempt_sequence(
    tmp_path, penguin_csvs, trainer_io, monkeypatch):
  """Breaking the attempt (stage, train, validate, gate, publish) breaks
  the executor, the command (a TrainSpec and a run_fn) and the notebook
  Estimator's export: the sequence is written once."""
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from generic_trainer.training import attempt  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  estimator = Estimator(PenguinSpec, str(tmp_path / 'est'))
  estimator.train(penguin_csvs[0], steps=2)
  reached = []
  monkeypatch.setattr(attempt, '_attempt', _broken('attempt', reached))
  calls = _entry_points(tmp_path, penguin_csvs, trainer_io)
  calls['estimator export'] = estimator.export
  _all_follow(calls, ['executor', 'command run', 'command run_fn',
                      'estimator export'])
  assert len(reached) == 4


def test_the_training_record_has_one_writer(
    tmp_path, penguin_csvs, trainer_io, monkeypatch):
  """train_result.json is written once per training, by the TrainSpec's
  runner, whichever entry point asked; breaking that writer breaks all
  of them."""
  from generic_trainer.loop import train_result  # pylint: disable=g-import-not-at-top
  calls = _trainings(tmp_path, penguin_csvs, trainer_io)
  writes = []
  real = train_result.write
  monkeypatch.setattr(train_result, 'write',
                      lambda *a: writes.append(a[0]) or real(*a))
  for name in ('executor', 'command run', 'estimator train'):
    writes.clear()
    calls[name]()
    assert len(writes) == 1, (name, writes)
  monkeypatch.setattr(train_result, 'write', _broken('write'))
  _all_follow(calls, ['executor', 'command run', 'estimator train'])


def test_the_checkpoint_folder_is_decided_by_the_plan(
    tmp_path, penguin_csvs, trainer_io, monkeypatch):
  """Breaking resume_folder.checkpoint_folder breaks the executor and the
  command: the plan alone names where a training checkpoints."""
  from generic_trainer.plan import resume_folder  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(resume_folder, 'checkpoint_folder',
                      _broken('checkpoint'))
  _all_follow(_entry_points(tmp_path, penguin_csvs, trainer_io),
              ['executor', 'command run', 'command run_fn'])


def test_the_steps_rule_has_one_owner(tmp_path, penguin_csvs, trainer_io,
                                      monkeypatch):
  """Breaking settings.steps breaks the component, the executor, the
  command's flags and the notebook Estimator: one rule for a number of
  steps (0 is unset, as in TFX)."""
  from tfx import types  # pylint: disable=g-import-not-at-top
  from tfx.proto import trainer_pb2  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan import settings  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(settings, 'steps', _broken('steps'))
  calls = _entry_points(tmp_path, penguin_csvs, trainer_io)
  calls['component'] = lambda: GenericTrainer(
      examples=types.Channel(type=standard_artifacts.Examples),
      module_file=os.path.join(REPO, 'module_files', 'penguin_spec.py'),
      train_args=trainer_pb2.TrainArgs(num_steps=2))
  _all_follow(calls, ['component', 'executor', 'command arguments',
                      'estimator train'])


def test_the_resume_checkpoint_is_removed_by_the_attempt_alone(
    tmp_path, penguin_csvs, trainer_io, monkeypatch):
  """Breaking resume.remove breaks the executor and the command (a
  TrainSpec and a run_fn) once they published: the attempt's last step
  removes a published training's checkpoint, for every entry point."""
  from generic_trainer import resume  # pylint: disable=g-import-not-at-top
  calls = _trainings(tmp_path, penguin_csvs, trainer_io)
  reached = []
  monkeypatch.setattr(resume, 'remove', _broken('remove', reached))
  _all_follow(calls, ['executor', 'command run', 'command run_fn'])
  assert len(reached) == 3
  assert os.path.isdir(tmp_path / 'run' / 'model')  # Published, then this.


def test_the_model_folders_layout_has_one_owner(
    tmp_path, penguin_csvs, trainer_io, monkeypatch):
  """Breaking paths.model_dirs (where a Model artifact holds its serving
  and eval SavedModels) breaks the executor and the command: staging and
  publishing follow it."""
  from generic_trainer.system import paths  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(paths, 'model_dirs', _broken('model_dirs'))
  _all_follow(_entry_points(tmp_path, penguin_csvs, trainer_io),
              ['executor', 'command run', 'command run_fn'])


def test_child_processes_follow_the_plan_they_receive():
  """A request carries its plan through JSON unchanged: a child reads
  where to train, the backend and its role from it, never from the
  settings again."""
  from generic_trainer.plan.cluster import ClusterRole, LocalGroup  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan.plan import TrainingPlan, Where  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan.request import TrainingRequest  # pylint: disable=g-import-not-at-top
  plan = TrainingPlan('module_file', '/m.py', spec_class='Spec',
                      backend='jax', keras_version='keras3',
                      num_workers=3, where=Where.LOCAL_WORKERS,
                      checkpoint_dir='/ckpt')
  request = TrainingRequest({}, {}, {'backend': 'tensorflow'}, 's', 'e', plan)
  group = LocalGroup([4001, 4002, 4003], '/group')
  worker = TrainingRequest.from_json(
      request.for_member(group.member(2)).to_json())
  assert worker.plan.where == Where.HERE
  assert worker.plan.backend == 'jax'  # Not the settings' 'tensorflow'.
  assert worker.plan.role == ClusterRole(
      num_workers=3, worker_index=2, is_chief=False, task_type='worker',
      task_index=2)
  assert worker.plan.cluster == group.member(2)
  assert worker.checkpoint_dir == '/ckpt'
  assert worker.plan.child_env() == {'TF_USE_LEGACY_KERAS': '0',
                                     'KERAS_BACKEND': 'jax'}


def test_the_record_format_has_one_owner():
  """Only data.tfrecords reads records, frames them or inflates gzip; only
  data.statistics knows the split folders' prefix and the statistics
  file's name."""
  assert _calls('tf_record_iterator') == {'generic_trainer.data.tfrecords'}
  assert _calls('TFRecordDataset') <= {'generic_trainer.data.input_pipeline'}
  assert _calls('unpack_from') == {'generic_trainer.data.tfrecords'}
  assert _calls('decompressobj') == {'generic_trainer.data.tfrecords'}
  assert set(_constants('Split-')) == {'generic_trainer.data.statistics'}
  assert set(_constants('FeatureStats.pb')) == {
      'generic_trainer.data.statistics'}


def test_reading_records_follows_its_owner(tmp_path, penguin_artifacts,
                                           monkeypatch):
  """Replacing tfrecords.records changes what the schema inference and
  the export check read."""
  import glob  # pylint: disable=g-import-not-at-top
  from generic_trainer.export_checks import export_validation  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import tfrecords  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import ExportValidationError, InputArtifactError  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  files = glob.glob(os.path.join(penguin_artifacts[0].uri, 'Split-train',
                                 '*'))
  monkeypatch.setattr(tfrecords, 'records', lambda path: iter(()))
  with pytest.raises(InputArtifactError, match='No tf.Example records'):
    local_files.infer_schema(files)
  with pytest.raises(ExportValidationError, match='No eval examples'):
    export_validation._read_serialized_examples(files, 4)  # pylint: disable=protected-access


def test_the_base_model_is_read_once_per_attempt(tmp_path, penguin_csvs,
                                                 monkeypatch):
  """A training that warm-starts from a base model and is gated against it
  loads the base SavedModel once and parses each saved_model.pb once
  (`system.saved_models`), though the warm start, the gate and the
  serving check all read it."""
  from generic_trainer.command import run as command_run  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import saved_models  # pylint: disable=g-import-not-at-top
  module = os.path.join(REPO, 'module_files', 'penguin_spec.py')
  first = command_run.run(command_run.Request(
      module_file=module, train_data=[penguin_csvs[0]],
      output_dir=str(tmp_path / 'first'), started=0.0, steps=5))
  base = os.path.realpath(first.layout.model)
  loads, parses = [], []
  real_load, real_parse = saved_models._load, saved_models._parse  # pylint: disable=protected-access
  monkeypatch.setattr(saved_models, '_load',
                      lambda p: loads.append(os.path.realpath(p)) or
                      real_load(p))
  monkeypatch.setattr(saved_models, '_parse',
                      lambda p: parses.append(os.path.realpath(p)) or
                      real_parse(p))
  command_run.run(command_run.Request(
      module_file=module, train_data=[penguin_csvs[0]],
      output_dir=str(tmp_path / 'second'), started=0.0, steps=5,
      base_model=first.layout.model))
  assert loads.count(base) == 1, loads
  assert parses.count(base) == 1, parses
  assert len(parses) == len(set(parses)), parses


# Each fact of issue 45's list and the one module that holds its literal:
# a second module that spells it fails here.
_LITERAL_OWNERS = {
    'stop-step': 'generic_trainer.plan.cluster',
    'Format-Serving': 'generic_trainer.keys',
    'Format-TFMA': 'generic_trainer.keys',
    'TF_USE_LEGACY_KERAS': 'generic_trainer.system.keras_env',
    'model_run': 'generic_trainer.plan.request',
    '.exporting': 'generic_trainer.notebook.estimator',
    '.staging': 'generic_trainer.publication.staged_export',
}
# The names of `keys` such a fact is read through, and the modules that
# may read it: the Model artifact's layout by `system.paths.model_dirs`,
# the restart default by `plan.settings.restarts`, the parsed rows' budget
# by the kept rows' settings and store.
_NAME_OWNERS = {
    'SERVING_MODEL_DIR': {'generic_trainer.system.paths'},
    'EVAL_MODEL_DIR': {'generic_trainer.system.paths'},
    'DEFAULT_MAX_RESTARTS': {'generic_trainer.plan.settings'},
    'PARSED_ROWS_DEFAULT_BUDGET_GB': {'generic_trainer.data.kept.cache',
                                      'generic_trainer.data.kept.settings'},
}


# How the checks below read the code: every string constant of a module's
# code counts, each literal piece of an f-string included, and a fact
# counts wherever it is contained (`'data.gz'` in `'x/data.gz'`, in a
# message, in a help text). Docstrings and comments do not count: they may
# name a fact to explain it (comments are not in the syntax tree at all; a
# string standing alone as a statement is documentation). Code that needs
# the fact, a message that shows it included, reads it from its owner.
def _code_strings(tree):
  """The string constants of `tree`'s code (not its docstrings)."""
  documentation = {id(n.value) for n in ast.walk(tree)
                   if isinstance(n, ast.Expr) and
                   isinstance(n.value, ast.Constant)}
  return [n.value for n in ast.walk(tree)
          if isinstance(n, ast.Constant) and isinstance(n.value, str) and
          id(n) not in documentation]


def _spelled(fact):
  """{module: count} of the strings in the package's code that contain
  `fact` (see `_code_strings`)."""
  found = {}
  for module, path in MODULES.items():
    with open(path) as f:
      count = sum(fact in value for value in _code_strings(ast.parse(
          f.read())))
    if count:
      found[module] = count
  return found


def _definitions(name):
  """Modules that bind `name` at their top level or in a class body."""
  found = set()
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    bodies = [tree.body] + [n.body for n in ast.walk(tree)
                            if isinstance(n, ast.ClassDef)]
    if any(isinstance(t, ast.Name) and t.id == name
           for body in bodies for node in body
           if isinstance(node, (ast.Assign, ast.AnnAssign))
           for t in getattr(node, 'targets', [getattr(node, 'target', None)])):
      found.add(module)
  return found


_LAYOUT = 'generic_trainer.command.layout'
# Each fact of issues 45 and 54 that a string anywhere may not contain
# outside its owner: the files TFX and TensorFlow name, the split folders'
# prefix, the command's output folder's names (those too short to find in
# a string, `run`, `data`..., and `.resume-`, which `keys`'s
# `.resume-scratch` contains, are checked by their names below), the
# Estimator's export marker, the stop file, the scratch and staging
# folders. ('Format-Serving', 'TF_USE_LEGACY_KERAS' and 'model_run' are
# held to equal literals above: messages name the folder and the variable,
# and `model_run_dir` is another fact.)
_SPELLED_OWNERS = {
    'saved_model.pb': 'generic_trainer.keys',
    'schema.pbtxt': 'generic_trainer.keys',
    'data.gz': 'generic_trainer.keys',
    'Split-': 'generic_trainer.data.statistics',
    'FeatureStats.pb': 'generic_trainer.data.statistics',
    'hyperparameters.json': _LAYOUT,
    '.base-model': _LAYOUT,
    '.publishing': _LAYOUT,
    '.previous-': _LAYOUT,
    '.whole': _LAYOUT,
    'listing-': _LAYOUT,
    '.files.json': _LAYOUT,
    '.generic-trainer-export': 'generic_trainer.notebook.estimator',
    **{fact: _LITERAL_OWNERS[fact]
       for fact in ('stop-step', 'Format-TFMA', '.exporting', '.staging')},
}
# The names such facts are read through, each bound by one module: every
# other module imports it from there.
_NAMED_OWNERS = {
    'SAVED_MODEL_FILE': 'generic_trainer.keys',
    'SCHEMA_FILE': 'generic_trainer.keys',
    'SPLIT_DATA_FILE': 'generic_trainer.keys',
    'DEFAULT_MAX_RESTARTS': 'generic_trainer.keys',
    'STATS_FILE': 'generic_trainer.data.statistics',
    'MODEL': _LAYOUT, 'EVAL_MODEL': _LAYOUT, 'RUN': _LAYOUT, 'DATA': _LAYOUT,
    'WHOLE': _LAYOUT, 'SCHEMA': _LAYOUT, 'HYPERPARAMETERS': _LAYOUT,
    'HYPERPARAMETERS_FILE': _LAYOUT, 'BASE_MODEL': _LAYOUT,
    'PUBLISHING': _LAYOUT, 'RESUME_FOLDER_PREFIX': _LAYOUT, 'MODELS': _LAYOUT,
    'RUN_NAMES': _LAYOUT, 'LEGACY_NAMES': _LAYOUT,
    'EXPORT_MARKER': 'generic_trainer.notebook.estimator',
}


@pytest.mark.parametrize('fact', sorted(_SPELLED_OWNERS))
def test_a_fact_is_spelled_in_one_module_in_any_string(fact):
  """A listed fact is contained in strings of one module's code alone
  (an f-string's pieces and a path's parts included; docstrings and
  comments may name it)."""
  assert set(_spelled(fact)) == {_SPELLED_OWNERS[fact]}


@pytest.mark.parametrize('name', sorted(_NAMED_OWNERS))
def test_a_facts_name_is_bound_by_one_module(name):
  """The name a fact is read through is bound in one module; the others
  import it."""
  assert _definitions(name) == {_NAMED_OWNERS[name]}


def test_the_output_folders_names_are_the_layouts_alone():
  """The mechanism that removes what a run wrote (`system.manifest`)
  spells none of the command's names, and holds no patterns of them:
  `command.layout` gives it its patterns (which contain the split
  folders' prefix through `data.statistics`, the data file's name through
  `keys`)."""
  from generic_trainer.command import layout  # pylint: disable=g-import-not-at-top
  manifest_module = 'generic_trainer.system.manifest'
  with open(MODULES[manifest_module]) as f:
    strings = _code_strings(ast.parse(f.read()))
  names = {layout.MODEL, layout.EVAL_MODEL, layout.RUN, layout.DATA,
           layout.SCHEMA, layout.HYPERPARAMETERS, layout.PUBLISHING,
           layout.BASE_MODEL, layout.RESUME_FOLDER_PREFIX, layout.MODELS}
  assert not [s for s in strings
              if names & set(s.replace('/', ' ').split())], strings
  assert f'{layout.DATA}/Split-train/data.gz' in layout.RUN_NAMES
  assert f'{layout.SCHEMA}/schema.pbtxt' in layout.LEGACY_NAMES


def test_replacing_only_what_we_wrote_is_one_mechanism():
  """The command's published model folders and the Estimator's exports
  are listed and read back by `system.manifest` alone (`write_listing`,
  `listing`); only it records what an entry was (`identity`)."""
  users = {'generic_trainer.command.layout',
           'generic_trainer.notebook.estimator'}
  assert _calls('write_listing', on='manifest') == users
  assert _calls('listing', on='manifest') == users
  assert _calls('identities') <= {'generic_trainer.system.manifest'}
  assert _calls('entries', on='manifest') >= users


def test_the_restart_default_is_stated_by_its_owner(monkeypatch, capsys):
  """The TFJob command's help states the restart default that
  `plan.settings.restarts` gives, not a copy of it."""
  from generic_trainer.kubeflow import tfjob  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan import settings  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(settings, 'DEFAULT_MAX_RESTARTS', 7)
  with pytest.raises(SystemExit):
    tfjob.main(['--help'])
  assert "the step's max_restarts, else 7;" in ' '.join(
      capsys.readouterr().out.split())


@pytest.mark.parametrize('literal', sorted(_LITERAL_OWNERS))
def test_a_facts_literal_is_in_one_module(literal):
  """The stop file's name, the Model artifact's folders, the Keras claim's
  variable and the scratch, notebook, command and staging folders' names
  are each spelled by one module; every other module asks it."""
  assert set(_constants(literal)) == {_LITERAL_OWNERS[literal]}


@pytest.mark.parametrize('name', sorted(_NAME_OWNERS))
def test_a_facts_constant_is_read_by_its_owner(name):
  """The restart default, the parsed rows' default budget and the Model
  artifact's layout are read by their owners alone."""
  assert _importers(name) == _NAME_OWNERS[name]


def test_what_the_data_lacks_is_said_one_way():
  """Every check of names against the data's features (labels, weights,
  feature_keys, a canned spec's columns, a model's inputs, a serving
  signature's inputs) says "which the data lacks" through one function."""
  spelled = set()
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and
           'which the data lacks' in n.value for n in ast.walk(tree)):
      spelled.add(module)
  assert spelled == {'generic_trainer.data.feature_names'}
  assert _calls('lacking', on='feature_names') == {
      'generic_trainer.loop.datasets', 'generic_trainer.loop.spec_checks',
      'generic_trainer.canned.base', 'generic_trainer.data.first_look',
      'generic_trainer.export_checks.export_validation'}


def test_trainspec_completeness_is_refused_once():
  """A TrainSpec missing a member is refused by one function, with one
  error class, at load and in a notebook alike."""
  users = set()
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    if any(isinstance(n, ast.Name) and n.id == 'missing_members' or
           isinstance(n, ast.alias) and n.name == 'missing_members'
           for n in ast.walk(tree)):
      users.add(module)
  assert users == {'generic_trainer.trainspec.spec'}


def test_which_api_the_installed_releases_have_is_decided_in_one_module():
  """Only system.versions decides between the supported releases' APIs:
  no other module reads a library's version (data.kept.key records
  versions in its key, choosing nothing by them), and its answer follows
  the installed Keras (ExportArchive a factory from Keras 3.14)."""
  readers = set()
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if isinstance(node, ast.Attribute) and node.attr in (
          '__version__', 'version_info', 'VERSION'):
        readers.add(module)
      elif isinstance(node, ast.Call) and getattr(
          node.func, 'attr', getattr(node.func, 'id', None)) == 'version':
        readers.add(module)  # importlib.metadata.version(...)
  assert readers <= {'generic_trainer.system.versions',
                     'generic_trainer.data.kept.key'}, readers
  import keras  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import versions  # pylint: disable=g-import-not-at-top
  release = tuple(int(p) for p in keras.__version__.split('.')[:2])
  assert versions.export_archive_is_a_factory() == (release >= (3, 14))
