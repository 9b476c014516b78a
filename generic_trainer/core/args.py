"""Checks of GenericTrainer's arguments, shared by the component (at
pipeline construction) and the executor (at run time, where a compiled
pipeline or another orchestrator may hand over anything)."""

from typing import Any, Optional, Tuple

from generic_trainer.errors import InvalidArgumentError, SpecError
from generic_trainer.keys import BACKENDS, DEFAULT_STRATEGY, JAX_BACKEND
from generic_trainer.keys import BACKEND_KEY, KERAS3, KERAS_VERSION_KEY
from generic_trainer.keys import KERAS_VERSIONS, RUN_FN_KEY, SOURCE_KEYS
from generic_trainer.keys import DEFAULT_MAX_RESTARTS, TF_KERAS
from generic_trainer.keys import NUM_WORKERS_KEY

# For several devices of one machine on JAX (tested in
# tests/test_jax_backend.py): Keras's own data parallelism.
_JAX_DEVICES_HINT = (
    'for several devices of one machine, call keras.distribution.'
    'set_distribution(keras.distribution.DataParallel()) at the start of '
    'build_model')


def check_one_source(**sources: Any) -> str:
  """Exactly one of module_file/module_path/run_fn; returns which."""
  given = [name for name in SOURCE_KEYS if sources.get(name)]
  if len(given) != 1:
    raise InvalidArgumentError(
        "Exactly one of 'module_file', 'module_path' or 'run_fn' must be "
        f"supplied. Received: {', '.join(given) or 'none of them'}. Pass "
        'one: module_file is the usual choice.')
  if given == [RUN_FN_KEY] and isinstance(sources[RUN_FN_KEY], str):
    check_run_fn_path(sources[RUN_FN_KEY])
  return given[0]


def check_run_fn_path(run_fn: str) -> None:
  if '.' not in run_fn.strip('.'):
    raise InvalidArgumentError(
        "'run_fn' must be a dotted path such as 'my_pkg.my_module.run_fn'. "
        f'Received: run_fn={run_fn!r}. Pass the module and the name, or '
        'give module_file instead.')


def check_keras_version(keras_version: Optional[str],
                        names: Any = None) -> None:
  """`names` (a `plan.Names`) spells the setting as the entry point does."""
  if keras_version is not None and keras_version not in KERAS_VERSIONS:
    setting, value = _spell(names, KERAS_VERSION_KEY, keras_version)
    raise InvalidArgumentError(
        f'{setting} must be one of {", ".join(KERAS_VERSIONS)}, or unset '
        f'(whatever tf.keras is in the process). Received: {value}. Use '
        f'{TF_KERAS} for module files written for tf.keras 2, {KERAS3} for '
        'Keras 3.')


def check_backend(backend: Optional[str], names: Any = None) -> None:
  if backend is not None and backend not in BACKENDS:
    setting, value = _spell(names, BACKEND_KEY, backend)
    raise InvalidArgumentError(
        f'{setting} must be one of {", ".join(BACKENDS)}, or unset (the '
        f"TrainSpec's own backend, else TensorFlow). Received: {value}. "
        "Leave it out to train on the TrainSpec's backend, or set one of "
        'those.')


def _spell(names: Any, key: str, value: Any):
  """(the setting's name, `name=value`) as `names` spells them."""
  if names is None:
    return f"'{key}'", f'{key}={value!r}'
  return names.setting(key), names.value(key, value)


def resolve_backend(setting: Optional[str], spec_class: Optional[type],
                    names: Any = None) -> Optional[str]:
  """The backend a training runs on: the component's `backend` (or the
  command's --backend), else the TrainSpec's `backend`, else None (this
  process's Keras backend: TensorFlow unless KERAS_BACKEND says otherwise).
  `core.plan` is its one caller.

  Raises:
    SpecError: the TrainSpec's `backend` is not one of BACKENDS.
    InvalidArgumentError: the setting and the TrainSpec's `backend` differ.
  """
  spec_backend = getattr(spec_class, 'backend', None)
  if spec_backend is not None and spec_backend not in BACKENDS:
    raise SpecError(
        f'TrainSpec.backend must be one of {BACKENDS} or None (TensorFlow '
        f'unless the component says otherwise). Received: '
        f'{spec_class.__name__}.backend={spec_backend!r}. Set backend to one '
        'of those, or remove it.')
  if setting and spec_backend and setting != spec_backend:
    _, value = _spell(names, BACKEND_KEY, setting)
    raise InvalidArgumentError(
        f"The component's backend and the TrainSpec's disagree. Expected "
        f'one of them, or the same backend in both. Received: {value}, '
        f'{spec_class.__name__}.backend={spec_backend!r}. Remove backend '
        'from the component (or --backend), or change the TrainSpec.')
  return setting or spec_backend


