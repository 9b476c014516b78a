"""Keras 3 on JAX: what is refused before training, and (slow) what trains.

The refusals are checked here in the test process (TensorFlow's Keras):
they are decided from the settings and the spec before any JAX code runs.
What works on JAX runs in real JAX processes: the command (here),
`testdata/jax_features.py` (one JAX process that trains several specs with
the notebook Estimator), the local pipeline
(`test_penguin_pipeline_e2e.py`) and TFX's Flax module
(`test_tfx_module_compat.py`).
"""

import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, TESTDATA
from conftest import command_env
from conftest import command_env as _env
from generic_trainer.errors import InvalidArgumentError, SpecError

JAX_SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec_jax.py')
SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')
CANNED_MODULE = os.path.join(REPO, 'module_files', 'penguin_canned.py')
CANNED_ON_JAX = (
    "{source} cannot train PenguinSpecies of {path}: it has a head (every "
    "canned spec has one), and a head's export signatures call the model "
    'from TensorFlow, which a JAX model cannot be called from. Expected a '
    'TrainSpec without a head on JAX, or TensorFlow. Received: {source}, '
    "{flag}='{path}'. Train it on TensorFlow (backend='tensorflow', or "
    'leave it unset), or drop the head and give build_loss and '
    'build_metrics.')
_DEVICES_HINT = (
    'for several devices of one machine, call keras.distribution.'
    'set_distribution(keras.distribution.DataParallel()) at the start of '
    'build_model')


def _trainer(**kwargs):
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  return GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                        module_file=SPEC_MODULE, **kwargs)


def test_backend_must_be_tensorflow_or_jax():
  """An unknown backend fails at construction."""
  with pytest.raises(InvalidArgumentError) as info:
    _trainer(backend='torch')
  assert str(info.value) == (
      "'backend' must be one of tensorflow, jax, or unset (the TrainSpec's "
      "own backend, else TensorFlow). Received: backend='torch'. Leave it "
      "out to train on the TrainSpec's backend, or set one of those.")


def test_jax_with_tf_keras_is_refused():
  """JAX needs Keras 3: keras_version='tf_keras' with it is refused."""
  with pytest.raises(InvalidArgumentError) as info:
    _trainer(backend='jax', keras_version='tf_keras')
  assert str(info.value) == (
      "backend='jax' trains with Keras 3 on JAX, but keras_version="
      "'tf_keras' asks for tf.keras 2, which runs on TensorFlow only. "
      "Expected Keras 3 on JAX. Received: backend='jax', "
      "keras_version='tf_keras'. Leave "
      "'keras_version' unset (or keras3) to train on JAX, or train on "
      "TensorFlow (backend='tensorflow').")


def test_jax_with_several_workers_is_refused():
  """Workers sync through tf.distribute, which JAX ignores: refused."""
  with pytest.raises(InvalidArgumentError) as info:
    _trainer(backend='jax', num_workers=2)
  assert str(info.value) == (
      "backend='jax' cannot train with 2 workers: GenericTrainer's workers "
      "train together through tf.distribute's MultiWorkerMirroredStrategy, "
      "which Keras's JAX trainer ignores, so each worker would train alone "
      'on its share of the data, without a word. Expected one process on '
      'JAX. Received: '
      "backend='jax', num_workers=2. Train on JAX in one process "
      f'({_DEVICES_HINT}), or with several workers on TensorFlow '
      "(backend='tensorflow').")


def test_jax_under_a_tf_distribute_strategy_is_refused():
  """strategy='mirrored' would train on one device on JAX: refused."""
  with pytest.raises(InvalidArgumentError) as info:
    _trainer(backend='jax', strategy='mirrored')
  assert str(info.value) == (
      "backend='jax' cannot train under strategy='mirrored': that is a "
      "tf.distribute strategy, which Keras's JAX trainer ignores (the model "
      "would train on one device). Expected no strategy on JAX. Received: "
      "backend='jax', "
      "strategy='mirrored'. Leave strategy unset on JAX "
      f"({_DEVICES_HINT}), or use backend='tensorflow'.")


