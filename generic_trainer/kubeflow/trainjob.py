"""A Kubeflow Trainer v2 TrainJob, and the TrainingRuntime it names, that
run the trainer step on several nodes.

Trainer v2 runs a TrainJob as a JobSet built from a TrainingRuntime: here
one replicated job, `node`, whose Indexed Job has `numNodes` pods. The
runtime turns on the JobSet's DNS host names, so every pod is reachable at
`<trainjob>-node-0-<pod index>.<trainjob>`, and hands each pod the JobSet's
names and its indexes (downward API, `keys.JOBSET_REQUIRED_ENV`); the
TrainJob adds the node count. Trainer v2 has no TensorFlow policy that
writes TF_CONFIG, so the executor writes it from those variables
(`launch.cluster_environment.JobSet`): pod 0 is the chief, which
validates and publishes; the others train and publish nothing.

Every node runs the project image with TFX's KFP v2 container entrypoint and
GenericExecutor, as the compiled pipeline's trainer step does, with the
component's `resources` (`resourcesPerNode`; node selector and tolerations
in the runtime's pod template) and `pod_settings` (service account,
annotations, labels, env, volumes and mounts, security context: all in the
runtime's pod template, which is this job's own; Istio's sidecar is off
unless the settings say otherwise, `pod_settings.PodSettings.apply`).

Restarts follow the component's `max_restarts` (`plan.settings.restarts`:
None is 2): the runtime's JobSet has `failurePolicy.maxRestarts`. A pod
that fails fails its Job (`restartPolicy: Never`, `backoffLimit: 0`), and
the JobSet then recreates all its Jobs (its default `Recreate` strategy),
so the group restarts as a whole, as a MultiWorkerMirroredStrategy
training must, and every pod resumes from the last checkpoint in the
ModelRun artifact, which they must all reach (the pipeline root on GCS, S3
or a ReadWriteMany volume). After `max_restarts` restarts the next failure
fails the JobSet, and the TrainJob with it.

Names are checked when rendered (`_check_names`): the TrainJob's is an
RFC 1035 label (the TrainJob CRD's CEL rules) short enough for the pod
names JobSet derives from it; the runtime's is a DNS-1123 subdomain.

The manifests are plain dicts; where `kubeflow-trainer-api` (the Trainer
project's own API models, which install beside TFX 1.16: they need
pydantic 2) is installed, each is rebuilt through its model
(`TrainerV1alpha1TrainJob`, `TrainerV1alpha1TrainingRuntime`), which
refuses a field of the wrong type. tests/test_trainjob.py validates both
against the Trainer project's CRDs (v2.3.0), pinned in tests/schemas/, as
the API server does.

`JOB_KIND` is the TrainJob as a `job_kind.JobKind`: what the step that
launches one asks of it (its API, its pods' label, the conditions that end
it, its runtime beside it).
"""

import json
from typing import Any, Dict, List, Optional, Union

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import JOBSET_JOB_INDEX_ENV
from generic_trainer.keys import JOBSET_NAME_ENV
from generic_trainer.keys import JOBSET_NUM_NODES_ENV
from generic_trainer.keys import JOBSET_REPLICATED_JOB_ENV
from generic_trainer.keys import MAX_RESTARTS_KEY
from generic_trainer.keys import POD_SETTINGS_KEY
from generic_trainer.keys import TERMINATION_GRACE_PERIOD_S
from generic_trainer.kubeflow import kfp_step
from generic_trainer.kubeflow import names
from generic_trainer.kubeflow.job_kind import Companion
from generic_trainer.kubeflow.job_kind import JobKind
from generic_trainer.kubeflow import pod_settings as pod_settings_lib
from generic_trainer.kubeflow import resources as resources_lib
from generic_trainer.kubeflow.pod_settings import PodSettings
from generic_trainer.kubeflow.resources import Resources
from generic_trainer.kubeflow.tfjob import KFP_ENTRYPOINT
from generic_trainer.plan.settings import check_max_restarts
from generic_trainer.plan.settings import most_workers
from generic_trainer.plan.settings import restarts
from generic_trainer.system import lazy
from generic_trainer.system.lazy import kubeflow_trainer_api
from generic_trainer.system.lazy import kubeflow_trainer_api_models

