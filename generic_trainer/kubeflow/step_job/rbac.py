"""The Role and RoleBinding that let the step's service account make
exactly the calls of its job's kind (`job_kind.JobKind.api_calls`), as
`python -m generic_trainer.kubeflow.step_job rbac` prints them."""

import hashlib
from typing import Any, Dict, List, Tuple

from generic_trainer.kubeflow import names
from generic_trainer.kubeflow.kinds import DEFAULT
from generic_trainer.kubeflow.kinds import named
from generic_trainer.kubeflow.step_job.render import MANAGED_BY
from generic_trainer.kubeflow.step_job.render import MANAGED_BY_LABEL


def rbac(service_account: str, namespace: str, kind: str = DEFAULT.name
         ) -> List[Dict[str, Any]]:
  """The Role and RoleBinding that let `service_account` (the step's pod's)
  make exactly the calls of `kind`'s `api_calls` in `namespace`.

  Raises:
    InvalidArgumentError: a name Kubernetes refuses, or an unknown kind.
  """
  job_kind = named(kind)
  names.check_subdomain('service_account', service_account,
                        "a ServiceAccount's name")
  names.check_namespace('namespace', namespace)
  role = f'generic-trainer-step-{job_kind.name.lower()}'
  binding = f'{role}-{service_account}'
  if len(binding) > names.MAX_SUBDOMAIN:
    # Cut, and told apart from another long account's by a digest.
    digest = hashlib.sha256(service_account.encode()).hexdigest()[:10]
    binding = (binding[:names.MAX_SUBDOMAIN - 11].rstrip('-.') + '-' +
               digest)
  rules: Dict[Tuple[str, str], List[str]] = {}
  for group, resource, verb in job_kind.api_calls:
    rules.setdefault((group, resource), []).append(verb)
  return [
      {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'Role',
       'metadata': {'name': role, 'namespace': namespace,
                    'labels': {MANAGED_BY_LABEL: MANAGED_BY}},
       'rules': [{'apiGroups': [group], 'resources': [resource],
                  'verbs': verbs}
                 for (group, resource), verbs in rules.items()]},
      {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'RoleBinding',
       'metadata': {'name': binding,
                    'namespace': namespace,
                    'labels': {MANAGED_BY_LABEL: MANAGED_BY}},
       'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'Role',
                   'name': role},
       'subjects': [{'kind': 'ServiceAccount', 'name': service_account,
                     'namespace': namespace}]}]
