"""Compiles a TFX pipeline for the Kubeflow Pipelines backend it will run on.

TFX's `KubeflowV2DagRunner` writes one PipelineSpec for every backend; the
backends differ in what they accept, and a spec one of them refuses fails
only when the run starts. `compile_pipeline` checks, for its `target`,
what can be known at compile time, and writes what that backend reads:

  - 'kubeflow': open-source Kubeflow Pipelines 2.x (read against KFP 2.17's
    source). Its API server accepts only pipeline spec schema 2.1.0
    (`backend/src/apiserver/template/v2_template.go`) and its driver
    resolves only 2.1 constants (`backend/src/v2/driver/driver.go` in 2.4
    and 2.5, `resolve.go` from 2.14), so the
    spec is 2.1. Its Argo compiler refuses a resolver node
    (`backend/src/v2/compiler/argocompiler/dag.go`: "resolver executors
    not implemented"), so a pipeline with one (a latest-blessed-model
    baseline) is refused here. Its launcher keeps artifacts under gs://,
    s3:// or minio:// only (`backend/src/v2/component/launcher_v2.go`,
    `LocalPathForURI`), and the step's TFX code opens the URIs with
    TensorFlow's file systems, which read gs:// and neither minio:// nor
    s3:// (that needs tensorflow-io's plugin, which is not installed): the
    pipeline root must be gs://. The YAML package sets it as the spec's
    `defaultPipelineRoot` (TFX leaves it out, and KFP would fall back to
    its own `minio://mlpipeline/v2/artifacts`). The driver writes an
    accelerator's type straight into the pod's limits
    (`backend/src/v2/driver/driver.go`): it must be a Kubernetes resource
    name such as 'nvidia.com/gpu'. Pod settings the platform spec carries
    go in a second YAML document (kfp-kubernetes' `KubernetesExecutorConfig`),
    in the forms the cluster's KFP release parses (`kfp_release`, default
    the oldest supported: `generic_trainer.kubeflow.kfp_platform`).
  - 'vertex': Vertex AI Pipelines. A gs:// root; accelerators by Vertex's
    names ('NVIDIA_TESLA_T4'); resolvers run; the `.json` PipelineJob.
  - 'kfp-local': KFP's local runner (`kfp.local`, whole pipelines from
    KFP SDK 2.7 on), which runs each step's container with the pipeline
    root, a local absolute path, mounted at the same path
    (`sdk/python/kfp/local/docker_task_handler.py`) and no resolver
    (`sdk/python/kfp/local/orchestrator/task_executor.py`).

Every target gets the GenericTrainer's `pod_settings` environment in the
step's container spec; what a target cannot carry is named in a warning
(`pod_settings.PodSettings.not_carried_by_kfp`).
"""

import json
import logging
import os
import re
from typing import Any, Dict, Optional

import yaml

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import kfp_platform
from generic_trainer.kubeflow import kinds
from generic_trainer.kubeflow import resources
from generic_trainer.kubeflow.step_job.render import to_env
from generic_trainer.plan.settings import most_workers
from generic_trainer.system import atomic_files
from generic_trainer.system.lazy import kubeflow_v2_dag_runner

TARGETS = ('kubeflow', 'vertex', 'kfp-local')
# step_job's default: a TrainJob on 'kubeflow', nothing elsewhere.
DEFAULT_STEP_JOB = 'default'  # pylint: disable=invalid-name
KFP_VERSION_READ = '2.17.0'
# What a step that launches a job asks for while it waits (KFP's
# ResourceSpec, which every supported driver reads: driver.go, memory as
# "%vG"). Its process, TFX's KFP entrypoint with GenericExecutor and the
# step's job code imported, peaked at 879 MB (its VmHWM: tests/test_step_job.py
# ::test_the_waiting_step_fits_in_the_memory_it_asks_for prints it), so 2 GB;
# half a core. A step asking for
# nothing is refused where a ResourceQuota sets requests.memory or
# requests.cpu ("must specify"), and evicted first (BestEffort).
WAITING_STEP_RESOURCES = {'cpuLimit': 0.5, 'cpuRequest': 0.5,
                          'memoryLimit': 2.0, 'memoryRequest': 2.0}
# Vertex's accelerator names are an enum: upper case and underscores.
_VERTEX_ACCELERATOR = re.compile(r'^[A-Z][A-Z0-9_]*$')
_ROOTS = {
    'kubeflow': ('gs://',),
    'vertex': ('gs://',),
}


def check_target(target: str) -> str:
  if target not in TARGETS:
    raise InvalidArgumentError(
        f'Unknown Kubeflow target {target!r}. Expected one of {TARGETS}: '
        "'kubeflow' (open-source Kubeflow Pipelines 2.x), 'vertex' (Vertex "
        "AI Pipelines), 'kfp-local' (KFP's local runner). Received: "
        f'target={target!r}. Pass one of those.')
  return target