API_VERSION = 'trainer.kubeflow.org/v1alpha1'
# Trainer v2 finds the trainer's replicated job by this label, and its
# container by the name `node`.
ANCESTOR_LABEL = 'trainer.kubeflow.org/trainjob-ancestor-step'
REPLICATED_JOB = 'node'
CONTAINER_NAME = 'node'
# A TrainJob's runtime is its own: named after it.
RUNTIME_SUFFIX = '-runtime'
# JobSet labels every pod with these (jobset.sigs.k8s.io/...).
_POD_LABELS = {JOBSET_NAME_ENV: 'jobset.sigs.k8s.io/jobset-name',
               JOBSET_REPLICATED_JOB_ENV: 'jobset.sigs.k8s.io/replicatedjob-name',
               JOBSET_JOB_INDEX_ENV: 'jobset.sigs.k8s.io/job-index'}
# The JobSet webhook adds this to the longest pod name it checks, for the
# random suffix of a Job's pods (jobset_webhook.go, below).
_POD_SUFFIX = '-abcde'


def render(name: str, image: str, command: List[str], args: List[str],
           num_nodes: int, runtime_name: Optional[str] = None,
           namespace: Optional[str] = None,
           resources: Optional[Resources] = None,
           env: Optional[Dict[str, str]] = None,
           termination_grace_period_s: int = TERMINATION_GRACE_PERIOD_S,
           max_restarts: Optional[int] = None,
           pod_settings: Union[PodSettings, Dict[str, Any], None] = None
           ) -> Dict[str, Any]:
  """The TrainJob and its TrainingRuntime: {'trainjob': ..., 'runtime': ...}.

  Args:
    name: The TrainJob's name: an RFC 1035 label (a lowercase letter first)
      short enough for the pod names JobSet derives from it
      (`longest_name`: 48 characters up to 10 nodes); the JobSet takes it.
    image: Every node's image (built from the Dockerfile).
    command: The container command, e.g. the KFP v2 entrypoint.
    args: Its arguments (executor class, serialized ExecutorInput).
    num_nodes: Pods that train together; pod 0 is the chief.
    runtime_name: The TrainingRuntime's name; default `<name>-runtime`
      (`RUNTIME_SUFFIX`).
    namespace: Both objects' namespace (a TrainingRuntime is namespaced and
      must share the TrainJob's), or None for `kubectl`'s.
    resources: Every node's `Resources` (`GenericTrainer(resources=...)`).
    env: Extra environment variables of every node.
    termination_grace_period_s: Seconds from SIGTERM to SIGKILL (see
      `tfjob`: the last step and its checkpoint must fit).
    max_restarts: Restarts of the whole group, from the checkpoint, after a
      pod failed (the JobSet's `failurePolicy.maxRestarts`); None: the
      component's default, 2; 0: the first failure fails the TrainJob.
    pod_settings: What every pod needs besides its resources (service
      account, annotations, labels, env, volumes, security context): a
      `PodSettings`, or a dict `pod_settings.from_value` takes, or None.
      Istio's sidecar is turned off either way unless these settings name
      its annotation.

  Raises:
    InvalidArgumentError: `num_nodes` is not a positive int, `max_restarts`
      not a non-negative int, or a name is one Kubernetes, Trainer or
      JobSet refuses.
  """
  if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or (
      num_nodes < 1):
    raise InvalidArgumentError(
        "'num_nodes' must be a positive int: the TrainJob's pods. Received: "
        f'num_nodes={num_nodes!r}. Pass the number of nodes.')
  check_max_restarts(max_restarts)
  max_restarts = restarts(max_restarts)
  runtime_name = runtime_name or name + RUNTIME_SUFFIX
  _check_names(name, runtime_name, num_nodes)
  metadata = {'name': name, **({'namespace': namespace} if namespace else {})}
  trainer = {'image': image, 'command': list(command), 'args': list(args),
             'numNodes': num_nodes,
             'env': [{'name': JOBSET_NUM_NODES_ENV, 'value': str(num_nodes)}]
             + [{'name': k, 'value': v} for k, v in (env or {}).items()]}
  if resources is not None and resources.container():
    trainer['resourcesPerNode'] = resources.container()
  trainjob = {'apiVersion': API_VERSION, 'kind': 'TrainJob',
              'metadata': metadata,
              'spec': {'runtimeRef': {'apiGroup': 'trainer.kubeflow.org',
                                      'kind': 'TrainingRuntime',
                                      'name': runtime_name},
                       'trainer': trainer}}
  runtime = {'apiVersion': API_VERSION, 'kind': 'TrainingRuntime',
             'metadata': {**metadata, 'name': runtime_name},
             'spec': _runtime_spec(image, num_nodes, resources,
                                   termination_grace_period_s, max_restarts,
                                   pod_settings_lib.from_value(pod_settings)
                                   or PodSettings())}
  return {'trainjob': _through_sdk('TrainerV1alpha1TrainJob', trainjob),
          'runtime': _through_sdk('TrainerV1alpha1TrainingRuntime', runtime)}


