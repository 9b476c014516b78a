"""The settings of a training, checked: each alone and all together.

`check_settings` is the one check of the settings the component (at
pipeline construction), the command (on its flags) and the plan (at run
time, where a compiled pipeline or another orchestrator may hand over
anything) call; each message names the setting as the entry point spells
it (`entry_points.EntryPoint`). Beside each fact its check and, where the
settings leave a choice, the function that makes it (`choose_strategy`,
`choose_backend`, `restarts`): the plan's steps (`plan.plan.resolve`) call
them in order and decide nothing themselves.
"""

from typing import Any, Mapping, Optional, Tuple

from generic_trainer.errors import InvalidArgumentError, SpecError
from generic_trainer.keys import BACKENDS, BACKEND_KEY, DEFAULT_MAX_RESTARTS
from generic_trainer.keys import DEFAULT_STRATEGY, JAX_BACKEND, KERAS3
from generic_trainer.keys import KERAS_VERSIONS, KERAS_VERSION_KEY
from generic_trainer.keys import MULTI_WORKER_MIRRORED, NUM_WORKERS_KEY
from generic_trainer.keys import STRATEGIES, TF_KERAS
from generic_trainer.plan.entry_points import COMPONENT, EntryPoint


def check_settings(names: EntryPoint = COMPONENT, *,
                   keras_version: Any = None, backend: Any = None,
                   num_workers: Any = None, strategy: Any = None,
                   max_restarts: Any = None, cluster_size: int = 1) -> None:
  """Refuses settings that are wrong on their own or together.

  Args:
    names: The entry point that asks, for its spelling of the settings.
    keras_version, backend, num_workers, strategy, max_restarts: The
      settings, as the component takes them (None: unset).
    cluster_size: The processes of the cluster this process is a member of
      (1: none).

  Raises:
    InvalidArgumentError: naming the setting as `names` spells it.
  """
  check_keras_version(keras_version, names)
  check_backend(backend, names)
  bounds = worker_range(num_workers, names)
  check_strategy(bounds[1] if bounds else None, strategy)
  check_max_restarts(max_restarts)
  check_backend_fits(backend, names.value(BACKEND_KEY, backend),
                     keras_version, bounds[1] if bounds else None,
                     cluster_size, strategy, names)


# The checks of single settings, shared by the component (at pipeline
# construction), the command (on its flags) and `resolve` (at run time,
# where a compiled pipeline or another orchestrator may hand over anything).
# For several devices of one machine on JAX (tested in
# tests/test_jax_backend.py): Keras's own data parallelism.
_JAX_DEVICES_HINT = (
    'for several devices of one machine, call keras.distribution.'
    'set_distribution(keras.distribution.DataParallel()) at the start of '
    'build_model')


def check_keras_version(keras_version: Optional[str],
                        names: EntryPoint = COMPONENT) -> None:
  """`names` spells the setting as the entry point does."""
  if keras_version is not None and keras_version not in KERAS_VERSIONS:
    setting = names.setting(KERAS_VERSION_KEY)
    value = names.value(KERAS_VERSION_KEY, keras_version)
    raise InvalidArgumentError(
        f'{setting} must be one of {", ".join(KERAS_VERSIONS)}, or unset '
        f'(whatever tf.keras is in the process). Received: {value}. Use '
        f'{TF_KERAS} for module files written for tf.keras 2, {KERAS3} for '
        'Keras 3.')


def check_backend(backend: Optional[str], names: EntryPoint = COMPONENT) -> None:
  if backend is not None and backend not in BACKENDS:
    setting = names.setting(BACKEND_KEY)
    value = names.value(BACKEND_KEY, backend)
    raise InvalidArgumentError(
        f'{setting} must be one of {", ".join(BACKENDS)}, or unset (the '
        f"TrainSpec's own backend, else TensorFlow). Received: {value}. "
        "Leave it out to train on the TrainSpec's backend, or set one of "
        'those.')


