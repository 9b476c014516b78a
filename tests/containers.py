"""The project image, built once per test session, and a KFP launcher of
ours that runs compiled steps in it (tests/test_containers.py).

Why our own and not KFP's: open-source KFP's driver and launcher run only
in a cluster (no Kubernetes API server can run here), and the pinned kfp is
2.5.0 (TFX 1.16's), whose `kfp.local` runs one component at a time (whole
pipelines came in kfp 2.7) through the `docker` client. So this
launcher does, for a container step, what KFP's do, file by file (KFP
2.17's source), and refuses what they refuse:
  - the spec: schema 2.1.0 only (`backend/src/apiserver/template/
    v2_template.go`), no resolver step (`backend/src/v2/compiler/
    argocompiler/dag.go`);
  - the ExecutorInput as the driver builds it (`backend/src/v2/driver/
    driver.go` in KFP 2.4 and 2.5, `resolve.go` from 2.14, through
    `kfp_step.executor_input`): `parameterValues` resolved from 2.1
    constants only (a 2.0 `constantValue` refused with the driver's
    reason), numbers as doubles, types checked, a
    non-optional parameter without a value refused; each input artifact
    from its producer's outputs, a missing one refused; artifacts with
    their metadata as a Struct;
  - the pipeline root and the artifact URIs as KFP's local runner lays
    them out (`sdk/python/kfp/local/executor_input_utils.py`: a local
    root, each step's outputs under it; `docker_task_handler.py`: the root
    mounted at the same path): no object store runs here, so the cluster
    launcher's gs:// URIs (`launcher_v2.go`, `LocalPathForURI`) are not
    exercised, and the artifacts stay local;
  - `{{$}}` replaced in the step's own arguments, the step's own image and
    command, no network;
  - every input artifact downloaded into the step's container before its
    command runs, as KFP's launcher does (`launcher_downloads`), though
    the step's TFX code opens the URIs and never reads the copies: the
    pipeline root stands for the bucket `gs://pipeline-root`, and the
    copies are mounted at `/gcs`, read-only, where the launcher puts them;
  - the executor-output file read back as `ExecutorOutput` JSON, unknown
    fields refused (Go's protojson), each artifact's URI and metadata
    merged into the output (`launcher_v2.go`, `mergeRuntimeArtifacts`) and
    handed to the steps that consume them.
"""

import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Optional

import pytest

from conftest import REPO

ENGINE = os.path.join(REPO, 'scripts', 'container.sh')
IMAGE = os.environ.get('GT_TEST_IMAGE', 'localhost/tfx-generic-trainer:test')
BASE_LOCAL = 'localhost/tfx-generic-trainer-base:bookworm-py3.10'
PULLED_BASE = 'python:3.10-slim'


def engine(*args, timeout=None, check=True, **kwargs):
  return subprocess.run([ENGINE, *args], check=check, timeout=timeout,
                        capture_output=True, text=True, **kwargs)


def build_image() -> str:
  """Installs podman when no engine is here, makes a base (pulled, else
  from Debian's packages) and builds the image; skips, saying why, where no
  engine can be installed. Returns the image's name."""
  try:
    engine('--install', timeout=900)
  except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
    pytest.skip('no container engine here and none could be installed '
                f'(scripts/container.sh --install): {getattr(e, "stderr", e)}')
  base = os.environ.get('GT_TEST_IMAGE_BASE')
  if not base:
    try:
      engine('pull', '-q', PULLED_BASE, timeout=60)
      base = PULLED_BASE
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
      subprocess.run([os.path.join(REPO, 'scripts', 'base_image.sh'),
                      BASE_LOCAL], check=True, timeout=900,
                     capture_output=True)
      base = BASE_LOCAL
  result = subprocess.run(
      ['make', '-C', REPO, 'image', f'BASE={base}', f'IMAGE={IMAGE}'],
      capture_output=True, text=True, timeout=1800, check=False)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  return IMAGE