def longest_name(num_nodes: int) -> int:
  """The longest TrainJob name for `num_nodes` nodes: JobSet refuses a
  JobSet whose longest pod name, `<name>-node-0-<num_nodes - 1>` plus a
  5-character suffix, is over 63 characters."""
  return names.MAX_LABEL - len(
      _pod_name('', num_nodes - 1) + _POD_SUFFIX)


def _pod_name(jobset: str, pod_index: int) -> str:
  # JobSet's placement.GenPodName(jobSet, replicatedJob, jobIndex,
  # podIndex) (pkg/util/placement/placement.go, v0.12.0): here one
  # replicated job with one Job, index 0.
  return f'{jobset}-{REPLICATED_JOB}-0-{pod_index}'


def _check_names(name: str, runtime_name: str, num_nodes: int) -> None:
  """Refuses names the API server or the JobSet webhook would refuse.

  - The TrainJob's name: an RFC 1035 label of at most 63 characters, the
    TrainJob CRD's CEL rules (kubeflow/trainer v2.3.0,
    pkg/apis/trainer/v1alpha1/trainjob_types.go, the XValidation markers
    on TrainJob). Trainer names the JobSet after the TrainJob
    (pkg/runtime/framework/plugins/jobset/jobset.go) and sets its Job's
    completions to numNodes, so JobSet's webhook (kubernetes-sigs/jobset
    v0.12.0, pkg/webhooks/jobset_webhook.go, validateCreate) refuses it
    unless `placement.GenPodName(name, 'node', '0', str(numNodes - 1))` +
    '-abcde' is an RFC 1035 label: at most `longest_name(num_nodes)`.
  - The runtime's name: any object's name, a DNS-1123 subdomain; Trainer's
    TrainingRuntime webhook (pkg/webhooks/trainingruntime_webhook.go) adds
    no rule on it, and the TrainJob's runtimeRef.name allows 253.
  """
  names.check_label(
      'name', name, longest_name(num_nodes),
      "the TrainJob CRD's rule, and JobSet's: the pod names "
      f"'{_pod_name(name, num_nodes - 1)}{_POD_SUFFIX}' of {num_nodes} "
      f'node(s) must fit in {names.MAX_LABEL}')
  names.check_subdomain('runtime_name', runtime_name,
                        "the TrainingRuntime's name")


def _runtime_spec(image: str, num_nodes: int, resources: Optional[Resources],
                  termination_grace_period_s: int, max_restarts: int,
                  pod_settings: PodSettings) -> Dict[str, Any]:
  env = [{'name': variable,
          'valueFrom': {'fieldRef': {
              'fieldPath': f"metadata.labels['{label}']"}}}
         for variable, label in _POD_LABELS.items()]
  # Kubernetes sets JOB_COMPLETION_INDEX itself in an Indexed Job's pods.
  # A failed pod fails its Job (Never, backoffLimit 0); the JobSet's
  # failurePolicy then restarts the whole group.
  pod_spec = {'restartPolicy': 'Never',
              'terminationGracePeriodSeconds': termination_grace_period_s,
              'containers': [{'name': CONTAINER_NAME, 'image': image,
                              'env': env}],
              **(resources.pod_fields() if resources is not None else {})}
  pod_template = pod_settings.apply({'metadata': {}, 'spec': pod_spec},
                                    CONTAINER_NAME)
  return {
      'mlPolicy': {'numNodes': num_nodes},
      'template': {'spec': {
          'failurePolicy': {'maxRestarts': max_restarts},
          'network': {'enableDNSHostnames': True,
                      'publishNotReadyAddresses': True},
          'replicatedJobs': [{
              'name': REPLICATED_JOB, 'replicas': 1,
              'template': {
                  'metadata': {'labels': {ANCESTOR_LABEL: 'trainer'}},
                  'spec': {'backoffLimit': 0,
                           'completionMode': 'Indexed',
                           'template': pod_template}}}]}}}


