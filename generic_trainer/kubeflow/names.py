"""The names a rendered TFJob, TrainJob or TrainingRuntime may have.

What the API server, the operators' admission webhooks and the objects the
operators create from the name accept, checked when the manifest is
rendered: a name refused at `kubectl apply`, or one whose pods or Services
could never be created, is refused here, naming the longest that fits. The
callers (`tfjob`, `trainjob`) say which rule applies and cite its source.
"""

import re
from typing import Any

from generic_trainer.errors import InvalidArgumentError

# Kubernetes' IsDNS1035Label and IsDNS1123Subdomain
# (k8s.io/apimachinery/pkg/util/validation/validation.go).
MAX_LABEL = 63
MAX_SUBDOMAIN = 253
# An RFC 1123 label: a container's, a volume's or a namespace's name.
DNS1123_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')
DNS1035_LABEL = re.compile(r'^[a-z]([-a-z0-9]*[a-z0-9])?$')
DNS1123_SUBDOMAIN = re.compile(
    r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')


def check_label(argument: str, name: Any, longest: int, why: str) -> None:
  """Refuses `name` unless it is an RFC 1035 label (a lowercase letter,
  then lowercase letters, digits or '-', ending with a letter or digit) of
  at most `longest` characters.

  Args:
    argument: The argument that holds the name, e.g. 'name'.
    name: The name.
    longest: The most characters allowed (63 or fewer).
    why: Who requires it and why the length, e.g. "the Training
      Operator's TFJob webhook".

  Raises:
    InvalidArgumentError: saying what is wrong and the longest allowed.
  """
  if not isinstance(name, str) or not DNS1035_LABEL.match(name):
    raise InvalidArgumentError(
        f"'{argument}' must be an RFC 1035 label: a lowercase letter, then "
        "lowercase letters, digits or '-', ending with a letter or digit, at "
        f'most {longest} characters ({why}). Received: {argument}={name!r}. '
        "Pass a name such as 'penguin-train'.")
  if len(name) > longest:
    raise InvalidArgumentError(
        f"'{argument}' must be at most {longest} characters ({why}). "
        f'Received: {argument}={name!r} ({len(name)} characters). Shorten it '
        f'to {longest} characters or fewer, e.g. '
        f'{name[:longest].rstrip("-")!r}.')


def check_namespace(argument: str, name: Any) -> None:
  """Refuses `name` unless it is a namespace's name: an RFC 1123 label
  (a digit may come first) of at most 63 characters
  (k8s.io/apimachinery's ValidateNamespaceName).

  Raises:
    InvalidArgumentError: saying what is wrong.
  """
  _check(argument, name, DNS1123_LABEL, MAX_LABEL,
         "a namespace's name, an RFC 1123 label: lowercase letters, digits "
         "or '-', starting and ending with a letter or digit",
         "a namespace such as 'kubeflow'")


def check_subdomain(argument: str, name: Any, why: str) -> None:
  """Refuses `name` unless it is a DNS-1123 subdomain (lowercase letters,
  digits, '-' and '.', each dot-separated part starting and ending with a
  letter or digit, at most 253 characters): any object's name.

  Raises:
    InvalidArgumentError: saying what is wrong.
  """
  _check(argument, name, DNS1123_SUBDOMAIN, MAX_SUBDOMAIN,
         "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', each "
         'part between dots starting and ending with a letter or digit',
         "a name such as 'penguin-train-runtime'", f' ({why})')


def _check(argument: str, name: Any, pattern, longest: int, what: str,
           example: str, why: str = '') -> None:
  if not isinstance(name, str) or not pattern.match(name) or (
      len(name) > longest):
    raise InvalidArgumentError(
        f"'{argument}' must be {what}, at most {longest} characters{why}. "
        f'Received: {argument}={name!r}. Pass {example}.')
