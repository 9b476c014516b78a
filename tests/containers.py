"""The project image, built once per test session, and a small KFP launcher
that runs compiled steps in it (tests/test_containers.py).

Why our own launcher and not kfp.local's DockerRunner: the pinned kfp is
2.5.0 (TFX 1.16's), which has no `kfp.local` (it came in kfp 2.6), and
DockerRunner would need the `docker` Python client as well. This launcher
does what KFP's v2 launcher does for a container step and nothing more: it
writes the step's ExecutorInput (artifacts with their URIs and metadata,
parameters, the executor-output file), puts it in place of `{{$}}` in the
step's own arguments, runs the step's image and command with the artifact
folder mounted at the same path and no network, then reads the
executor-output file back (the artifacts' URIs and metadata the executor
set) and hands those artifacts to the steps that consume them.
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


def run_step(job: Dict[str, Any], task: str, image: str, root: str,
             inputs: Dict[str, List[Dict[str, Any]]],
             env: Optional[Dict[str, str]] = None,
             extra: Optional[List[str]] = None,
             outputs: Optional[Dict[str, List[Dict[str, Any]]]] = None,
             detach_name: Optional[str] = None,
             parameters: Optional[Dict[str, Optional[str]]] = None):
  """Runs one compiled step as KFP's launcher does; returns its output
  artifacts as the executor-output file gives them (key -> runtime
  artifacts), or the Popen of a named container when `detach_name`."""
  from generic_trainer.kubeflow import kfp_step  # pylint: disable=g-import-not-at-top
  component = kfp_step._component(job, task)  # pylint: disable=protected-access
  declared_in = component.get('inputDefinitions', {}).get('artifacts', {})
  declared_out = component.get('outputDefinitions', {}).get('artifacts', {})
  step_dir = os.path.join(root, 'steps', task)
  os.makedirs(step_dir, exist_ok=True)
  invocation = kfp_step.executor_input(
      job, task, {}, {}, os.path.join(step_dir, 'executor_output.json'))
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
  for key, value in (parameters or {}).items():
    for field in ('parameters', 'parameterValues'):
      values = invocation['inputs'].get(field)
      if values is None:
        continue
      values.pop(key, None)
      if value is not None:
        values[key] = ({'stringValue': value} if field == 'parameters'
                       else value)
  command = kfp_step.command_line(job, task, invocation)
  container = kfp_step.container(job, task)
  os.chmod(root, 0o777)
  for folder, _, _ in os.walk(root):
    os.chmod(folder, 0o777)
  args = ['run', '--rm', '-v', f'{root}:{root}', '--entrypoint', command[0]]
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


def read_outputs(invocation) -> Dict[str, List[Dict[str, Any]]]:
  """The output artifacts, updated from the executor-output file as the
  launcher reads it (URI and metadata of each, by key and position)."""
  outputs = {key: [dict(a) for a in value['artifacts']]
             for key, value in invocation['outputs']['artifacts'].items()}
  path = invocation['outputs']['outputFile']
  if os.path.exists(path):
    with open(path) as f:
      written = json.load(f).get('artifacts', {})
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
  tasks = job['pipelineSpec']['root']['dag']['tasks']
  done: List[str] = []
  while len(done) < len(tasks):
    for name, task in sorted(tasks.items()):
      if name not in done and all(d in done for d in
                                  task.get('dependentTasks', [])):
        done.append(name)
  return done


def inputs_of(job, task, produced):
  """The step's input artifacts from the producers' outputs."""
  spec = job['pipelineSpec']['root']['dag']['tasks'][task]
  return {key: produced[ref['taskOutputArtifact']['producerTask']][
      ref['taskOutputArtifact']['outputArtifactKey']]
          for key, ref in spec.get('inputs', {}).get('artifacts', {}).items()}


def clean(root: str):
  shutil.rmtree(root, ignore_errors=True)