def render_for_step(job: Dict[str, Any], executor_input: Dict[str, Any],
                    name: str, task: Optional[str] = None,
                    num_nodes: Optional[int] = None,
                    max_restarts: Optional[int] = None,
                    **kwargs) -> Dict[str, Any]:
  """The TrainJob and TrainingRuntime that run a compiled pipeline's
  trainer step: its image, command, arguments (`{{$}}` replaced by
  `executor_input`), resources and `pod_settings`; `num_nodes` and
  `max_restarts` default to the step's num_workers (a range's MAX) and
  max_restarts (else 2). Other arguments are `render`'s, and override the
  step's."""
  task = task or kfp_step.find_task(job)
  container = kfp_step.container(job, task)
  parameters = kfp_step.parameters(job, task)
  if num_nodes is None:
    num_nodes = most_workers(parameters)
  kwargs.setdefault('resources', resources_lib.from_step(container))
  if max_restarts is None:
    max_restarts = parameters.get(MAX_RESTARTS_KEY)
  kwargs.setdefault('pod_settings', pod_settings_lib.from_json(
      parameters.get(POD_SETTINGS_KEY)))
  command = container.get('command', [])
  return render(name, container['image'], command,
                kfp_step.command_line(job, task, executor_input)[
                    len(command):], num_nodes, max_restarts=max_restarts,
                **kwargs)


def render_for_component(component, name: str, image: str,
                         executor_input: Dict[str, Any],
                         **kwargs) -> Dict[str, Any]:
  """The TrainJob and TrainingRuntime that run a GenericTrainer on its
  `num_workers` nodes with its `resources`, `max_restarts` and
  `pod_settings`. Other arguments are `render`'s, and override the
  component's."""
  args = ['--executor_class_path', kfp_step.TRAINER_EXECUTOR,
          '--json_serialized_invocation_args', json.dumps(executor_input)]
  kwargs.setdefault('resources', component.resources)
  kwargs.setdefault('max_restarts',
                    component.exec_properties.get(MAX_RESTARTS_KEY))
  kwargs.setdefault('pod_settings', component.pod_settings)
  return render(name, image, list(KFP_ENTRYPOINT), args,
                most_workers(component.exec_properties), **kwargs)


def sdk_available() -> bool:
  return lazy.installed(kubeflow_trainer_api)


def _through_sdk(model: str, manifest: Dict[str, Any]) -> Dict[str, Any]:
  """The manifest rebuilt through the Trainer project's model, if
  installed (a field of the wrong type raises InvalidArgumentError)."""
  if not sdk_available():
    return manifest
  try:
    built = getattr(kubeflow_trainer_api_models, model).from_dict(manifest)
  except ValueError as e:  # pydantic's ValidationError is a ValueError.
    raise InvalidArgumentError(
        f'The {manifest["kind"]} does not fit kubeflow-trainer-api\'s '
        f'{model}: {e}. Received: {json.dumps(manifest)[:2000]}. Fix the '
        'arguments named above.') from e
  return built.to_dict()


class TrainJobKind(JobKind):
  """A Kubeflow Trainer v2 TrainJob, on its own TrainingRuntime."""
  name = 'TrainJob'
  api_version = API_VERSION
  plural = 'trainjobs'
  job_key = 'trainjob'
  companions = (Companion('runtime', 'trainingruntimes', RUNTIME_SUFFIX),)
  # Its pods carry the JobSet's name, which is the TrainJob's.
  pod_selector = _POD_LABELS[JOBSET_NAME_ENV]
  container = CONTAINER_NAME
  # pkg/apis/trainer/v1alpha1/trainjob_types.go (Trainer v2).
  complete, failed = 'Complete', 'Failed'
  operator = 'Kubeflow Trainer v2 (2.2 or later; its JobSet comes with it)'

  def render(self, name, num_workers, max_restarts, env, **kwargs):
    return render(name, num_nodes=num_workers, max_restarts=max_restarts,
                  env=env, **kwargs)

  def render_for_step(self, job, executor_input, name, task=None,
                      num_workers=None, max_restarts=None, **kwargs):
    return render_for_step(job, executor_input, name, task=task,
                           num_nodes=num_workers, max_restarts=max_restarts,
                           **kwargs)

  def render_for_component(self, component, name, image, executor_input,
                           **kwargs):
    return render_for_component(component, name, image, executor_input,
                                **kwargs)

  def longest_name(self, num_workers):
    return longest_name(num_workers)

  def check_name(self, name, num_workers):
    _check_names(name, name + RUNTIME_SUFFIX, num_workers)

  def sdk_available(self):
    return sdk_available()


JOB_KIND = TrainJobKind()
