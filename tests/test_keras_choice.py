"""Which Keras a training runs on, in every process of it, when the
component does not say (`keras_version=None`): the one the pipeline's
process has, whatever TFX imported first (`plan.TrainingPlan.child_env`).

TensorFlow Transform sets TF_USE_LEGACY_KERAS=1 on import when it is
unset (tensorflow_transform/keras_lib.py, in TFX 1.16 and 1.21, reached
by `import tfx.v1`); a process whose tf.keras already meant Keras 3 then
holds a variable that says tf.keras 2, which its children inherit.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, command_env

JAX_SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec_jax.py')


@pytest.mark.slow
def test_a_child_trains_on_the_keras_of_the_pipelines_process(
    tmp_path, trainer_io):
  """tf.keras means Keras 3 first, then `import tfx.v1` sets
  TF_USE_LEGACY_KERAS=1: a JAX TrainSpec's child process (the pipeline's
  Keras computes with TensorFlow) trains on Keras 3 as the process does,
  and its train_result.json says so, not tf_keras from the inherited
  variable."""
  io = trainer_io(module_file=JAX_SPEC_MODULE, train_steps=5)
  inputs, outputs, properties = io
  (tmp_path / 'io.json').write_text(json.dumps({
      'examples': [inputs['examples'][0].uri,
                   inputs['examples'][0].split_names],
      'schema': inputs['schema'][0].uri, 'model': outputs['model'][0].uri,
      'model_run': outputs['model_run'][0].uri, 'properties': properties}))
  script = tmp_path / 'pipeline_process.py'
  script.write_text(textwrap.dedent('''
      import json, os, sys
      os.environ.pop('TF_USE_LEGACY_KERAS', None)
      import tensorflow as tf
      tf.keras.layers  # tf.keras is Keras 3 from here on.
      from tfx import v1 as tfx  # TensorFlow Transform sets the variable.
      from generic_trainer.component.executor import GenericExecutor
      from generic_trainer.system import keras_env
      here = (os.environ.get('TF_USE_LEGACY_KERAS'),
              keras_env.resolved_tf_keras())
      from tfx.types import standard_artifacts
      with open(sys.argv[1]) as f:
        io = json.load(f)
      examples = standard_artifacts.Examples()
      examples.uri, examples.split_names = io['examples']
      schema = standard_artifacts.Schema()
      schema.uri = io['schema']
      model = standard_artifacts.Model()
      model.uri = io['model']
      model_run = standard_artifacts.ModelRun()
      model_run.uri = io['model_run']
      GenericExecutor().Do({'examples': [examples], 'schema': [schema]},
                           {'model': [model], 'model_run': [model_run]},
                           io['properties'])
      print(json.dumps(here))
      '''))
  env = command_env()
  env.pop('KERAS_BACKEND', None)
  env.pop('TF_USE_LEGACY_KERAS', None)
  proc = subprocess.run([sys.executable, str(script),
                         str(tmp_path / 'io.json')], capture_output=True,
                        text=True, cwd=str(tmp_path), env=env, timeout=600,
                        check=False)
  assert proc.returncode == 0, proc.stderr[-4000:]
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == ['1', 'keras3']
  with open(os.path.join(io[1]['model_run'][0].uri,
                         'train_result.json')) as f:
    trained_on = json.load(f)['keras']
  assert trained_on.startswith('Keras 3.') and trained_on.endswith(
      '(backend jax)'), trained_on