def test_spec_on_jax_in_a_tf_config_cluster_is_refused_before_training(
    trainer_io, monkeypatch):
  """A TrainSpec whose own backend is JAX, run as the chief of a TF_CONFIG
  cluster: refused once the module is loaded, nothing trained or
  published."""
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'worker': ['localhost:1', 'localhost:2']},
      'task': {'type': 'worker', 'index': 0}}))
  io = trainer_io(module_file=JAX_SPEC_MODULE)
  with pytest.raises(InvalidArgumentError) as info:
    GenericExecutor().Do(*io)
  assert str(info.value) == (
      "PenguinSpecOnJax.backend='jax' cannot train with 2 workers: "
      "GenericTrainer's workers train together through tf.distribute's "
      "MultiWorkerMirroredStrategy, which Keras's JAX trainer ignores, so "
      'each worker would train alone on its share of the data, without a '
      "word. Expected one process on JAX. Received: "
      "PenguinSpecOnJax.backend='jax', a TF_CONFIG cluster of "
      f'2. Train on JAX in one process ({_DEVICES_HINT}), or with several '
      "workers on TensorFlow (backend='tensorflow').")
  assert not os.path.exists(os.path.join(io[1]['model_run'][0].uri,
                                         'history.json'))
  model = io[1]['model'][0].uri  # Refused before anything was staged.
  assert not os.path.exists(model) or not os.listdir(model)


def test_component_and_spec_backends_must_agree(trainer_io):
  """backend='tensorflow' on the component, 'jax' in the spec: refused."""
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  io = trainer_io(module_file=JAX_SPEC_MODULE, backend='tensorflow')
  with pytest.raises(InvalidArgumentError) as info:
    GenericExecutor().Do(*io)
  assert str(info.value) == (
      "The component's backend and the TrainSpec's disagree. Expected one "
      "of them, or the same backend in both. Received: backend='tensorflow', "
      "PenguinSpecOnJax.backend='jax'. Remove backend from the component (or "
      '--backend), or change the TrainSpec.')


def test_spec_backend_must_be_tensorflow_or_jax():
  """A TrainSpec's unknown backend is a SpecError naming the class."""
  from generic_trainer.plan import settings  # pylint: disable=g-import-not-at-top

  class TorchSpec:
    backend = 'torch'

  with pytest.raises(SpecError) as info:
    settings.choose_backend(None, TorchSpec)
  assert str(info.value) == (
      "TrainSpec.backend must be one of ('tensorflow', 'jax') or None "
      '(TensorFlow unless the component says otherwise). Received: '
      "TorchSpec.backend='torch'. Set backend to one of those, or remove "
      'it.')


class _TapeStepSpec:
  """A TensorFlow train step, as Keras's guide writes one."""

  def train_step(self, model, data):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    x, y = data
    with tf.GradientTape() as tape:
      loss = model.compute_loss(x, y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    model.optimizer.apply(grads, model.trainable_variables)
    return {'loss': loss}


class _TwoArgumentStepSpec:

  def train_step(self, model, data):
    return {'loss': 0.0}


class _JaxStepSpec:

  def train_step(self, model, state, data):
    return {'loss': 0.0}, state


_JAX_STEP_TODO = (
    "Keras's JAX backend cannot run it: JAX takes gradients of pure "
    "functions, so its trainer passes the variables' values in and expects "
    'them back, and a tf.GradientTape sees no variable change. Expected '
    'train_step(self, model, state, data) on JAX. Received: '
    '{where} on backend \'jax\'. Write it as `def train_step(self, model, '
    'state, data)` returning (logs, state), with the gradient from '
    'jax.value_and_grad over model.stateless_call(...) (as Keras\'s own JAX '
    "train_step in keras/src/backend/jax/trainer.py), or set "
    "backend='tensorflow'.")


def test_gradient_tape_train_step_is_refused_on_jax():
  """A train_step written with tf.GradientTape cannot train on JAX."""
  from generic_trainer.loop import spec_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError) as info:
    spec_checks.check_train_step(_TapeStepSpec(), 'jax')
  assert str(info.value) == (
      'TrainSpec.train_step is written for TensorFlow (it uses '
      'tf.GradientTape), and ' + _JAX_STEP_TODO.format(
          where='_TapeStepSpec.train_step(model, data)'))


def test_two_argument_train_step_is_refused_on_jax():
  """JAX calls train_step(model, state, data): a (model, data) step is a
  TensorFlow one."""
  from generic_trainer.loop import spec_checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(SpecError) as info:
    spec_checks.check_train_step(_TwoArgumentStepSpec(), 'jax')
  assert str(info.value) == (
      'TrainSpec.train_step is written for TensorFlow (it takes (model, '
      'data)), and ' + _JAX_STEP_TODO.format(
          where='_TwoArgumentStepSpec.train_step(model, data)'))


