"""A TFJob for the Kubeflow Training Operator that runs the trainer step.

The job has a Chief and `num_workers - 1` Workers. Every replica runs the
project image with TFX's KFP v2 container entrypoint and GenericExecutor,
exactly as the compiled pipeline's trainer step does; the operator sets
TF_CONFIG in each pod, so the chief trains, validates and publishes, and
the workers train with it and publish nothing (`distribution.py`).

The manifest is built with the operator's SDK models (`kubeflow-training`)
when that package is installed; otherwise as plain data. Either way it is
checked against `tfjob_schema.TFJOB_SCHEMA` before it is returned (the
package does not ship the operator's CRD; tests/test_tfjob.py checks every
rendered TFJob against it, v1.9.4, pinned in tests/schemas/, as the API
server does). The name is checked first (`_check_name`): an RFC 1035 label,
as the operator's webhook requires, short enough for the Services the
operator names after it.

Every pod, Chief and Workers, carries the component's `pod_settings`
(service account, annotations, labels, env, volumes and mounts, security
context; `pod_settings.PodSettings.apply`), and Istio's sidecar is off
unless those settings say otherwise.

Restarts follow the component's `max_restarts`, as local workers do
(`restart_settings`): when a pod dies, the other replicas fail with it (a
MultiWorkerMirroredStrategy training cannot go on without one of its
workers), the operator restarts the failed pods (`OnFailure`), and every
replica resumes from the last checkpoint in the ModelRun artifact, which
they must all reach (the pipeline root on GCS, S3 or a ReadWriteMany
volume). `backoffLimit` counts pod restarts, each replica's: it is
`max_restarts` times the replicas, room for `max_restarts` restarts of
the whole group.

Every pod gets `terminationGracePeriodSeconds` (`keys.
TERMINATION_GRACE_PERIOD_S`, 60 s unless `render` is given another): the
time between the SIGTERM that deleting or preempting a pod sends and the
SIGKILL after it. On SIGTERM the executor stops the training at the next
step, saves that step in the resume checkpoint and exits publishing nothing
(`generic_trainer.system.preemption`); 60 s leaves room for a slow step and a
checkpoint written to object storage, where Kubernetes's default of 30 s
could cut the write short.

From a compiled pipeline and the artifacts of one run:

    python -m generic_trainer.kubeflow.tfjob --pipeline penguin_kubeflow.json \\
        --executor-input executor_input.json --name penguin-train \\
        --namespace kubeflow --num-workers 2 > tfjob.yaml
    kubectl apply -f tfjob.yaml

(docs/guides/scaling-out.md, "On several pods: a TFJob", says how to
write `executor_input.json`.)

`JOB_KIND` is the TFJob as a `job_kind.JobKind`: what the step that
launches one asks of it (its API, its pods' label, the conditions that end
it).
"""

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Union

import yaml

from generic_trainer.plan.settings import most_workers, restarts
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import MAX_RESTARTS_KEY
from generic_trainer.keys import POD_SETTINGS_KEY
from generic_trainer.keys import TERMINATION_GRACE_PERIOD_S
from generic_trainer.kubeflow import kfp_step
from generic_trainer.kubeflow import names
from generic_trainer.kubeflow.job_kind import JobKind
from generic_trainer.kubeflow import pod_settings as pod_settings_lib
from generic_trainer.kubeflow import resources as resources_lib
from generic_trainer.kubeflow.pod_settings import PodSettings
from generic_trainer.kubeflow.resources import Resources
from generic_trainer.kubeflow.tfjob_schema import TFJOB_SCHEMA
from generic_trainer.system import lazy
from generic_trainer.system.lazy import jsonschema
from generic_trainer.system.lazy import k8s_client as k8s
from generic_trainer.system.lazy import kubeflow_training
from generic_trainer.system.lazy import kubeflow_training_models as models

