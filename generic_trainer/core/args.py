"""Checks of GenericTrainer's arguments, shared by the component (at
pipeline construction) and the executor (at run time, where a compiled
pipeline or another orchestrator may hand over anything)."""

from typing import Any, Optional

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import KERAS_VERSIONS, RUN_FN_KEY, SOURCE_KEYS
from generic_trainer.keys import DEFAULT_MAX_RESTARTS


def check_one_source(**sources: Any) -> str:
  """Exactly one of module_file/module_path/run_fn; returns which."""
  given = [name for name in SOURCE_KEYS if sources.get(name)]
  if len(given) != 1:
    raise InvalidArgumentError(
        "Exactly one of 'module_file', 'module_path' or 'run_fn' must be "
        f"supplied. Received: {', '.join(given) or 'none of them'}.")
  if given == [RUN_FN_KEY] and isinstance(sources[RUN_FN_KEY], str):
    check_run_fn_path(sources[RUN_FN_KEY])
  return given[0]


def check_run_fn_path(run_fn: str) -> None:
  if '.' not in run_fn.strip('.'):
    raise InvalidArgumentError(
        "'run_fn' must be a dotted path such as 'my_pkg.my_module.run_fn'. "
        f'Received: run_fn={run_fn!r}.')


def check_keras_version(keras_version: Optional[str]) -> None:
  if keras_version is not None and keras_version not in KERAS_VERSIONS:
    raise InvalidArgumentError(
        f"'keras_version' must be one of {KERAS_VERSIONS} or None. "
        f'Received: keras_version={keras_version!r}.')


def check_flag(name: str, value: Any) -> None:
  """A True/False setting, or None."""
  if value is not None and not isinstance(value, bool):
    raise InvalidArgumentError(
        f"'{name}' must be True, False or None. Received: {name}={value!r} "
        f'that is a {type(value).__name__}.')


def check_num_steps(name: str, num_steps: int) -> None:
  if num_steps < 0:
    raise InvalidArgumentError(
        f"'{name}.num_steps' must be positive, or unset to read the split "
        f'once. Received: num_steps={num_steps}.')


def check_custom_config(custom_config: Any) -> None:
  if custom_config is not None and not isinstance(custom_config, dict):
    raise InvalidArgumentError(
        "'custom_config' must be a dict. Received: custom_config that is a "
        f'{type(custom_config).__name__}.')


def check_max_restarts(max_restarts: Any) -> None:
  if max_restarts is not None and (
      isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or
      max_restarts < 0):
    raise InvalidArgumentError(
        "'max_restarts' must be a non-negative int: how many times a "
        'multi-worker training restarts its workers from the last checkpoint '
        'after one died (0: the execution fails at the first death; None: '
        f'{DEFAULT_MAX_RESTARTS}). Received: max_restarts={max_restarts!r}.')