def test_jax_train_step_is_refused_on_tensorflow():
  """A (model, state, data) step on TensorFlow: refused, saying why."""
  from generic_trainer.loop import spec_checks  # pylint: disable=g-import-not-at-top
  spec_checks.check_train_step(_JaxStepSpec(), 'jax')
  spec_checks.check_train_step(_TapeStepSpec(), 'tensorflow')
  with pytest.raises(SpecError) as info:
    spec_checks.check_train_step(_JaxStepSpec(), 'tensorflow')
  assert str(info.value) == (
      'TrainSpec.train_step takes (model, state, data), the JAX form, but '
      "this training runs on TensorFlow, whose Keras calls "
      'train_step(model, data) and expects the logs dict. Expected '
      'train_step(self, model, data) on TensorFlow. Received: '
      "_JaxStepSpec.train_step(model, state, data) on backend 'tensorflow'. "
      "Set backend='jax', or write `def train_step(self, model, data)` "
      'returning the logs dict.')


@pytest.mark.parametrize('spec, kind', [
    ({'name': 'string'}, 'string Tensor'),
    ({'name': 'sparse'}, 'SparseTensor'),
])
def test_features_jax_cannot_take_are_refused(spec, kind):
  """On JAX, a string or sparse feature is refused before training."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import on_jax  # pylint: disable=g-import-not-at-top
  type_spec = (tf.TensorSpec([None, 1], tf.string) if spec['name'] == 'string'
               else tf.SparseTensorSpec([None, None], tf.float32))
  features = {'bill_length_mm': tf.TensorSpec([None, 1], tf.float32),
              'island': type_spec}
  with pytest.raises(SpecError) as info:
    on_jax.check_features(features)
  assert str(info.value) == (
      'On the JAX backend every feature the model reads must be a dense '
      'tensor of numbers: JAX has no strings and no sparse or ragged arrays. '
      f"Received: 'island', a {kind}. Make it a fixed-length number (in the "
      'schema, or with Transform, e.g. tft.compute_and_apply_vocabulary), '
      "leave it out of feature_keys, or train on TensorFlow "
      "(backend='tensorflow').")


# What trains on JAX: one JAX process (testdata/jax_features.py), with two
# host devices for keras.distribution.
@pytest.fixture(scope='module')
def on_jax(tmp_path_factory, penguin_csvs):
  """The results of testdata/jax_features.py, run once."""
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp('jax_features')
  tf_base = Estimator(PenguinSpec, str(root / 'tf_base'))
  tf_base.train(penguin_csvs[0], steps=4)
  out = root / 'out'
  out.mkdir()
  env = dict(_env(), KERAS_BACKEND='jax',
             XLA_FLAGS='--xla_force_host_platform_device_count=2')
  proc = subprocess.run(
      [sys.executable, os.path.join(TESTDATA, 'jax_features.py'), str(out),
       *penguin_csvs, tf_base.export()], capture_output=True, text=True,
      env=env, cwd=REPO, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  with open(out / 'results.json') as f:
    return json.load(f)


@pytest.mark.slow
def test_handlers_checkpoints_and_run_outputs_on_jax(on_jax):
  """On JAX the handlers run at every hook, and the run writes its
  history, TensorBoard summaries and one checkpoint per epoch."""
  assert on_jax['backend'] == 'jax'
  handled = on_jax['handled']
  assert handled['calls'] == {'on_train_begin': 1, 'on_train_batch_end': 30,
                              'on_epoch_end': 3, 'on_train_end': 1}
  assert handled['run'] == ['checkpoints', 'history.json', 'tensorboard',
                            'train_result.json']
  assert handled['checkpoints'] == [
      'epoch-001.weights.h5', 'epoch-002.weights.h5', 'epoch-003.weights.h5']
  assert handled['tensorboard'] == ['train', 'validation']
  assert handled['record']['steps'] == 30
  assert handled['evaluate']['loss'] == pytest.approx(
      handled['record']['eval']['loss'], rel=1e-5)
  assert handled['predict_shape'][1] == 3


@pytest.mark.slow
def test_training_on_jax_resumes_after_a_failure(on_jax):
  """A JAX training that failed after its second epoch resumes there."""
  assert on_jax['first_failure'] == 'RuntimeError: stopped after epoch 2'
  resumed = on_jax['resumed']
  assert (resumed['resumed_from_epoch'], resumed['resumed_from_step'],
          resumed['epochs'], resumed['steps']) == (2, 10, 4, 20)


@pytest.mark.slow
@pytest.mark.parametrize('base', ['from_tensorflow', 'from_jax'])
def test_warm_start_on_jax(on_jax, base):
  """A JAX model warm-starts, strictly, from a model exported on TensorFlow
  and from one exported on JAX: both name their weights by Keras path."""
  report = on_jax[f'warm_{base}']
  assert len(report['loaded']) == 4 and report['not_loaded'] == {}


@pytest.mark.slow
@pytest.mark.parametrize('case, start', [
    ('no_such_label', "The label 'penguin_kind' (TrainSpec.label_key) is "
     'not a feature of the data.'),
    ('two_units', 'The labels go up to 2 but the model has 2 output unit(s)'),
    ('tape_step', 'TrainSpec.train_step is written for TensorFlow (it uses '
     'tf.GradientTape)'),
])
def test_checks_before_training_on_jax(on_jax, case, start):
  """The checks before training run on JAX too; nothing is trained."""
  refusal = on_jax[case]
  assert refusal['error'] == 'SpecError'
  assert refusal['message'].startswith(start)
  assert not refusal['history']


@pytest.mark.slow
def test_jax_train_step_must_return_logs_and_state(on_jax):
  """A JAX train_step that returns the logs alone fails at its first trace,
  saying what to return."""
  refusal = on_jax['logs_only_step']
  assert refusal['error'] == 'SpecError'
  assert refusal['message'].startswith(
      "TrainSpec.train_step must return (logs, state) on JAX: the logs dict, "
      "e.g. {'loss': loss}, and the new state tuple. Received: dict "
      "{'loss': 0.0}. Return both at the end of train_step.")


@pytest.mark.slow
def test_jax_train_step_trains(on_jax):
  """A train_step(model, state, data) with jax.value_and_grad trains: after
  its 30 steps the loss (the last batch's, as the step returns it) is far
  below an untrained 3-class model's, ln 3 ~ 1.10. Not epoch 3 below epoch
  1: one batch's loss is noisy once the model has learnt (0.44 then 0.47
  seen), and the weights' random start decides how far epoch 1 gets."""
  losses = [epoch['loss'] for epoch in on_jax['jax_step_history']]
  assert len(losses) == 3, losses
  assert losses[-1] < 0.8 * math.log(3), losses
  assert on_jax['jax_step']['steps'] == 30