API_VERSION = 'kubeflow.org/v1'
KIND = 'TFJob'
# The operator finds the training container of a TFJob replica by this name.
CONTAINER_NAME = 'tensorflow'
RESTART_POLICIES = ('Never', 'OnFailure', 'ExitCode', 'Always')
# TFX's container entrypoint for KFP v2, as KubeflowV2DagRunner compiles it.
KFP_ENTRYPOINT = ('python', '-m',
                  'tfx.orchestration.kubeflow.v2.container.'
                  'kubeflow_v2_run_executor')


def render(name: str, image: str, command: List[str], args: List[str],
           num_workers: int, namespace: Optional[str] = None,
           restart_policy: str = 'Never',
           active_deadline_seconds: Optional[int] = None,
           backoff_limit: int = 0,
           env: Optional[Dict[str, str]] = None,
           resources: Union[Resources, Dict[str, Dict[str, str]], None] = None,
           service_account: Optional[str] = None,
           termination_grace_period_s: int = TERMINATION_GRACE_PERIOD_S,
           pod_settings: Union[PodSettings, Dict[str, Any], None] = None
           ) -> Dict[str, Any]:
  """The TFJob manifest (a dict, as `kubectl apply` takes it in YAML/JSON).

  Args:
    name: The job's name: an RFC 1035 label (a lowercase letter first)
      short enough for the Services named after it (`longest_name`: 54
      characters for 2 to 11 replicas).
    image: The image of every replica (built from the Dockerfile).
    command: The container command, e.g. the KFP v2 entrypoint.
    args: Its arguments (executor class, serialized ExecutorInput).
    num_workers: Replicas in all: one Chief and `num_workers - 1` Workers.
    namespace: The namespace, or None for the one `kubectl` uses.
    restart_policy: What the operator does when a replica's pod fails.
      'Never' (default) fails the job; 'OnFailure' restarts the failed
      pods, which resume from the checkpoint (see `restart_settings`, what
      `render_for_step` and `render_for_component` pass).
    active_deadline_seconds: Bound on the job's run time; None: no bound.
    backoff_limit: Retries of the whole job before it is marked failed.
    env: Extra environment variables of every replica.
    resources: Every replica's `Resources` (`GenericTrainer(resources=...)`:
      requests, limits, node selector, tolerations), or a container's
      Kubernetes resources as a dict, e.g. {'limits': {'cpu': '2'}}.
    service_account: The pods' service account (storage credentials); the
      same as `pod_settings`' service_account, which it sets.
    termination_grace_period_s: The pods' `terminationGracePeriodSeconds`:
      seconds from SIGTERM to SIGKILL, which the last step, its resume
      checkpoint and the exit must fit in.
    pod_settings: What every pod needs besides its resources (service
      account, annotations, labels, env, volumes, security context): a
      `PodSettings`, or a dict `pod_settings.from_value` takes, or None.
      Istio's sidecar is turned off either way unless these settings name
      its annotation.

  Raises:
    InvalidArgumentError: an argument is wrong, or the manifest does not
      pass the TFJob schema.
  """
  if isinstance(num_workers, bool) or not isinstance(num_workers, int) or (
      num_workers < 1):
    raise InvalidArgumentError(
        "'num_workers' must be a positive int: the TFJob's Chief and Workers "
        f'together. Received: num_workers={num_workers!r}. Pass the number '
        'of replicas (a range\'s MAX).')
  if restart_policy not in RESTART_POLICIES:
    raise InvalidArgumentError(
        f"'restart_policy' must be one of {RESTART_POLICIES}. Received: "
        f'restart_policy={restart_policy!r}. Pass one of those.')
  _check_name(name, num_workers)
  settings = _with_service_account(
      pod_settings_lib.from_value(pod_settings) or PodSettings(),
      service_account)
  container = {'name': CONTAINER_NAME, 'image': image,
               'command': list(command), 'args': list(args)}
  if env:
    container['env'] = [{'name': k, 'value': v} for k, v in env.items()]
  pod_fields = {}
  if isinstance(resources, Resources):
    resources, pod_fields = resources.container(), resources.pod_fields()
  if resources:
    container['resources'] = resources
  pod_spec = {'containers': [container],
              'terminationGracePeriodSeconds': termination_grace_period_s,
              **pod_fields}
  template = settings.apply({'metadata': {}, 'spec': pod_spec},
                            CONTAINER_NAME)
  replica_specs = {'Chief': _replica(1, restart_policy, template)}
  if num_workers > 1:
    replica_specs['Worker'] = _replica(num_workers - 1, restart_policy,
                                       template)
  run_policy = {'cleanPodPolicy': 'Running', 'backoffLimit': backoff_limit}
  if active_deadline_seconds:
    run_policy['activeDeadlineSeconds'] = active_deadline_seconds
  metadata = {'name': name}
  if namespace:
    metadata['namespace'] = namespace
  manifest = {'apiVersion': API_VERSION, 'kind': KIND, 'metadata': metadata,
              'spec': {'runPolicy': run_policy,
                       'tfReplicaSpecs': replica_specs}}
  manifest = _through_sdk(manifest)
  validate(manifest)
  return manifest


