"""The kinds of job a Kubeflow step can launch for its workers (`KINDS`,
each a `job_kind.JobKind` in its own module), and finding one by its name
(`named`): the compile checks the name it is given, the step finds the
kind the compile named."""

from typing import Any, Tuple

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import tfjob
from generic_trainer.kubeflow import trainjob
from generic_trainer.kubeflow.job_kind import JobKind

KINDS: Tuple[JobKind, ...] = (trainjob.JOB_KIND, tfjob.JOB_KIND)
NAMES = tuple(kind.name for kind in KINDS)
# What a step launches on 'kubeflow' unless told otherwise (the compile's
# step_job), and whose Role `step_job.rbac` renders unless told.
DEFAULT = trainjob.JOB_KIND


def named(name: Any) -> JobKind:
  """The kind called `name` ('TrainJob', 'TFJob').

  Raises:
    InvalidArgumentError: no kind is called `name`.
  """
  for kind in KINDS:
    if kind.name == name:
      return kind
  raise InvalidArgumentError(
      f'The job a Kubeflow step launches for its workers must be one of '
      f'{NAMES}: a Kubeflow Trainer v2 TrainJob (our TrainingRuntime) or '
      f'a Training Operator v1 TFJob. Received: {name!r}. Pass one of '
      'those.')


def check_kind(kind: Any) -> str:
  """`kind`, the name of one of `KINDS`.

  Raises:
    InvalidArgumentError: it is not.
  """
  return named(kind).name
