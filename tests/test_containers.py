"""The compiled penguin pipeline, every step in the project image as KFP's
launcher runs it (tests/containers.py): the step's own image, command and
arguments, `{{$}}` replaced by the ExecutorInput, the artifacts on one
folder mounted at the same path in every container, no network, each
step's outputs read back from its executor-output file and handed on.

The first test in a session builds the image (`make image`; podman is
installed where no engine is, the base made from Debian's packages where
none can be pulled); they skip, saying why, only where no container engine
can be installed.
"""

import os

import pytest

import containers

pytestmark = pytest.mark.slow


@pytest.fixture(scope='session')
def image():
  return containers.build_image()


def test_compiled_penguin_pipeline_runs_step_by_step_in_containers(
    image, tmp_path_factory):
  """ExampleGen to Pusher in containers: the model is blessed and pushed."""
  from pipelines import penguin_pipeline_kubeflow  # pylint: disable=g-import-not-at-top
  root = str(tmp_path_factory.mktemp('kfp'))
  job = penguin_pipeline_kubeflow.compile_pipeline(
      os.path.join(root, 'penguin.json'), image,
      pipeline_root=os.path.join(root, 'root'),
      serving_model_dir=os.path.join(root, 'serving'), baseline=False,
      train_steps=100, eval_steps=5,
      trainer_resources={'cpu': 1, 'memory': '2G'})
  assert containers.order(job) == [
      'CsvExampleGen', 'StatisticsGen', 'SchemaGen', 'GenericTrainer',
      'Evaluator', 'Pusher']
  produced = {}
  for task in containers.order(job):
    produced[task] = containers.run_step(
        job, task, None, root, containers.inputs_of(job, task, produced))
  (blessing,) = produced['Evaluator']['blessing']
  assert os.path.exists(os.path.join(blessing['uri'], 'BLESSED'))
  assert blessing['metadata'].get('blessed') in (1, 1.0, '1')
  (pushed,) = produced['Pusher']['pushed_model']
  assert pushed['metadata'].get('pushed') in (1, 1.0, '1')
  versions = os.listdir(os.path.join(root, 'serving'))
  assert len(versions) == 1
  assert os.path.exists(os.path.join(root, 'serving', versions[0],
                                     'saved_model.pb'))
  (model,) = produced['GenericTrainer']['model']
  assert os.listdir(model['uri']) == ['Format-Serving']