def _replica(count: int, restart_policy: str, template: Dict[str, Any]):
  return {'replicas': count, 'restartPolicy': restart_policy,
          'template': json.loads(json.dumps(template))}


def _with_service_account(settings: PodSettings,
                          service_account: Optional[str]) -> PodSettings:
  """`settings` with `render`'s service_account argument in them."""
  if not service_account or service_account == settings.service_account:
    return settings
  if settings.service_account:
    raise InvalidArgumentError(
        "'service_account' and pod_settings' service_account must not "
        'name two accounts: a pod has one. Received: '
        f'service_account={service_account!r}, pod_settings service_account='
        f'{settings.service_account!r}. Pass one of them.')
  return pod_settings_lib.from_value(
      {**json.loads(settings.to_json()), 'service_account': service_account})


def longest_name(num_workers: int) -> int:
  """The longest TFJob name for `num_workers` replicas: the operator names
  each replica's Service `<name>-<type>-<index>`, which must be at most 63
  characters."""
  return names.MAX_LABEL - len(_service_name('', num_workers))


def _service_name(job: str, num_workers: int) -> str:
  # The longest of GenGeneralName(jobName, rtype, index) = jobName + '-' +
  # lower(rtype) + '-' + index (pkg/controller.v1/common/util.go).
  if num_workers > 1:
    return f'{job}-worker-{num_workers - 2}'
  return f'{job}-chief-0'


def _check_name(name: str, num_workers: int) -> None:
  """Refuses a name the operator refuses, or cannot create Services for.

  The Training Operator's TFJob webhook requires an RFC 1035 label
  (kubeflow/trainer v1.9.4, formerly kubeflow/training-operator,
  pkg/webhooks/tensorflow/tfjob_webhook.go, validateTFJob:
  NameIsDNS1035Label). The operator names each replica's headless Service
  `<name>-<replica type>-<index>` (pkg/controller.v1/common/service.go,
  GenGeneralName in pkg/controller.v1/common/util.go), and a Service's
  name is an RFC 1035 label of at most 63 characters, so the name is at
  most `longest_name(num_workers)`.
  """
  names.check_label(
      'name', name, longest_name(num_workers),
      "the Training Operator's TFJob webhook, and the Service "
      f"'{_service_name(name, num_workers)}' it names after the job must "
      f'fit in {names.MAX_LABEL}')


def restart_settings(max_restarts: Optional[int],
                     num_workers: int) -> Dict[str, Any]:
  """`render`'s restart_policy and backoff_limit for `max_restarts`
  restarts of the whole group (None: the component's default, 2)."""
  max_restarts = restarts(max_restarts)
  if not max_restarts:
    return {'restart_policy': 'Never', 'backoff_limit': 0}
  return {'restart_policy': 'OnFailure',
          'backoff_limit': max_restarts * num_workers}


