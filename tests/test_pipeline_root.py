"""Which pipeline root reaches a Kubeflow step, and a step under a root
TFX cannot open stops at once.

The run request is the one the installed kfp SDK builds
(`kfp.Client.create_run_from_pipeline_package` → `run_pipeline` →
`_create_job_config`, kfp 2.5 `kfp/client/client.py`), captured where it
would go to the API server. The root is then resolved as KFP's backend
resolves it: the API server keeps the run's `runtime_config.pipeline_root`
and nothing else of the package's (`backend/src/apiserver/template/
v2_template.go`); the root DAG's driver takes that root, else the
`defaultPipelineRoot` of the namespace's `kfp-launcher` ConfigMap, else
`minio://mlpipeline/v2/artifacts` (`backend/src/v2/driver/driver.go`,
`backend/src/v2/config/env.go`); a step's outputs are
`<root>/<pipeline>/<run id>/<task>/<output>` (`backend/src/v2/metadata/
client.go`, `GenerateOutputURI`). The package's `defaultPipelineRoot`
(which the compile writes and the UI pre-fills its form with) is not
read by the backend.
"""

import os
import subprocess
import sys
import types

import pytest

from conftest import REPO
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.system import paths
from message_parts import assert_four_parts

RUN_ID = 'c0ffee00-0000-4000-8000-000000000001'


def _run_request(package: str, **kwargs):
  """The V2beta1Run body the kfp SDK sends for
  `create_run_from_pipeline_package(package, **kwargs)`, as JSON."""
  kfp = pytest.importorskip('kfp')
  import kfp_server_api  # pylint: disable=g-import-not-at-top
  sent = []
  client = object.__new__(kfp.Client)  # No connection: nothing is served.
  client.create_experiment = lambda name, namespace=None: types.SimpleNamespace(
      experiment_id='e1')
  client._run_api = types.SimpleNamespace(  # pylint: disable=protected-access
      create_run=lambda body: sent.append(body) or types.SimpleNamespace(
          run_id=RUN_ID))
  client._get_url_prefix = lambda: 'http://kfp'  # pylint: disable=protected-access
  client.create_run_from_pipeline_package(package, arguments={}, **kwargs)
  (body,) = sent
  return kfp_server_api.ApiClient().sanitize_for_serialization(body)


def _driver_root(run, launcher_config=None) -> str:
  """The pipeline root KFP's driver gives the run (module docstring)."""
  given = (run.get('runtime_config') or {}).get('pipeline_root')
  return given or (launcher_config or {}).get(
      'defaultPipelineRoot') or paths.KFP_DEFAULT_ROOT


def _output_uri(root, run, task, output):
  name = run['pipeline_spec']['pipelineInfo']['name']
  return f'{root.rstrip("/")}/{name}/{RUN_ID}/{task}/{output}'


def test_the_documented_submit_sends_its_root_and_the_bare_one_does_not(
    compiled_kubeflow):
  """With pipeline_root the run's root is the gs:// one; without it, the
  package's defaultPipelineRoot is not sent and the driver falls back to
  the ConfigMap's root, else minio://."""
  job, package = compiled_kubeflow
  assert job['pipelineSpec']['defaultPipelineRoot'] == 'gs://bucket/root'
  documented = _run_request(package, pipeline_root='gs://bucket/root',
                            service_account='pipeline-runner')
  bare = _run_request(package, service_account='pipeline-runner')
  assert documented['runtime_config']['pipeline_root'] == 'gs://bucket/root'
  assert 'pipeline_root' not in bare['runtime_config']
  assert _driver_root(documented) == 'gs://bucket/root'
  assert _driver_root(bare) == 'minio://mlpipeline/v2/artifacts'
  assert _driver_root(bare, {'defaultPipelineRoot': 'gs://team/root'}) == (
      'gs://team/root')


def test_a_step_under_minio_stops_at_once_naming_the_root_and_the_fix(
    compiled_kubeflow, penguin_artifacts, tmp_path):
  """The trainer step of a run submitted without its root, run through
  TFX's container entrypoint as KFP's launcher runs it, stops before it
  reads or writes anything, naming the root and where to set it."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  job, package = compiled_kubeflow
  run = _run_request(package)
  root = _driver_root(run)
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri = _output_uri(root, run, 'GenericTrainer', 'model')
  model_run.uri = _output_uri(root, run, 'GenericTrainer', 'model_run')
  examples, schema = penguin_artifacts
  invocation = kfp_step.executor_input(
      job, 'GenericTrainer', {'examples': [examples], 'schema': [schema]},
      {'model': [model], 'model_run': [model_run]},
      str(tmp_path / 'executor_output.json'))
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [os.path.join(REPO, 'module_files'), REPO]))
  completed = subprocess.run(
      kfp_step.command_line(job, 'GenericTrainer', invocation,
                            python=sys.executable),
      env=env, cwd=str(tmp_path), capture_output=True, text=True,
      timeout=300, check=False)
  assert completed.returncode != 0
  assert (f"Received: the model output at '{model.uri}' and 1 more"
          in completed.stderr), completed.stderr[-3000:]
  assert "Kubeflow Pipelines' default root minio://mlpipeline/v2/artifacts" in (
      completed.stderr)
  assert not (tmp_path / 'executor_output.json').exists()


@pytest.mark.parametrize('uri,named', [
    ('minio://mlpipeline/v2/artifacts/p/r/GenericTrainer/model',
     "Kubeflow Pipelines' default root"),
    ('s3://bucket/root/p/r/GenericTrainer/model', 'under s3://'),
])
def test_a_root_tensorflow_cannot_open_is_refused(uri, named):
  with pytest.raises(InvalidArgumentError, match='pipeline_root=') as raised:
    paths.check_openable({'the model output': uri,
                          'the examples input': '/data/examples'})
  message = str(raised.value)
  assert named in message
  assert f"Received: the model output at {uri!r}." in message
  assert 'kfp-launcher' in message
  assert_four_parts(message)


def test_roots_tensorflow_opens_pass():
  paths.check_openable({'the model output': 'gs://bucket/root/model',
                        'the examples input': '/data/examples',
                        'a ram file': 'ram://x'})