@pytest.mark.slow
def test_data_parallel_on_two_devices(on_jax):
  """keras.distribution.DataParallel, set in build_model, trains over the
  two host devices and exports a model that passes the checks."""
  assert on_jax['devices'] == ['cpu:0', 'cpu:1']
  # jax 0.10 and later add the axis types: Mesh('batch': 2, axis_types=...).
  assert "Mesh('batch': 2" in on_jax['parallel_kernel_sharding']
  assert on_jax['parallel']['steps'] == 20
  assert os.path.isfile(os.path.join(on_jax['parallel_export'],
                                     'saved_model.pb'))


def _command(*args):
  """`python -m generic_trainer ARGS` in a subprocess."""
  return subprocess.run([sys.executable, '-m', 'generic_trainer', *args],
                        capture_output=True, text=True, env=_env(), cwd=REPO,
                        timeout=600, check=False)


def _serves_through_xla(model_dir, data_dir):
  """The model's serving_default runs jax2tf's XlaCallModule and predicts
  three finite probabilities per eval example."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  serve = tf.saved_model.load(str(model_dir)).signatures['serving_default']
  ops = {node.op for f in serve.graph.as_graph_def().library.function
         for node in f.node_def}
  records = [r.numpy() for r in tf.data.TFRecordDataset(
      str(data_dir / 'Split-eval' / 'data.gz'), 'GZIP').take(5)]
  outputs = serve(examples=tf.constant(records))['outputs'].numpy()
  return ('XlaCallModule' in ops and outputs.shape == (5, 3) and
          bool(np.isfinite(outputs).all()) and
          np.allclose(outputs.sum(axis=1), 1, atol=1e-5))


@pytest.mark.slow
def test_command_trains_the_penguin_spec_with_backend_jax(tmp_path,
                                                          penguin_csvs):
  """`generic-trainer --backend jax`: the command's own process trains on
  JAX (the first-step line says when), validates and publishes."""
  out = tmp_path / 'out'
  proc = _command('--module-file', SPEC_MODULE, '--train-data',
                  penguin_csvs[0], '--output-dir', str(out), '--steps', '20',
                  '--progress', 'lines', '--backend', 'jax')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.count('first training step after ') == 1
  assert ('== Trained TrainSpec PenguinSpec of ' + SPEC_MODULE +
          ': 20 steps in 5 epochs of 4 steps') in proc.stdout
  assert _serves_through_xla(out / 'model', out / 'data')


@pytest.mark.slow
def test_command_trains_a_spec_whose_backend_is_jax(tmp_path, penguin_csvs):
  """A spec whose own backend is 'jax', without --backend: the command's
  process has TensorFlow's Keras, so the executor trains it in a JAX child
  process; the command validates and publishes, and prints its epochs."""
  out = tmp_path / 'out'
  proc = _command('--module-file', JAX_SPEC_MODULE, '--train-data',
                  penguin_csvs[0], '--output-dir', str(out), '--steps', '10',
                  '--progress', 'lines')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert ('== Trained TrainSpec PenguinSpecOnJax of ' + JAX_SPEC_MODULE +
          ': 10 steps in 5 epochs of 2 steps') in proc.stdout
  assert '\nepoch 5 done in ' in proc.stderr
  assert _serves_through_xla(out / 'model', out / 'data')


def test_heads_are_refused_on_jax():
  """A head's own signatures call the model from TensorFlow: a spec with a
  head (every canned spec has one) trains on TensorFlow only, and says so
  before training."""
  from generic_trainer.loop import spec_checks  # pylint: disable=g-import-not-at-top
  from generic_trainer import TrainSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.heads import MultiClassHead  # pylint: disable=g-import-not-at-top

  class PenguinSpecies(TrainSpec):  # As DNNClassifierSpec's, a head.
    label_key = 'species'
    head = MultiClassHead(n_classes=3)

    def build_model(self):
      raise AssertionError('not built: refused before')

    def build_optimizer(self):
      raise AssertionError('not built: refused before')

  spec = PenguinSpecies()
  spec_checks.check_heads(spec, 'tensorflow')
  with pytest.raises(SpecError) as info:
    spec_checks.check_heads(spec, 'jax')
  assert str(info.value) == (
      'A TrainSpec with a head cannot train on JAX yet: the signatures a '
      'head exports (predict, classification, regression) call the model '
      'from TensorFlow, which a JAX model cannot be called from without '
      'jax2tf. Expected a TrainSpec without a head on JAX. Received: '
      "PenguinSpecies with heads for ['species'] on backend "
      "'jax'. Set backend='tensorflow' (or leave it unset), or drop the head "
      'and give build_loss and build_metrics.')


class _JaxStepMentioningTheTapeSpec:

  def train_step(self, model, state, data):
    """Not tf.GradientTape: jax.value_and_grad (the tape is TensorFlow's)."""
    return {'loss': 0.0}, state  # No GradientTape() here either.


def test_a_jax_step_that_only_names_the_tape_is_accepted():
  """Only a call of GradientTape makes a step TensorFlow's: a comment or a
  docstring that names it does not."""
  from generic_trainer.loop import spec_checks  # pylint: disable=g-import-not-at-top
  spec_checks.check_train_step(_JaxStepMentioningTheTapeSpec(), 'jax')


def test_spec_on_jax_trained_where_keras_is_tensorflow_is_refused(
    tmp_path, penguin_csvs, monkeypatch):
  """A TrainSpec whose backend is 'jax', trained by the notebook Estimator
  (or TFX's own Trainer) in a TensorFlow process, is refused before
  training instead of training on TensorFlow without a word."""
  from generic_trainer import Estimator  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top

  class PenguinOnJax(PenguinSpec):
    backend = 'jax'

  monkeypatch.delenv('KERAS_BACKEND', raising=False)
  with pytest.raises(SpecError) as info:
    Estimator(PenguinOnJax, str(tmp_path / 'out')).train(penguin_csvs[0],
                                                        steps=2)
  assert str(info.value) == (
      "PenguinOnJax.backend is 'jax', but Keras in this process computes "
      "with 'tensorflow': Keras reads its backend once, when it is first "
      'imported. Expected Keras on \'jax\'. Received: KERAS_BACKEND=None. '
      'Train it with GenericTrainer '
      'or the generic-trainer command, which start a jax process for it, or '
      'set KERAS_BACKEND=jax before anything imports keras (in a notebook, '
      'restart the kernel first).')
  assert not (tmp_path / 'out' / 'model').exists()


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