def render_for_step(job: Dict[str, Any], executor_input: Dict[str, Any],
                    name: str, task: Optional[str] = None,
                    num_workers: Optional[int] = None,
                    max_restarts: Optional[int] = None,
                    **kwargs) -> Dict[str, Any]:
  """The TFJob that runs a compiled pipeline's trainer step on N replicas.

  The image, command and arguments are the step's; `{{$}}` becomes
  `executor_input` (see `kfp_step.executor_input`). `num_workers` and
  `max_restarts` default to the component's settings (else 1 and 2); the
  restarts give the restart policy and backoff limit (`restart_settings`)
  unless those are passed. The pods get the step's resources and
  `pod_settings` unless those are passed. Other arguments are `render`'s.
  """
  task = task or kfp_step.find_task(job)
  container = kfp_step.container(job, task)
  parameters = kfp_step.parameters(job, task)
  if num_workers is None:
    num_workers = most_workers(parameters)
  if max_restarts is None:
    max_restarts = parameters.get(MAX_RESTARTS_KEY)
  kwargs = {**restart_settings(max_restarts, num_workers),
            'resources': resources_lib.from_step(container),
            'pod_settings': pod_settings_lib.from_json(
                parameters.get(POD_SETTINGS_KEY)), **kwargs}
  return render(name, container['image'], container.get('command', []),
                kfp_step.command_line(job, task, executor_input)[
                    len(container.get('command', [])):],
                num_workers, **kwargs)


def render_for_component(component, name: str, image: str,
                         executor_input: Dict[str, Any],
                         **kwargs) -> Dict[str, Any]:
  """The TFJob that runs a GenericTrainer on its `num_workers` replicas.

  Each replica runs TFX's KFP v2 entrypoint on GenericExecutor with
  `executor_input` (the ExecutorInput: artifacts, parameters, output file).
  The component's `max_restarts` gives the restart policy and backoff limit
  (`restart_settings`) unless those are passed; its `resources` and
  `pod_settings` reach every pod unless those are passed. Other arguments
  are `render`'s.
  """
  args = ['--executor_class_path', kfp_step.TRAINER_EXECUTOR,
          '--json_serialized_invocation_args', json.dumps(executor_input)]
  num_workers = most_workers(component.exec_properties)
  kwargs = {**restart_settings(
      component.exec_properties.get(MAX_RESTARTS_KEY), num_workers),
            'resources': component.resources,
            'pod_settings': component.pod_settings, **kwargs}
  return render(name, image, list(KFP_ENTRYPOINT), args, num_workers,
                **kwargs)


def validate(manifest: Dict[str, Any]) -> None:
  """Raises InvalidArgumentError unless `manifest` is a valid TFJob."""
  errors = sorted(
      jsonschema.Draft202012Validator(TFJOB_SCHEMA).iter_errors(manifest),
      key=lambda e: list(e.absolute_path))
  if errors:
    lines = '\n'.join(
        f"  at {'/'.join(str(p) for p in e.absolute_path) or '(top)'}: "
        f'{e.message}' for e in errors)
    raise InvalidArgumentError(
        'The TFJob manifest does not match the TFJob (kubeflow.org/v1) '
        f'schema:\n{lines}\nFix the arguments named above.')


def to_yaml(manifest: Dict[str, Any]) -> str:
  return yaml.safe_dump(manifest, sort_keys=False, width=1000)


def sdk_available() -> bool:
  return lazy.installed(kubeflow_training)


def _through_sdk(manifest: Dict[str, Any]) -> Dict[str, Any]:
  """The manifest rebuilt from the operator's SDK models, if installed.

  Builds `KubeflowOrgV1TFJob` from the models (and Kubernetes' own for the
  pod template, every field of it: `_pod_template`) and serializes it as the
  SDK's client would submit it.
  """
  if not sdk_available():
    return manifest
  spec = manifest['spec']
  job = models.KubeflowOrgV1TFJob(
      api_version=manifest['apiVersion'], kind=manifest['kind'],
      metadata=k8s.V1ObjectMeta(**manifest['metadata']),
      spec=models.KubeflowOrgV1TFJobSpec(
          run_policy=models.KubeflowOrgV1RunPolicy(
              active_deadline_seconds=spec['runPolicy'].get(
                  'activeDeadlineSeconds'),
              backoff_limit=spec['runPolicy'].get('backoffLimit'),
              clean_pod_policy=spec['runPolicy'].get('cleanPodPolicy')),
          tf_replica_specs={
              kind: models.KubeflowOrgV1ReplicaSpec(
                  replicas=replica['replicas'],
                  restart_policy=replica['restartPolicy'],
                  template=_pod_template(replica['template']))
              for kind, replica in spec['tfReplicaSpecs'].items()}))
  return k8s.ApiClient().sanitize_for_serialization(job)