def module_in(root: str, *files: str) -> str:
  """The first of `files` (paths of this checkout's, e.g.
  'tests/testdata/slow_worker_spec.py' and the 'module_files/...' it
  imports), copied with their relative paths into `root`, which every
  step's container mounts at its own path: the checkout itself may sit
  in a folder the container's user cannot enter (a clone under /root,
  0700), as a pipeline's modules sit where its steps can read them.
  Returns the first one's path in `root`."""
  copies = []
  for name in files:
    copy = os.path.join(root, 'modules', name)
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    shutil.copyfile(os.path.join(REPO, name), copy)
    copies.append(copy)
  return copies[0]


def run_step(job: Dict[str, Any], task: str, image: str, root: str,
             inputs: Dict[str, List[Dict[str, Any]]],
             env: Optional[Dict[str, str]] = None,
             extra: Optional[List[str]] = None,
             outputs: Optional[Dict[str, List[Dict[str, Any]]]] = None,
             detach_name: Optional[str] = None,
             parameters: Optional[Dict[str, Optional[str]]] = None,
             launcher_mount_points: bool = False):
  """Runs one compiled step as KFP's driver and launcher do; returns its
  output artifacts as the executor-output file gives them (key -> runtime
  artifacts), or the Popen of a named container when `detach_name`.

  `parameters` recompiles the step's constants first (a str sets one, None
  removes it), as compiling the component with those arguments would.
  `extra` replaces the container flags (default: no network).
  `launcher_mount_points` first makes /gcs, /minio and /s3 in the
  container, as KFP's launcher before 2.3 did at start (`os.MkdirAll`),
  as the step's own user.
  """
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  if parameters:
    job = _with_constants(job, task, parameters)
  kfp_step.check_schema(job)
  component = kfp_step._component(job, task)  # pylint: disable=protected-access
  declared_in = component.get('inputDefinitions', {}).get('artifacts', {})
  declared_out = component.get('outputDefinitions', {}).get('artifacts', {})
  step_dir = os.path.join(root, 'steps', task)
  invocation = kfp_step.executor_input(
      job, task, {}, {}, os.path.join(step_dir, 'executor_output.json'))
  missing = sorted(key for key, spec in declared_in.items()
                   if not spec.get('isOptional') and key not in inputs)
  assert not missing, (
      f'failed to resolve inputs: task {task}: non-optional input artifacts '
      f'{missing} have no producer (KFP\'s driver: driver.go, resolve.go '
      'from 2.14)')
  os.makedirs(step_dir, exist_ok=True)
  invocation['inputs']['artifacts'] = {
      key: {'artifacts': [dict(a, type=declared_in[key]['artifactType'])
                          for a in artifacts]}
      for key, artifacts in inputs.items()}
  outputs = outputs or {
      key: [{'name': f'{task}-{key}', 'uri': os.path.join(root, task, key),
             'metadata': {}}] for key in declared_out}
  invocation['outputs']['artifacts'] = {
      key: {'artifacts': [dict(a, type=declared_out[key]['artifactType'])
                          for a in artifacts]}
      for key, artifacts in outputs.items()}
  # What the driver hands the launcher parses as KFP's ExecutorInput.
  json_format.ParseDict(invocation, _pipeline_spec_pb2().ExecutorInput())
  command = kfp_step.command_line(job, task, invocation)
  container = kfp_step.container(job, task)
  placeholders = [arg for arg in command if '{{$' in arg]
  assert not placeholders, f'placeholders the launcher fills: {placeholders}'
  downloads = os.path.join(step_dir, 'launcher')
  shutil.rmtree(downloads, ignore_errors=True)
  os.makedirs(os.path.join(downloads, 'gcs'))  # Mounted, even when empty.
  launcher_downloads(_as_bucket_uris(invocation, root),
                     {BUCKET: root}, downloads)
  # The steps' users (any uid, as a restricted pod's) share the volume as
  # users share /tmp: every folder writable by all, with the sticky bit, so
  # that none may rename what another made (the executor refuses an output
  # folder below a folder others may rename in: trust.check_ancestors).
  for folder, _, _ in os.walk(root):
    os.chmod(folder, 0o1777)
  if launcher_mount_points:
    command = ['sh', '-c', 'mkdir -p /gcs /minio /s3 && exec "$@"', 'sh',
               *command]
  args = ['run', '--rm', '-v', f'{root}:{root}', '-v',
          f'{os.path.join(downloads, "gcs")}:/gcs:ro',
          '--entrypoint', command[0]]
  for item in container.get('env', []):
    args += ['-e', f'{item["name"]}={item["value"]}']
  for key, value in (env or {}).items():
    args += ['-e', f'{key}={value}']
  args += list(extra or ['--network', 'none'])
  if detach_name:
    args += ['--name', detach_name]
  args += [container['image'] if image is None else image, *command[1:]]
  if detach_name:
    return subprocess.Popen([ENGINE, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
  result = subprocess.run([ENGINE, *args], capture_output=True, text=True,
                          timeout=900, check=False)
  assert result.returncode == 0, (
      f'step {task} failed:\n{result.stdout[-3000:]}{result.stderr[-6000:]}')
  return read_outputs(invocation)


# The bucket the pipeline root stands for in `launcher_downloads`.
BUCKET = 'gs://pipeline-root'
# Where KFP's launcher puts a downloaded artifact, by the URI's scheme
# (`LocalPathForURI`, launcher_v2.go; the same in 2.4, 2.5 and 2.14-2.17).
_LOCAL_PATH_FOR = (('gs://', '/gcs/'), ('minio://', '/minio/'),
                   ('s3://', '/s3/'))


def launcher_downloads(invocation: Dict[str, Any], buckets: Dict[str, str],
                       into: str, release: str = '2.17'
                       ) -> List[Dict[str, Any]]:
  """Downloads the step's input artifacts as KFP's launcher does before
  the step's command runs (kubeflow/pipelines,
  backend/src/v2/component/launcher_v2.go, `downloadArtifacts`): in 2.4
  and 2.5 the first artifact of each input (`artifactList.Artifacts[0]`),
  from 2.14 every artifact of each; each whole, to
  `LocalPathForURI(uri)` (gs://B/K -> /gcs/B/K, minio:// -> /minio/, s3://
  -> /s3/), a URI of another scheme skipped with the launcher's warning.
  `buckets` maps a bucket URI prefix ('gs://pipeline-root') to the local
  folder that stands for it; `into` stands for the container's root.
  Returns each download: {'input', 'uri', 'path' (in the container),
  'bytes'}."""
  done = []
  for key, listed in sorted(invocation['inputs'].get('artifacts',
                                                     {}).items()):
    artifacts = listed.get('artifacts') or []
    if release in ('2.4', '2.5'):
      artifacts = artifacts[:1]
    for artifact in artifacts:
      uri = artifact['uri']
      scheme = next(((p, l) for p, l in _LOCAL_PATH_FOR
                     if uri.startswith(p)), None)
      if scheme is None:
        print(f'Input Artifact "{key}" does not have a recognized storage '
              f'URI "{uri}". Skipping downloading to local path.')
        continue
      local = scheme[1] + uri[len(scheme[0]):]
      prefix = next(b for b in buckets if uri.startswith(b + '/'))
      source = os.path.join(buckets[prefix], uri[len(prefix) + 1:])
      target = os.path.join(into, local.lstrip('/'))
      if os.path.isdir(source):
        shutil.copytree(source, target, dirs_exist_ok=True)  # Overwrites.
      else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(source, target)
      size = sum(os.path.getsize(os.path.join(d, f))
                 for d, _, files in os.walk(target) for f in files
                 ) if os.path.isdir(target) else os.path.getsize(target)
      done.append({'input': key, 'uri': uri, 'path': local, 'bytes': size})
  return done


def _as_bucket_uris(invocation: Dict[str, Any], root: str) -> Dict[str, Any]:
  """The ExecutorInput with the input URIs under `root` written as URIs
  of `BUCKET` (what they are on a cluster whose root is a bucket)."""
  copied = json.loads(json.dumps(invocation))
  for listed in copied['inputs'].get('artifacts', {}).values():
    for artifact in listed.get('artifacts') or []:
      uri = artifact['uri']
      if os.path.isabs(uri) and os.path.commonpath([uri, root]) == root:
        artifact['uri'] = BUCKET + '/' + os.path.relpath(uri, root)
  return copied


def _pipeline_spec_pb2():
  from kfp.pipeline_spec import pipeline_spec_pb2  # pylint: disable=g-import-not-at-top
  return pipeline_spec_pb2


def _with_constants(job, task, parameters):
  """A copy of `job` whose step `task` was compiled with these constants."""
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  job = json.loads(json.dumps(job))
  spec = job.get('pipelineSpec', job)
  given = spec['root']['dag']['tasks'][task]['inputs'].setdefault(
      'parameters', {})
  declared = kfp_step._component(job, task).setdefault(  # pylint: disable=protected-access
      'inputDefinitions', {}).setdefault('parameters', {})
  for key, value in parameters.items():
    if value is None:
      given.pop(key, None)
      declared.pop(key, None)
    else:
      given[key] = {'runtimeValue': {'constant': value}}
      declared.setdefault(key, {'parameterType': 'STRING'})
  return job


def read_outputs(invocation) -> Dict[str, List[Dict[str, Any]]]:
  """The output artifacts, updated from the executor-output file as the
  launcher reads it (URI and metadata of each, by key and position)."""
  outputs = {key: [dict(a) for a in value['artifacts']]
             for key, value in invocation['outputs']['artifacts'].items()}
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  path = invocation['outputs']['outputFile']
  if os.path.exists(path):
    with open(path) as f:
      text = f.read()
    # Go's protojson.Unmarshal: unknown fields are an error.
    json_format.Parse(text, _pipeline_spec_pb2().ExecutorOutput())
    written = json.loads(text).get('artifacts', {})
    for key, value in written.items():
      for artifact, update in zip(outputs.get(key, []),
                                  value.get('artifacts', [])):
        artifact['uri'] = update.get('uri', artifact['uri'])
        artifact['metadata'] = {**artifact.get('metadata', {}),
                                **update.get('metadata', {})}
  for artifacts in outputs.values():
    for artifact in artifacts:
      artifact.pop('type', None)
  return outputs


def order(job: Dict[str, Any]) -> List[str]:
  """The steps in an order that runs each after those it depends on."""
  spec = job['pipelineSpec']
  tasks = spec['root']['dag']['tasks']
  resolvers = [name for name, task in tasks.items()
               if 'resolver' in spec['deploymentSpec']['executors'].get(
                   spec['components'][task['componentRef']['name']][
                       'executorLabel'], {})]
  assert not resolvers, f'resolver executors not implemented: {resolvers}'
  done: List[str] = []
  while len(done) < len(tasks):
    for name, task in sorted(tasks.items()):
      if name not in done and all(d in done for d in
                                  task.get('dependentTasks', [])):
        done.append(name)
  return done


def inputs_of(job, task, produced):
  """The step's input artifacts from the producers' outputs; one that no
  producer wrote is refused, as the driver refuses it."""
  spec = job['pipelineSpec']['root']['dag']['tasks'][task]
  result = {}
  for key, ref in spec.get('inputs', {}).get('artifacts', {}).items():
    output = ref.get('taskOutputArtifact')
    assert output, (f'failed to resolve input artifact {key}: artifact spec '
                    f'of type {sorted(ref)} not implemented yet (driver.go; '
                    'resolve.go from 2.14)')
    artifacts = produced.get(output['producerTask'], {}).get(
        output['outputArtifactKey'])
    assert artifacts, (f'failed to resolve input artifact {key}: producer '
                       f'task {output["producerTask"]} has no output '
                       f'{output["outputArtifactKey"]}')
    result[key] = artifacts
  return result


def clean(root: str):
  shutil.rmtree(root, ignore_errors=True)
