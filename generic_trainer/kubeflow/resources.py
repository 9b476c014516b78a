"""What a trainer pod asks the cluster for: `GenericTrainer(resources=...)`.

One value, checked when the component is built, reaches every place a pod
is described:
  - the compiled KFP step: TFX's KubeflowV2DagRunner copies a component's
    platform config (KFP's `ResourceSpec`: CPU and memory limits, one
    accelerator type and count) into the step's container
    (`tfx/orchestration/kubeflow/v2/step_builder.py`); `platform_config`
    builds it. KFP's PipelineSpec has no node selector or tolerations in
    `ResourceSpec` (KFP keeps them in the kfp-kubernetes platform spec,
    which TFX's compiler does not write): our compile writes them there
    for a step that trains in its own pod (`kfp_platform`), and a step
    that launches a job passes them to the job's pods;
  - every replica of the TFJob and every node of the TrainJob: `container`
    (Kubernetes' requests and limits) and `pod_fields` (nodeSelector,
    tolerations). `from_step` reads the compiled step's back, so a TFJob
    rendered from a compiled pipeline asks for what the step asked for.

Units: `cpu` in cores (2, 0.5 or '500m'); `memory` as Kubernetes writes it
('16G', '512Mi') or a number of GB, which is KFP's unit; the accelerator is
a Kubernetes extended resource ('nvidia.com/gpu', 'google.com/tpu'), which
open-source Kubeflow Pipelines puts in the pod's limits as it is, or
Vertex AI's name ('NVIDIA_TESLA_T4', 'NVIDIA_H100_80GB', 'TPU_V3');
`generic_trainer.kubeflow.compile` checks the spelling against the target.
The TFJob and TrainJob pods take Vertex's names as their resource.
"""

import re
from typing import Any, Dict, List, Mapping, Optional

import attr

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.system.lazy import pipeline_spec_pb2

KEYS = ('cpu', 'memory', 'accelerator_type', 'accelerator_count',
        'node_selector', 'tolerations')
_MEMORY = re.compile(r'^([0-9]+(?:\.[0-9]+)?)(k|M|G|T|Ki|Mi|Gi|Ti)?$')
# Bytes of each suffix, in GB (KFP's unit).
_MEMORY_GB = {None: 1.0, 'k': 1e-6, 'M': 1e-3, 'G': 1.0, 'T': 1e3,
              'Ki': 1024 / 1e9, 'Mi': 1024**2 / 1e9, 'Gi': 1024**3 / 1e9,
              'Ti': 1024**4 / 1e9}
_EXAMPLE = ("e.g. resources={'cpu': 4, 'memory': '16G', 'accelerator_type': "
            "'nvidia.com/gpu', 'accelerator_count': 1}")


@attr.s(frozen=True)
class Resources:
  """A trainer pod's resources, in KFP's units.

  Attributes:
    cpu: Cores (a limit and a request), or None.
    memory_gb: Memory in GB (a limit and a request), or None.
    accelerator_type: KFP's accelerator type or a Kubernetes resource name.
    accelerator_count: Accelerators per pod (0 without a type).
    node_selector: Node labels the pods must run on.
    tolerations: Kubernetes tolerations of the pods (dicts).
  """
  cpu = attr.ib(type=Optional[float], default=None)
  memory_gb = attr.ib(type=Optional[float], default=None)
  accelerator_type = attr.ib(type=Optional[str], default=None)
  accelerator_count = attr.ib(type=int, default=0)
  node_selector = attr.ib(type=Dict[str, str], factory=dict)
  tolerations = attr.ib(type=List[Dict[str, Any]], factory=list)

  def platform_config(self):
    """KFP's ResourceSpec, for `BaseComponent.with_platform_config`."""
    spec = (pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec
            .ResourceSpec())
    if self.cpu is not None:
      spec.cpu_limit = spec.cpu_request = self.cpu
    if self.memory_gb is not None:
      spec.memory_limit = spec.memory_request = self.memory_gb
    if self.accelerator_type:
      spec.accelerator.type = self.accelerator_type
      spec.accelerator.count = self.accelerator_count
    return spec

  def container(self) -> Dict[str, Dict[str, str]]:
    """Kubernetes' `resources` of a container: requests equal to limits."""
    limits = {}
    if self.cpu is not None:
      limits['cpu'] = f'{self.cpu:g}'
    if self.memory_gb is not None:
      limits['memory'] = (f'{self.memory_gb:g}G' if float(
          self.memory_gb).is_integer() else f'{round(self.memory_gb * 1e3)}M')
    requests = dict(limits)
    if self.accelerator_type:
      # Extended resources are limits only (Kubernetes copies the request).
      limits[resource_name(self.accelerator_type)] = str(
          self.accelerator_count)
    return {'limits': limits, 'requests': requests} if limits else {}

  def value(self) -> Dict[str, Any]:
    """The `resources=` dict that `from_value` turns into this again (the
    compile hands it to a step that launches a job, `step_job.render.to_env`)."""
    value = {'cpu': self.cpu, 'memory': self.memory_gb,
             'accelerator_type': self.accelerator_type,
             'accelerator_count': self.accelerator_count or None,
             'node_selector': dict(self.node_selector) or None,
             'tolerations': [dict(t) for t in self.tolerations] or None}
    return {k: v for k, v in value.items() if v is not None}

  def pod_fields(self) -> Dict[str, Any]:
    """The pod spec's `nodeSelector` and `tolerations`, those that are set."""
    fields = {}
    if self.node_selector:
      fields['nodeSelector'] = dict(self.node_selector)
    if self.tolerations:
      fields['tolerations'] = [dict(t) for t in self.tolerations]
    return fields


