"""One step of a compiled Kubeflow Pipelines (v2) pipeline, as a cluster runs it.

`KubeflowV2DagRunner` compiles each TFX component into a container (image,
command `python -m tfx...kubeflow_v2_run_executor`, arguments naming the
executor class and `{{$}}`) and the constant parameters of its task. At run
time the KFP launcher replaces `{{$}}` with the ExecutorInput JSON: the
input and output artifacts (URI, type, properties), the parameters, and the
file to write the executor's output metadata to.

This module builds that ExecutorInput and the resulting command line from
the compiled pipeline, for artifacts you name. It is what the TFJob
rendering (`tfjob.py`) puts in each replica, and what the tests run to play
the cluster's part.
"""

import json
from typing import Any, Dict, List, Optional

import yaml
from google.protobuf import json_format

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.system.lazy import kubeflow_v2_entrypoint_utils

TRAINER_EXECUTOR = 'generic_trainer.component.executor.GenericExecutor'
EXECUTOR_INPUT_PLACEHOLDER = '{{$}}'


def load(path: str) -> Dict[str, Any]:
  """Reads a compiled PipelineJob (JSON, or the YAML newer runners write)."""
  with open(path) as f:
    return yaml.safe_load(f)


def _spec(job: Dict[str, Any]) -> Dict[str, Any]:
  return job.get('pipelineSpec', job)


def find_task(job: Dict[str, Any],
              executor_class: str = TRAINER_EXECUTOR) -> str:
  """The name of the task whose container runs `executor_class`."""
  spec = _spec(job)
  found = [name for name in spec['root']['dag']['tasks']
           if executor_class in container(job, name).get('args', [])]
  if len(found) != 1:
    raise InvalidArgumentError(
        f'The compiled pipeline must have exactly one step running '
        f'{executor_class}. Received: steps {found or "none"} (tasks: '
        f"{sorted(spec['root']['dag']['tasks'])}). Compile a pipeline with one "
        'GenericTrainer.')
  return found[0]


def _component(job: Dict[str, Any], task: str) -> Dict[str, Any]:
  spec = _spec(job)
  if task not in spec['root']['dag']['tasks']:
    raise InvalidArgumentError(
        f'The compiled pipeline has no step {task!r}. Expected one of its '
        f"steps: {sorted(spec['root']['dag']['tasks'])}. Received: {task!r}. "
        'Pass the name of a step of the pipeline.')
  ref = spec['root']['dag']['tasks'][task]['componentRef']['name']
  return spec['components'][ref]


def container(job: Dict[str, Any], task: str) -> Dict[str, Any]:
  """The step's container spec: `image`, `command`, `args`; {} for a step
  the KFP backend runs itself (a resolver, an importer)."""
  label = _component(job, task)['executorLabel']
  return _spec(job)['deploymentSpec']['executors'][label].get('container', {})


def parameters(job: Dict[str, Any], task: str) -> Dict[str, Any]:
  """The step's compiled constant parameters, as plain Python values."""
  result = {}
  for key, value in _spec(job)['root']['dag']['tasks'][task]['inputs'].get(
      'parameters', {}).items():
    runtime = value.get('runtimeValue', {})
    if 'constant' in runtime:  # Pipeline spec 2.1.
      result[key] = runtime['constant']
    elif 'constantValue' in runtime:  # Pipeline spec 2.0.
      (kind, raw), = runtime['constantValue'].items()
      result[key] = int(raw) if kind == 'intValue' else (
          float(raw) if kind == 'doubleValue' else raw)
  return result


def executor_input(job: Dict[str, Any], task: str,
                   inputs: Dict[str, List[Any]],
                   outputs: Dict[str, List[Any]],
                   output_file: str) -> Dict[str, Any]:
  """The ExecutorInput the KFP launcher passes to `task` for these artifacts.

  Args:
    job: The compiled PipelineJob.
    task: The step, e.g. 'GenericTrainer'.
    inputs: Input key -> [TFX artifact]; keys the step declares.
    outputs: Output key -> [TFX artifact] (URIs where outputs go).
    output_file: Where the entrypoint writes the executor's output metadata.
  """
  component = _component(job, task)

  def artifacts(declared, given, direction):
    result = {}
    for key, items in given.items():
      if key not in declared:
        raise InvalidArgumentError(
            f'Step {task!r} has no {direction} artifact {key!r}. Expected '
            f'one of its {direction}s: {sorted(declared)}. Received: '
            f'{key!r}. Pass the artifacts by the names the step declares.')
      runtime = []
      for artifact in items:
        value = json_format.MessageToDict(
            kubeflow_v2_entrypoint_utils.to_runtime_artifact(artifact, {}))
        value['type'] = declared[key]['artifactType']
        runtime.append(value)
      result[key] = {'artifacts': runtime}
    return result

  definitions = component.get('inputDefinitions', {})
  values = parameters(job, task)
  result = {
      'inputs': {
          'artifacts': artifacts(definitions.get('artifacts', {}), inputs,
                                 'input'),
      },
      'outputs': {
          'artifacts': artifacts(
              component.get('outputDefinitions', {}).get('artifacts', {}),
              outputs, 'output'),
          'outputFile': output_file,
      },
  }
  if _spec(job).get('schemaVersion', '2.0.0') >= '2.1.0':
    result['inputs']['parameterValues'] = values
  else:
    result['inputs']['parameters'] = {
        key: ({'intValue': str(v)} if isinstance(v, int) else
              {'doubleValue': v} if isinstance(v, float) else
              {'stringValue': v}) for key, v in values.items()}
  return result


def command_line(job: Dict[str, Any], task: str,
                 invocation: Dict[str, Any],
                 python: Optional[str] = None) -> List[str]:
  """The step's command and arguments with `{{$}}` filled in.

  `python` replaces a leading 'python' (e.g. with `sys.executable`) to run
  the step outside its image.
  """
  spec = container(job, task)
  command = list(spec.get('command', []))
  if python and command and command[0] == 'python':
    command[0] = python
  serialized = json.dumps(invocation)
  return command + [serialized if arg == EXECUTOR_INPUT_PLACEHOLDER else arg
                    for arg in spec.get('args', [])]