def _pod_template(template: Dict[str, Any]):
  """The pod template (`{'metadata': ..., 'spec': ...}`, as Kubernetes
  spells it) as the Kubernetes client's `V1PodTemplateSpec`, every field
  kept: metadata, service account, volumes, security context, node
  selector, tolerations, containers with env, mounts and resources.
  `ApiClient().sanitize_for_serialization` gives the dict back."""

  class _Response:  # What ApiClient.deserialize reads: JSON in `data`.
    data = json.dumps(template)

  return k8s.ApiClient().deserialize(_Response(), 'V1PodTemplateSpec')


class TFJobKind(JobKind):
  """A Training Operator v1 TFJob."""
  name = KIND
  api_version = API_VERSION
  plural = 'tfjobs'
  job_key = 'tfjob'
  # The operator's `training.kubeflow.org/job-name` on each replica's pod.
  pod_selector = 'training.kubeflow.org/job-name'
  container = CONTAINER_NAME
  # pkg/apis/kubeflow.org/v1/common_types.go: JobSucceeded, JobFailed.
  complete, failed = 'Succeeded', 'Failed'
  operator = 'the Kubeflow Training Operator v1'

  def render(self, name, num_workers, max_restarts, env, **kwargs):
    return {self.job_key: render(
        name, num_workers=num_workers, env=env,
        **restart_settings(max_restarts, num_workers), **kwargs)}

  def render_for_step(self, job, executor_input, name, task=None,
                      num_workers=None, max_restarts=None, **kwargs):
    return render_for_step(job, executor_input, name, task=task,
                           num_workers=num_workers,
                           max_restarts=max_restarts, **kwargs)

  def render_for_component(self, component, name, image, executor_input,
                           **kwargs):
    return render_for_component(component, name, image, executor_input,
                                **kwargs)

  def longest_name(self, num_workers):
    return longest_name(num_workers)

  def check_name(self, name, num_workers):
    _check_name(name, num_workers)

  def sdk_available(self):
    return sdk_available()


JOB_KIND = TFJobKind()


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      description='Writes a TFJob (YAML) that runs the trainer step of a '
      'compiled Kubeflow pipeline on several replicas.')
  parser.add_argument('--pipeline', required=True,
                      help='The compiled pipeline (KubeflowV2DagRunner).')
  parser.add_argument('--executor-input', required=True,
                      help='JSON file: the ExecutorInput of the step (its '
                      'artifacts, parameters and output file).')
  parser.add_argument('--name', required=True, help='The TFJob name.')
  parser.add_argument('--namespace', default=None)
  parser.add_argument('--task', default=None,
                      help='The step (default: the one running '
                      'GenericExecutor).')
  parser.add_argument('--num-workers', type=int, default=None,
                      help="Replicas (default: the step's num_workers).")
  parser.add_argument('--max-restarts', type=int, default=None,
                      help="Restarts of all replicas from the checkpoint "
                      "after a pod died (default: the step's max_restarts, "
                      f'else {restarts(None)}; 0: a failed pod fails the '
                      'job).')
  parser.add_argument('--active-deadline-seconds', type=int, default=None)
  parser.add_argument('--service-account', default=None)
  args = parser.parse_args(argv)
  with open(args.executor_input) as f:
    executor_input = json.load(f)
  manifest = render_for_step(
      kfp_step.load(args.pipeline), executor_input, args.name, task=args.task,
      num_workers=args.num_workers, max_restarts=args.max_restarts,
      namespace=args.namespace,
      active_deadline_seconds=args.active_deadline_seconds,
      service_account=args.service_account)
  sys.stdout.write(to_yaml(manifest))
  return 0


if __name__ == '__main__':
  sys.exit(main())