def resource_name(accelerator_type: str) -> str:
  """The Kubernetes extended resource of an accelerator: itself when it is
  one ('nvidia.com/gpu'), else that of Vertex AI's name ('TPU_V3':
  'google.com/tpu', any other: 'nvidia.com/gpu')."""
  if '/' in accelerator_type:
    return accelerator_type
  if accelerator_type.startswith('TPU'):
    return 'google.com/tpu'
  return 'nvidia.com/gpu'


def from_value(value: Optional[Mapping[str, Any]]) -> Optional[Resources]:
  """Checks `GenericTrainer(resources=...)`; None stays None.

  Raises:
    InvalidArgumentError: an unknown key or a value of the wrong kind.
  """
  if value is None:
    return None
  if isinstance(value, Resources):
    return value
  if not isinstance(value, Mapping):
    raise InvalidArgumentError(
        f"'resources' must be a dict with keys among {KEYS}, {_EXAMPLE}. "
        f'Received: resources that is a {type(value).__name__}. Pass a dict.')
  unknown = sorted(set(value) - set(KEYS))
  if unknown:
    raise InvalidArgumentError(
        f"'resources' has unknown keys {unknown}. Expected keys among {KEYS},"
        f' {_EXAMPLE}. Received: resources={dict(value)!r}. Rename or remove '
        'them.')
  count = value.get('accelerator_count')
  accelerator = value.get('accelerator_type')
  if accelerator is not None and (not isinstance(accelerator, str) or
                                  not accelerator):
    _wrong('accelerator_type', accelerator, "a non-empty str such as "
           "'nvidia.com/gpu' (Vertex AI: 'NVIDIA_TESLA_T4')")
  if count is not None and (isinstance(count, bool) or
                            not isinstance(count, int) or count < 1):
    _wrong('accelerator_count', count, 'a positive int')
  if count and not accelerator:
    raise InvalidArgumentError(
        "'resources' asks for accelerators without saying which: "
        "accelerator_count needs accelerator_type. Received: "
        f'resources={dict(value)!r}. Add accelerator_type, e.g. '
        "'nvidia.com/gpu' (Vertex AI: 'NVIDIA_TESLA_T4').")
  selector = value.get('node_selector') or {}
  if not isinstance(selector, Mapping) or not all(
      isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
    _wrong('node_selector', selector, 'a dict of str labels to str values')
  tolerations = value.get('tolerations') or []
  if not isinstance(tolerations, (list, tuple)) or not all(
      isinstance(t, Mapping) for t in tolerations):
    _wrong('tolerations', tolerations, "a list of dicts, e.g. [{'key': "
           "'nvidia.com/gpu', 'operator': 'Exists', 'effect': 'NoSchedule'}]")
  return Resources(cpu=_cpu(value.get('cpu')),
                   memory_gb=_memory_gb(value.get('memory')),
                   accelerator_type=accelerator,
                   accelerator_count=count or (1 if accelerator else 0),
                   node_selector=dict(selector),
                   tolerations=[dict(t) for t in tolerations])


def from_step(container: Mapping[str, Any]) -> Optional[Resources]:
  """The resources of a compiled step's container (PipelineSpec JSON:
  `cpuLimit`, `memoryLimit` in GB, `accelerator`), or None."""
  spec = container.get('resources')
  if not spec:
    return None
  accelerator = spec.get('accelerator') or {}
  return Resources(
      cpu=spec.get('cpuLimit'), memory_gb=spec.get('memoryLimit'),
      accelerator_type=accelerator.get('type') or None,
      accelerator_count=int(accelerator.get('count') or 0))


def _cpu(value: Any) -> Optional[float]:
  if value is None:
    return None
  cores = value
  if isinstance(value, str) and re.fullmatch(r'[0-9]+m', value):
    cores = int(value[:-1]) / 1000
  elif isinstance(value, str):
    try:
      cores = float(value)
    except ValueError:
      cores = None
  if isinstance(cores, bool) or not isinstance(cores, (int, float)) or (
      cores <= 0):
    _wrong('cpu', value, "a positive number of cores: 2, 0.5 or '500m'")
  return float(cores)


def _memory_gb(value: Any) -> Optional[float]:
  if value is None:
    return None
  if isinstance(value, (int, float)) and not isinstance(value, bool) and (
      value > 0):
    return float(value)
  match = _MEMORY.match(value) if isinstance(value, str) else None
  if not match or float(match.group(1)) <= 0:
    _wrong('memory', value, "Kubernetes' quantity such as '16G' or '512Mi', "
           'or a number of GB')
  return float(match.group(1)) * _MEMORY_GB[match.group(2)]


def _wrong(key: str, value: Any, expected: str):
  raise InvalidArgumentError(
      f"'resources' {key} must be {expected}. Received: {key}={value!r}. "
      'Fix that value.')