def check_backend_fits(backend: Optional[str], source: str,
                       keras_version: Optional[str] = None,
                       num_workers: Optional[int] = None,
                       cluster_size: int = 1,
                       strategy: Optional[str] = None,
                       names: Any = None) -> None:
  """Refuses what cannot train on JAX: tf.keras 2, several workers, a
  tf.distribute strategy. Nothing to refuse on another backend.

  Args:
    backend: The backend the training runs on.
    source: Where it was set, for the message: "backend='jax'" or
      "PenguinSpec.backend='jax'".
    keras_version: The component's `keras_version`.
    num_workers: The component's `num_workers`.
    cluster_size: The processes of this process's TF_CONFIG cluster (1
      without one).
    strategy: The component's `strategy`.
    names: How the entry point spells its settings (a `plan.Names`).

  Raises:
    InvalidArgumentError: saying why and what to do.
  """
  if backend != JAX_BACKEND:
    return
  if keras_version == TF_KERAS:
    setting, value = _spell(names, KERAS_VERSION_KEY, keras_version)
    _, on_tf = _spell(names, BACKEND_KEY, 'tensorflow')
    raise InvalidArgumentError(
        f'{source} trains with Keras 3 on JAX, but {value} asks for tf.keras '
        f'2, which runs on TensorFlow only. Expected Keras 3 on JAX. '
        f'Received: {source}, {value}. '
        f'Leave {setting} unset (or {KERAS3}) to train on JAX, or train on '
        f'TensorFlow ({on_tf}).')
  workers = max(num_workers or 1, cluster_size)
  if workers > 1:
    what = (f'num_workers={num_workers}' if (num_workers or 1) > 1 else
            f'a TF_CONFIG cluster of {cluster_size}')
    raise InvalidArgumentError(
        f'{source} cannot train with {workers} workers: GenericTrainer\'s '
        'workers train together through tf.distribute\'s '
        "MultiWorkerMirroredStrategy, which Keras's JAX trainer ignores, so "
        'each worker would train alone on its share of the data, without a '
        f'word. Expected one process on JAX. Received: {source}, {what}. '
        'Train on JAX in one process '
        f'({_JAX_DEVICES_HINT}), or with several workers on TensorFlow '
        "(backend='tensorflow').")
  if strategy not in (None, DEFAULT_STRATEGY):
    raise InvalidArgumentError(
        f'{source} cannot train under strategy={strategy!r}: that is a '
        "tf.distribute strategy, which Keras's JAX trainer ignores (the "
        f'model would train on one device). Expected no strategy on JAX. '
        f'Received: {source}, '
        f"strategy={strategy!r}. Leave strategy unset on JAX "
        f"({_JAX_DEVICES_HINT}), or use backend='tensorflow'.")


def check_flag(name: str, value: Any) -> None:
  """A True/False setting, or None."""
  if value is not None and not isinstance(value, bool):
    raise InvalidArgumentError(
        f"'{name}' must be True, False or None. Received: {name}={value!r} "
        f'that is a {type(value).__name__}. Pass True or False.')


def check_num_steps(name: str, num_steps: int) -> None:
  if num_steps < 0:
    raise InvalidArgumentError(
        f"'{name}.num_steps' must be positive, or unset to read the split "
        f'once. Received: num_steps={num_steps}. Set a positive number, or '
        'leave it unset.')


def check_custom_config(custom_config: Any) -> None:
  if custom_config is not None and not isinstance(custom_config, dict):
    raise InvalidArgumentError(
        "'custom_config' must be a dict. Received: custom_config that is a "
        f'{type(custom_config).__name__}. Pass a dict, e.g. '
        "custom_config={'epochs': 5}.")


def max_restarts(value: Optional[int]) -> int:
  """The restarts a local worker group gets: the setting, else the
  default."""
  return DEFAULT_MAX_RESTARTS if value is None else value


def check_max_restarts(max_restarts: Any) -> None:
  if max_restarts is not None and (
      isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or
      max_restarts < 0):
    raise InvalidArgumentError(
        "'max_restarts' must be a non-negative int: how many times a "
        'multi-worker training restarts its workers from the last checkpoint '
        'after one died (0: the execution fails at the first death; None: '
        f'{DEFAULT_MAX_RESTARTS}). Received: max_restarts={max_restarts!r}. '
        'Set 0 or more, or leave it unset.')


def worker_range(num_workers: Any, names: Any = None
                 ) -> Optional[Tuple[int, int]]:
  """(at least, at most) of a `num_workers` setting: an int N is (N, N), a
  range 'MIN:MAX' (or a (MIN, MAX) pair) lets a local group shrink to MIN
  workers when one cannot come back, and grow back to MAX; None: unset.

  Raises:
    InvalidArgumentError: not a positive int nor such a range (row 260).
  """
  if num_workers is None:
    return None
  value = num_workers
  if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
    return value, value
  pair = None
  if isinstance(value, str) and value.count(':') == 1:
    pair = value.split(':')
  elif isinstance(value, (tuple, list)) and len(value) == 2:
    pair = list(value)
  try:
    low, high = (int(v) for v in pair) if pair else (0, 0)
    ok = pair is not None and not any(isinstance(v, (bool, float))
                                      for v in pair)
  except (TypeError, ValueError):
    ok = False
  if ok and 1 <= low <= high:
    return low, high
  setting, shown = _spell(names, NUM_WORKERS_KEY, num_workers)
  raise InvalidArgumentError(
      f'{setting} must be a positive int (the processes that train '
      'together) or a range MIN:MAX of them (a local group restarts with '
      'fewer workers, down to MIN, when one cannot come back, and grows '
      'back to MAX). Expected e.g. 2 or "2:3", with 1 <= MIN <= MAX. '
      f'Received: {shown}. Set a positive int, a range such as "2:3", or '
      'leave it unset.')


def worker_range_text(bounds: Tuple[int, int]) -> Any:
  """The setting `worker_range` reads back as `bounds`: N, or 'MIN:MAX'."""
  low, high = bounds
  return low if low == high else f'{low}:{high}'