def check_pipeline_root(target: str, root: Any) -> None:
  """Refuses a pipeline root the target's launcher or TFX cannot use."""
  if not isinstance(root, str):  # A runtime parameter: known at run time.
    return
  if target == 'kfp-local':
    if not os.path.isabs(root) or '://' in root:
      raise InvalidArgumentError(
          "The 'kfp-local' target needs a local absolute pipeline root: "
          'kfp.local mounts it into every step at the same path. Received: '
          f'pipeline_root={root!r}. Pass a folder such as /tmp/penguin-root.')
    return
  if root.startswith(_ROOTS[target]):
    return
  why = {
      'minio://': "TensorFlow's file systems cannot open minio:// (KFP's "
                  'default root, minio://mlpipeline/v2/artifacts)',
      's3://': "TensorFlow reads s3:// only through tensorflow-io's file "
               'system plugin, which this package does not install',
  }
  scheme = next((s for s in why if root.startswith(s)), None)
  reason = why[scheme] if scheme else (
      "the KFP launcher keeps artifacts in object storage only: it refuses "
      "a local path ('unsupported storage scheme', launcher_v2.go)"
      if target == 'kubeflow' else 'Vertex AI Pipelines writes to GCS only')
  raise InvalidArgumentError(
      f'The pipeline root {root!r} does not work on the {target!r} target: '
      f'{reason}. Expected a gs:// root. Received: pipeline_root={root!r}. '
      "Pass a root such as 'gs://BUCKET/penguin' (the pods need the "
      'bucket\'s credentials: a service account with access to it).')


def check_accelerator(target: str, accelerator_type: Optional[str],
                      component_id: str = 'GenericTrainer') -> None:
  """Refuses the other target's spelling of an accelerator."""
  if not accelerator_type:
    return
  if target == 'vertex':
    if _VERTEX_ACCELERATOR.match(accelerator_type):
      return
    raise InvalidArgumentError(
        f'{component_id}: Vertex AI names accelerators by its enum, not by '
        f'a Kubernetes resource name. Expected e.g. \'NVIDIA_TESLA_T4\', '
        f"'NVIDIA_L4', 'TPU_V3'. Received: accelerator_type="
        f'{accelerator_type!r} (the spelling of open-source Kubeflow '
        'Pipelines). Pass the Vertex name of the accelerator.')
  if '/' in accelerator_type:
    return
  suggestion = resources.resource_name(accelerator_type)
  raise InvalidArgumentError(
      f'{component_id}: open-source Kubeflow Pipelines writes the '
      "accelerator type into the pod's resource limits as it is "
      '(backend/src/v2/driver/driver.go), so it must be a Kubernetes '
      f"resource name. Expected e.g. {suggestion!r}. Received: "
      f'accelerator_type={accelerator_type!r} (Vertex AI\'s spelling). Pass '
      f'{suggestion!r}, or compile with target=\'vertex\'.')