def choose_backend(setting: Optional[str], spec_class: Optional[type],
                    names: EntryPoint = COMPONENT) -> Optional[str]:
  """The backend a training runs on: the component's `backend` (or the
  command's --backend), else the TrainSpec's `backend`, else None (this
  process's Keras backend: TensorFlow unless KERAS_BACKEND says otherwise).
  The plan's backend step is its one caller.

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
    value = names.value(BACKEND_KEY, setting)
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
                       names: EntryPoint = COMPONENT) -> None:
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
    setting = names.setting(KERAS_VERSION_KEY)
    value = names.value(KERAS_VERSION_KEY, keras_version)
    on_tf = names.value(BACKEND_KEY, 'tensorflow')
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


def steps(value: Any, setting: str, received: str) -> Optional[int]:
  """The one rule of a number of train or eval steps, for every entry point
  (the component's `train_args`/`eval_args` at construction and at run
  time, the command's --steps and --eval-steps): a positive int is that
  many steps; 0 or None is unset (None: the split is read once), as TFX's
  Trainer reads `num_steps=0` (`fn_args_utils.get_common_fn_args`: its
  proto3 field cannot tell 0 from unset, so `TrainArgs()` is 0).

  Args:
    value: The setting's value (an int; the command's flag, as typed).
    setting: The setting as its entry point spells it:
      "'train_args.num_steps'" or '--steps'.
    received: It with its value: 'num_steps=-1' or "--steps='ten'".

  Raises:
    InvalidArgumentError: neither a positive int nor 0 (negative, not a
      number).
  """
  if value is None or (isinstance(value, int) and not isinstance(value, bool)
                       and value >= 0):
    return value or None
  raise InvalidArgumentError(
      f'{setting} must be positive, or unset to read the split once (0 is '
      "unset, as TFX's Trainer reads it). Received: "
      f'{received}. Set a positive number, or leave it unset.')


def eval_on_train_line(names: EntryPoint) -> str:
  """What an entry point says before it trains when it evaluates on the
  train data (the command's --eval-data train, the notebook's Estimator
  given no eval_data): that the eval figures will be training-set
  figures, and how to evaluate on other data."""
  chosen, other = (('--eval-data train', '--eval-data FILES')
                   if names.flags else
                   ('no eval_data given', 'eval_data=FILES'))
  return (f'Eval data: the train data itself ({chosen}). The eval figures '
          'will be training-set figures, not a measure of how the model '
          'does on data it has not seen' +
          ('.' if names.flags else f'; pass {other} to measure that.'))


def check_custom_config(custom_config: Any) -> None:
  if custom_config is not None and not isinstance(custom_config, dict):
    raise InvalidArgumentError(
        "'custom_config' must be a dict. Received: custom_config that is a "
        f'{type(custom_config).__name__}. Pass a dict, e.g. '
        "custom_config={'epochs': 5}.")


def restarts(value: Optional[int]) -> int:
  """The restarts a worker group gets (a local group's, a TFJob's, a
  TrainJob's): the setting, else the default."""
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


def worker_range(num_workers: Any, names: EntryPoint = COMPONENT
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
  setting = names.setting(NUM_WORKERS_KEY)
  shown = names.value(NUM_WORKERS_KEY, num_workers)
  raise InvalidArgumentError(
      f'{setting} must be a positive int (the processes that train '
      'together) or a range MIN:MAX of them (a local group restarts with '
      'fewer workers, down to MIN, when one cannot come back, and grows '
      'back to MAX). Expected e.g. 2 or "2:3", with 1 <= MIN <= MAX. '
      f'Received: {shown}. Set a positive int, a range such as "2:3", or '
      'leave it unset.')


def most_workers(exec_properties: Mapping[str, Any]) -> int:
  """The workers a job of pods runs for the `num_workers` of
  `exec_properties` (or of a compiled step's parameters): N, or a range's
  MAX; 1 when unset. A TFJob's operator and a TrainJob's JobSet restart
  pods at the job's size; only a local group shrinks and grows
  (`launch.restarts`)."""
  return (worker_range(exec_properties.get(NUM_WORKERS_KEY)) or (1, 1))[1]


def worker_range_text(bounds: Tuple[int, int]) -> Any:
  """The setting `worker_range` reads back as `bounds`: N, or 'MIN:MAX'."""
  low, high = bounds
  return low if low == high else f'{low}:{high}'


def check_strategy(num_workers: Optional[int], strategy: Any) -> None:
  """Refuses a strategy that is not one of ours, or that cannot train
  `num_workers` (the most of the setting) processes together."""
  if strategy is not None and strategy not in STRATEGIES:
    raise InvalidArgumentError(
        f"'strategy' must be one of {STRATEGIES} or None (chosen from "
        f'num_workers). Received: strategy={strategy!r}. Set one of those, '
        'or leave it unset.')
  if (num_workers or 1) > 1 and strategy not in (None, MULTI_WORKER_MIRRORED):
    raise InvalidArgumentError(
        f"A {num_workers}-worker training needs strategy="
        f"'{MULTI_WORKER_MIRRORED}' (or None, which picks it); {strategy!r} "
        f'trains in one process. Received: num_workers={num_workers}, '
        f'strategy={strategy!r}. Leave strategy unset, or train with one '
        'worker.')


def choose_strategy(setting: Optional[str], num_workers: int) -> str:
  """The strategy to train with: the setting, else one fit for the number
  of processes that train together."""
  if setting:
    return setting
  return MULTI_WORKER_MIRRORED if num_workers > 1 else DEFAULT_STRATEGY


def check_cluster_fits(cluster_size: int, cluster: str,
                       bounds: Optional[Tuple[int, int]], asked: Any,
                       strategy: Optional[str]) -> None:
  """Refuses settings that disagree with the cluster this process is a
  member of (`cluster_size` processes, described by `cluster`, e.g. its
  TF_CONFIG): a `num_workers` (`bounds`, `asked` as given) that does not
  hold its size, or a strategy that cannot train several processes."""
  if bounds and not bounds[0] <= cluster_size <= bounds[1]:
    shown = asked if isinstance(asked, int) else repr(asked)
    expected = ('the cluster\'s size' if bounds[0] == bounds[1] else
                'a range that holds the cluster\'s size')
    raise InvalidArgumentError(
        f'The component asks for num_workers={shown}, but TF_CONFIG '
        f'describes a cluster of {cluster_size} (chief and workers). '
        f'Expected {expected}. Set num_workers to the number of replicas '
        'the job runs (or a range that holds it), or leave it unset to '
        f'follow TF_CONFIG. Received: TF_CONFIG={cluster!r}.')
  if cluster_size > 1 and strategy not in (None, MULTI_WORKER_MIRRORED):
    raise InvalidArgumentError(
        f'TF_CONFIG describes a cluster of {cluster_size}, which trains '
        f"with strategy='{MULTI_WORKER_MIRRORED}'. Expected that strategy, "
        'or none. Received: '
        f'strategy={strategy!r}. Leave strategy unset, or set '
        f"'{MULTI_WORKER_MIRRORED}'.")
