"""`python -m generic_trainer.kubeflow.step_job rbac SERVICE_ACCOUNT
NAMESPACE [TrainJob|TFJob]`: the Role and RoleBinding the step's service
account needs (`rbac.rbac`), as YAML for `kubectl apply -f -`."""

import sys
from typing import List, Optional

import yaml

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow.step_job.rbac import rbac


def main(argv: Optional[List[str]] = None) -> int:
  """`python -m generic_trainer.kubeflow.step_job rbac SERVICE_ACCOUNT
  NAMESPACE [TrainJob|TFJob]`: the Role and RoleBinding, as YAML for
  `kubectl apply -f -`."""
  argv = sys.argv[1:] if argv is None else argv
  if len(argv) not in (3, 4) or argv[0] != 'rbac':
    print(main.__doc__, file=sys.stderr)
    return 2
  try:
    documents = rbac(argv[1], argv[2], *argv[3:])
  except InvalidArgumentError as e:
    print(f'step_job: {e}', file=sys.stderr)
    return 2
  print(yaml.safe_dump_all(documents, sort_keys=False), end='')
  return 0


if __name__ == '__main__':
  sys.exit(main())