def compile_pipeline(pipeline, output_path: str, image: str,
                     target: str = 'kubeflow',
                     step_job: Optional[str] = DEFAULT_STEP_JOB,
                     kfp_release: str = kfp_platform.OLDEST
                     ) -> Dict[str, Any]:
  """Compiles `pipeline` for `target` and writes it to `output_path`.

  Args:
    pipeline: A `tfx.dsl.Pipeline`.
    output_path: `.yaml`: the PipelineSpec package Kubeflow Pipelines
      uploads (with a second document, the kfp-kubernetes platform spec,
      when a GenericTrainer's pod settings need one); `.json`: the whole
      PipelineJob (what Vertex AI takes).
    image: The image every step runs in (`make image`).
    target: 'kubeflow', 'vertex' or 'kfp-local' (see the module).
    step_job: What a GenericTrainer step with several workers launches
      for them on 'kubeflow' (`step_job.step.run`): 'TrainJob' (Kubeflow
      Trainer v2, the default), 'TFJob' (Training Operator v1), or None:
      the step trains in its own pod alone. On 'kfp-local' none by default
      (a step there reaches no cluster unless it is given one); refused on
      'vertex', where the step has no Kubernetes API.
    kfp_release: The Kubeflow Pipelines backend release the cluster runs
      (`kfp_platform.RELEASES`; default the oldest): the platform spec
      holds only the fields it parses, and a setting it cannot carry is
      refused. Not read on 'vertex'.

  Returns:
    The PipelineJob as a dict, with 'platformSpec' added when written.

  Raises:
    InvalidArgumentError: what the target's backend would refuse.
  """
  check_target(target)
  check_pipeline_root(target, pipeline.pipeline_info.pipeline_root)
  step_job = _check_step_job(target, step_job)
  kfp_platform.check_release(kfp_release)
  trainers = [c for c in pipeline.components
              if hasattr(c, 'pod_settings') and hasattr(c, 'resources')]
  for component in trainers:
    if component.resources is not None:
      check_accelerator(target, component.resources.accelerator_type,
                        component.id)
  runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
      config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
          default_image=image, use_pipeline_spec_2_1=True),
      output_dir=os.path.dirname(os.path.abspath(output_path)),
      output_filename=os.path.basename(output_path))
  job = runner.run(pipeline, write_out=False)
  spec = job['pipelineSpec']
  _check_no_resolver(target, spec)
  if target != 'vertex' and isinstance(pipeline.pipeline_info.pipeline_root,
                                       str):
    spec['defaultPipelineRoot'] = pipeline.pipeline_info.pipeline_root
  executors = {}
  for component in trainers:
    label = spec['components'][spec['root']['dag']['tasks'][component.id][
        'componentRef']['name']]['executorLabel']
    container = spec['deploymentSpec']['executors'][label]['container']
    env = []
    launches_job = bool(step_job) and most_workers(
        component.exec_properties) > 1
    if launches_job:
      # The job's pods train and ask for the trainer's resources; the step
      # only waits for them, and asks for what waiting takes (no GPU
      # held idle).
      env.append(to_env(step_job, image, component.resources))
      container['resources'] = dict(WAITING_STEP_RESOURCES)
    settings = component.pod_settings
    if settings is not None and settings.env:
      env += settings.env_list()
    if env:
      container['env'] = env
    if target != 'vertex':
      config = kfp_platform.executor_config(
          settings, component.resources, kfp_release, component.id,
          trains_in_step=not launches_job)
      if config:
        executors[label] = config
      gap = kfp_platform.restricted_gap(kfp_release)
      if gap and target == 'kubeflow':
        logging.warning('%s: %s.', component.id, gap)
    if settings is None:
      continue
    missing = settings.not_carried_by_kfp()
    if target == 'vertex':
      missing = [f'{key} (Vertex AI runs the step in its own pod)'
                 for key in ('annotations', 'labels', 'volumes',
                             'security_context')
                 if getattr(settings, key)] + missing
    for item in missing:
      logging.warning('%s: the compiled %s step does not carry %s; the '
                      'TFJob and TrainJob pods do.', component.id, target,
                      item)
  if executors:
    job['platformSpec'] = {'platforms': {'kubernetes': {
        'deploymentSpec': {'executors': executors}}}}
  _write(output_path, job)
  return job


def _check_step_job(target: str, step_job: Optional[str]) -> Optional[str]:
  if step_job is DEFAULT_STEP_JOB:
    return kinds.DEFAULT.name if target == 'kubeflow' else None
  if step_job is None:
    return None
  kinds.check_kind(step_job)
  if target == 'vertex':
    raise InvalidArgumentError(
        f'step_job={step_job!r} cannot be launched from a Vertex AI step: '
        'Vertex runs the step in its own project, with no Kubernetes API to '
        'create a job in. Expected step_job=None on Vertex. Received: '
        f'{step_job!r}. Leave it out: on Vertex the step trains its workers '
        'in its own pod, or run the workers as a Vertex custom job.')
  return step_job


def _check_no_resolver(target: str, spec: Dict[str, Any]) -> None:
  if target == 'vertex':
    return
  resolvers = sorted(
      task for task, value in spec['root']['dag']['tasks'].items()
      if 'resolver' in spec['deploymentSpec']['executors'].get(
          spec['components'][value['componentRef']['name']]['executorLabel'],
          {}))
  if resolvers:
    where = ('its Argo compiler refuses them (backend/src/v2/compiler/'
             'argocompiler/dag.go: "resolver executors not implemented")'
             if target == 'kubeflow' else
             'kfp.local runs container and importer steps only')
    raise InvalidArgumentError(
        f'The pipeline has resolver steps {resolvers}, which the {target!r} '
        f'target cannot run: {where}. Expected a pipeline without a '
        'Resolver node. Received: the resolver steps named. Leave them out '
        '(the penguin pipeline: --no-baseline, its default on this target: '
        "the Evaluator then compares with no baseline), or compile with "
        "target='vertex'.")


def _write(output_path: str, job: Dict[str, Any]) -> None:
  """Writes the package atomically (a reader never sees half of it)."""
  if output_path.endswith(('.yaml', '.yml')):
    documents = [job['pipelineSpec']]
    if 'platformSpec' in job:
      documents.append(job['platformSpec'])
    text = yaml.safe_dump_all(documents, sort_keys=True)
  else:
    text = json.dumps(job, indent=2, sort_keys=True)
  folder = os.path.dirname(os.path.abspath(output_path))
  os.makedirs(folder, exist_ok=True)
  atomic_files.write_text(output_path, text)
