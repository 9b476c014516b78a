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
SCHEMA_VERSION = '2.1.0'
# Where KFP's launcher has the step write its ExecutorOutput
# (`backend/src/v2/component/launcher_v2.go`, OutputMetadataFilepath).
LAUNCHER_OUTPUT_FILE = '/tmp/kfp_outputs/output_metadata.json'


def load(path: str) -> Dict[str, Any]:
  """Reads a compiled pipeline: the PipelineJob (JSON), or the YAML package,
  whose second document, when there is one, is the platform spec (returned
  as {'pipelineSpec': ..., 'platformSpec': ...})."""
  with open(path) as f:
    documents = [d for d in yaml.safe_load_all(f) if d is not None]
  if len(documents) == 1:
    return documents[0]
  spec, platform = documents[:2]
  return {'pipelineSpec': spec, 'platformSpec': platform}


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
  """The step's compiled constant parameters, as plain Python values of
  the types their parameters declare: pipeline spec 2.1 writes every
  number as a double (`num_workers: 2.0`), read back as the int its
  NUMBER_INTEGER declares. Reads a 2.0 spec's `constantValue` too."""
  declared = _component(job, task).get('inputDefinitions', {}).get(
      'parameters', {})
  result = {}
  given = _spec(job)['root']['dag']['tasks'][task].get('inputs', {})
  for key, value in given.get('parameters', {}).items():
    runtime = value.get('runtimeValue', {})
    if 'constant' in runtime:  # Pipeline spec 2.1.
      result[key] = _typed(runtime['constant'],
                           declared.get(key, {}).get('parameterType'))
    elif 'constantValue' in runtime:  # Pipeline spec 2.0.
      (kind, raw), = runtime['constantValue'].items()
      result[key] = int(raw) if kind == 'intValue' else (
          float(raw) if kind == 'doubleValue' else raw)
  return result


def _typed(value: Any, parameter_type: Optional[str]) -> Any:
  if parameter_type == 'NUMBER_INTEGER' and isinstance(value, float) and (
      value.is_integer()):
    return int(value)
  return value


def check_schema(job: Dict[str, Any]) -> None:
  """Refuses a spec Kubeflow Pipelines' API server refuses: KFP 2.x takes
  schema 2.1.0 only (`backend/src/apiserver/template/v2_template.go`)."""
  version = _spec(job).get('schemaVersion')
  if version != SCHEMA_VERSION:
    raise InvalidArgumentError(
        f'KFP only supports schema version {SCHEMA_VERSION}, but the pipeline '
        f'spec has version {version} (Kubeflow Pipelines\' API server, '
        'v2_template.go). Expected a pipeline compiled with '
        'generic_trainer.kubeflow.compile.compile_pipeline (or '
        'KubeflowV2DagRunnerConfig(use_pipeline_spec_2_1=True)). Received: '
        f'schemaVersion={version!r}. Rerun the compile with that function.')


def resolve_parameters(job: Dict[str, Any], task: str) -> Dict[str, Any]:
  """The step's `parameterValues` as KFP's driver resolves them
  (`resolveInputParameter` in `backend/src/v2/driver/driver.go` of KFP
  2.4 and 2.5, moved with `handleParamTypeValidationAndConversion` to
  `backend/src/v2/driver/resolve.go` in 2.14): 2.1 constants only, numbers
  as JSON doubles, a STRING parameter's other values as their JSON text,
  a non-optional parameter without a value or a default refused. What
  the driver refuses raises InvalidArgumentError with the driver's reason.
  """
  check_schema(job)
  definitions = _component(job, task).get('inputDefinitions', {}).get(
      'parameters', {})
  values: Dict[str, Any] = {}
  given = _spec(job)['root']['dag']['tasks'][task].get('inputs', {})
  for key, spec in given.get('parameters', {}).items():
    kind = next(iter(spec), None)
    runtime = spec.get('runtimeValue', {})
    if kind != 'runtimeValue' or 'constant' not in runtime:
      what = ('ValueOrRuntimeParameter_ConstantValue'
              if 'constantValue' in runtime else
              f'TaskInputsSpec_InputParameterSpec_{kind}')
      raise InvalidArgumentError(
          f'Step {task!r}: resolving input parameter {key!r}: param runtime '
          f'value spec of type *pipelinespec.{what} not implemented (KFP\'s '
          'driver: driver.go, resolve.go from 2.14). Expected a 2.1 constant '
          '(`runtimeValue.constant`). Received: '
          f'{json.dumps(spec)[:300]}. Rerun the compile with '
          'generic_trainer.kubeflow.compile.compile_pipeline.')
    values[key] = runtime['constant']
  for key, spec in definitions.items():
    kind = spec.get('parameterType')
    if key not in values:
      if spec.get('isOptional'):
        continue
      if 'defaultValue' not in spec:
        raise InvalidArgumentError(
            f'Step {task!r}: neither value nor default value provided for '
            f'non-optional parameter "{key}" (KFP\'s driver: driver.go, resolve.go from 2.14). '
            f'Expected a value for every parameter the step declares. '
            f'Received: the values {sorted(values)}. Rerun the compile from '
            'the component that declares it.')
      continue
    value = values[key]
    if kind == 'STRING':
      if not isinstance(value, str):
        values[key] = json.dumps(value)
      continue
    actual = ('null' if value is None else 'bool' if isinstance(value, bool)
              else 'string' if isinstance(value, str)
              else 'number' if isinstance(value, (int, float))
              else 'list' if isinstance(value, list) else 'struct')
    allowed = {'number': ('NUMBER_DOUBLE', 'NUMBER_INTEGER'),
               'bool': ('BOOLEAN',), 'list': ('LIST',),
               'struct': ('STRUCT', 'TASK_FINAL_STATUS', 'TASK_CONFIG')}
    if kind not in allowed.get(actual, ()):
      raise InvalidArgumentError(
          f'Step {task!r}: input parameter "{key}" type mismatch: expect '
          f'{kind}, got {actual} (KFP\'s driver: driver.go, resolve.go from 2.14). Expected a '
          f'{kind} value. Received: {key}={value!r}. Rerun the compile from '
          'the component that declares it.')
    if actual == 'number':
      values[key] = float(value)  # A protobuf Value's number is a double.
  return values


def executor_input(job: Dict[str, Any], task: str,
                   inputs: Dict[str, List[Any]],
                   outputs: Dict[str, List[Any]],
                   output_file: str) -> Dict[str, Any]:
  """The ExecutorInput KFP's driver builds for `task` (a 2.1 spec; see
  `resolve_parameters`) and its launcher passes as `{{$}}`, for these
  artifacts: each a RuntimeArtifact with its URI and its metadata as a
  Struct.

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
  result['inputs']['parameterValues'] = resolve_parameters(job, task)
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
