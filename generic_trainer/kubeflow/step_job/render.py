"""What the compile asks of a step with several workers (`to_env`, which
`launch.cluster_environment` reads back), and the job rendered from it:
its name (`job_name`), its pods' arguments (`pod_args`), its objects,
labelled ours with the spec's digest (`render`, `spec_digest`)."""

import hashlib
import json
import os
from typing import Any, Dict, List, Mapping, Optional

import attr

from generic_trainer.errors import StepJobError
from generic_trainer.keys import MAX_RESTARTS_KEY
from generic_trainer.keys import POD_SETTINGS_KEY
from generic_trainer.keys import STEP_JOB_ENV
from generic_trainer.keys import STEP_JOB_RECORD_ENV
from generic_trainer.kubeflow import pod_settings as pod_settings_lib
from generic_trainer.kubeflow import resources as resources_lib
from generic_trainer.kubeflow.kinds import check_kind
from generic_trainer.kubeflow.kinds import named
from generic_trainer.kubeflow.tfjob import KFP_ENTRYPOINT
from generic_trainer.plan.settings import most_workers

MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by'
MANAGED_BY = 'generic-trainer'
MODEL_URI_ANNOTATION = 'generic-trainer.tfx.dev/model-uri'
SPEC_ANNOTATION = 'generic-trainer.tfx.dev/spec-sha256'
NONCE_ANNOTATION = 'generic-trainer.tfx.dev/record-nonce'
# Where each pod's TFX entrypoint writes its executor output: its own /tmp,
# never the step's file (the step writes that one, last); the task's
# folder name is kept (TFX's entrypoint takes it as the task's id).
POD_OUTPUT_DIR = '/tmp/generic-trainer'


def to_env(kind: str, image: str,
           resources: Optional[resources_lib.Resources]) -> Dict[str, str]:
  """The variable the compile puts in the step's container: the job's
  `kind`, its `image` and every pod's `resources`."""
  check_kind(kind)
  return {'name': STEP_JOB_ENV, 'value': json.dumps({
      'kind': kind, 'image': image,
      'resources': resources.value() if resources is not None else None},
      sort_keys=True)}


def job_name(model_uri: str) -> str:
  """The job's name: the same for every attempt of one step (derived from
  its Model artifact URI), an RFC 1035 label that fits any node count
  `trainjob.longest_name` allows."""
  return 'gt-' + hashlib.sha256(model_uri.encode()).hexdigest()[:20]


def pod_args(argv: List[str]) -> List[str]:
  """The arguments of each pod: the step's own (TFX's KFP entrypoint
  flags), the ExecutorInput's output file moved to the pod's /tmp.

  Raises:
    StepJobError: the step was not started by TFX's KFP v2 entrypoint.
  """
  args, flag = list(argv), '--json_serialized_invocation_args'
  at = args.index(flag) + 1 if flag in args[:-1] else None
  if at is None or '--executor_class_path' not in args:
    raise StepJobError(
        "The GenericTrainer step was not started by TFX's KFP v2 entrypoint "
        f'({" ".join(KFP_ENTRYPOINT)}), so its pods cannot be '
        'started as it was. Expected the arguments --executor_class_path '
        f'and {flag}. Received: {[a[:80] for a in argv[:6]]}. Run the '
        'pipeline compiled by generic_trainer.kubeflow.compile.')
  invocation = json.loads(args[at])
  outputs = invocation.setdefault('outputs', {})
  step_file = outputs.get('outputFile') or 'task/executor_output.json'
  outputs['outputFile'] = os.path.join(
      POD_OUTPUT_DIR, os.path.basename(os.path.dirname(step_file)) or 'task',
      os.path.basename(step_file))
  args[at] = json.dumps(invocation)
  return args


def render(kind: str, name: str, image: str, args: List[str],
           namespace: str, exec_properties: Mapping[str, Any],
           resources: Optional[Dict[str, Any]], nonce: str,
           record_path: str, service_account: Optional[str] = None
           ) -> Dict[str, Dict[str, Any]]:
  """The objects of a job of `kind` (its `job_kind.JobKind.render`'s:
  {'trainjob': ..., 'runtime': ...} or {'tfjob': ...}), labelled ours, with
  the spec's digest and the record's nonce in their annotations. The pods
  run as `pod_settings`' service account, else as `service_account` (the
  step's, which holds the bucket's credentials), else as the namespace's
  `default`."""
  job_kind = named(kind)
  settings = pod_settings_lib.from_json(exec_properties.get(POD_SETTINGS_KEY))
  if service_account and not (settings and settings.service_account):
    settings = attr.evolve(settings or pod_settings_lib.PodSettings(),
                           service_account=service_account)
  # The record's place, and the job and its kind, by which its pods watch
  # their step (`bound`).
  env = {STEP_JOB_RECORD_ENV: json.dumps({'path': record_path,
                                          'job': name, 'kind': kind,
                                          'nonce': nonce})}
  common = dict(image=image, command=list(KFP_ENTRYPOINT), args=args,
                namespace=namespace,
                resources=resources_lib.from_value(resources),
                pod_settings=settings)
  restarts = exec_properties.get(MAX_RESTARTS_KEY)
  workers = most_workers(exec_properties)

  def objects_with(env):
    return job_kind.render(name, workers, restarts, env, **common)
  # The digest leaves out the record's nonce, which each attempt draws.
  digest = spec_digest(objects_with({STEP_JOB_RECORD_ENV: record_path}))
  objects = objects_with(env)
  for manifest in objects.values():
    metadata = manifest['metadata']
    metadata.setdefault('labels', {})[MANAGED_BY_LABEL] = MANAGED_BY
    metadata.setdefault('annotations', {}).update({
        SPEC_ANNOTATION: digest, NONCE_ANNOTATION: nonce})
  return objects


def spec_digest(objects: Mapping[str, Dict[str, Any]]) -> str:
  """What identifies a job's spec across the step's attempts."""
  return hashlib.sha256(json.dumps(dict(objects), sort_keys=True).encode()
                        ).hexdigest()
