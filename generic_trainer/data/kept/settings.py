"""The command's flags for parsed rows kept across runs (`data.kept.cache`):
`--parsed-rows-cache DIR|off` and `--parsed-rows-budget GB`, declared and
checked before anything heavy loads, and what a run keeps (`KeptRows`).
"""

import os
from typing import Any, Dict, Iterable, Optional

import attr

from generic_trainer.data.kept import folder as kept_folder
from generic_trainer.system import paths
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import PARSED_ROWS_BUDGET, PARSED_ROWS_KEY
from generic_trainer.keys import PARSED_ROWS_DEFAULT_BUDGET_GB
from generic_trainer.keys import UPDATED_PARSED_ROWS_KEY

PARSED_ROWS = 'parsed-rows'  # The default cache's folder, in the user's.
PARSED_ROWS_OFF = 'off'


@attr.s(frozen=True)
class KeptRows:
  """Where a TrainSpec keeps parsed rows for the next run, and how many.

  Attributes:
    folder: The cache folder.
    budget_bytes: The most bytes it keeps; None: the default.
  """
  folder = attr.ib(type=str)
  budget_bytes = attr.ib(type=Optional[int], default=None)

  def fn_args_fields(self) -> Dict[str, Any]:
    """The FnArgs fields they fill (`GenericFnArgsFields`)."""
    return {'parsed_rows_dir': self.folder,
            'parsed_rows_budget': self.budget_bytes}

  def add_artifacts(self, input_dict, output_dict) -> None:
    """Adds the folder as a training request's ParsedRows input and output
    (its budget a property of the output), for a training through the
    component's path (local workers, a child process): every worker reads
    its entries, the chief keeps its own there (`data.kept.store`)."""
    # Inside: `ParsedRows` subclasses TFX's Artifact (TFX at its module's
    # top), and the command's flags import these settings light.
    from generic_trainer.data.kept.artifact import ParsedRows  # pylint: disable=g-import-not-at-top
    for artifacts, key in ((input_dict, PARSED_ROWS_KEY),
                           (output_dict, UPDATED_PARSED_ROWS_KEY)):
      artifacts[key] = [ParsedRows()]
      artifacts[key][0].uri = self.folder
    if self.budget_bytes is not None:
      output_dict[UPDATED_PARSED_ROWS_KEY][0].set_int_custom_property(
          PARSED_ROWS_BUDGET, self.budget_bytes)


def add(add_argument) -> None:
  """Declares the flags (`add_argument`: the parser's)."""
  add_argument(
      '--parsed-rows-cache', metavar='DIR',
      help='where a TrainSpec keeps the parsed rows of each TFRecord file '
      'for the next run, which reads them back instead of parsing the file '
      'again; `off` keeps none (default: tfx-generic-trainer/parsed-rows in '
      '$XDG_CACHE_HOME, else in ~/.cache)')
  add_argument(
      '--parsed-rows-budget', metavar='GB',
      help='the most gigabytes --parsed-rows-cache keeps; the least recently '
      f'used files\' rows go first (default: {PARSED_ROWS_DEFAULT_BUDGET_GB})')


def kept_rows(cache: Optional[str], budget: Optional[str],
              output_dir: str, inputs: Iterable[str] = ()
              ) -> Optional[KeptRows]:
  """The checked flags: what a run keeps, or None (`off`); `inputs`: the
  files and folders the run reads, which the cache must not hold.

  Raises:
    InvalidArgumentError: a flag is wrong; the message names it.
  """
  folder = checked_folder(cache, output_dir, inputs=inputs)
  return KeptRows(folder, _budget(budget)) if folder else None


def checked_folder(value: Any, output_dir: Optional[str] = None,
                   name: str = '--parsed-rows-cache',
                   inputs: Iterable[str] = ()) -> Optional[str]:
  """The cache folder `value` names, checked: a local folder (the default
  one for None or True), or None for `off` or False.

  Args:
    value: The command's flag (a string, or None when unset) or the
      Estimator's argument (a path, True or False).
    output_dir: A folder a run replaces, which must not hold the cache,
      nor lie in it.
    name: How the user spelled it: '--parsed-rows-cache' (the command) or
      'parsed_rows_cache' (the Estimator), for the messages.
    inputs: The files and folders a run reads, which the cache must not
      hold, nor lie in (a folder: the base model).

  Raises:
    InvalidArgumentError: it names no local folder; the message says why.
    UnsafeFolderError: the folder is not this user's alone (`trust`), or
      it holds what is not ours, or holds an output or input
      (`kept_folder.check`).
  """
  flag = name.startswith('--')
  off = f'{name}={PARSED_ROWS_OFF}' if flag else f'{name}=False'
  if value is False or (flag and value == PARSED_ROWS_OFF):
    return None
  if value is True:
    value = None
  elif isinstance(value, os.PathLike):
    value = os.fspath(value)
  if value is not None and not (isinstance(value, str) and value.strip()):
    also = '' if flag else ', True (the default folder) or False (none)'
    raise InvalidArgumentError(
        f'{name} must name a folder. Expected a path (created when missing) '
        f'where parsed rows are kept between runs{also}. Received: '
        f'{name}={value!r}. Name a folder, or pass {off} to keep none.')
  if value is not None and paths.is_remote(value):
    raise InvalidArgumentError(
        f'{name} names an object store. Expected a local or mounted folder: '
        'the cache is locked and evicted in place, which an object store '
        "cannot do (a pipeline's ParsedRows artifact may live on one). "
        f'Received: {name}={value!r}. Name a local folder, leave it out for '
        f'the default one, or pass {off} to keep none.')
  folder = os.path.abspath(value or paths.user_cache_dir(PARSED_ROWS))
  if os.path.exists(folder) and not os.path.isdir(folder):
    raise InvalidArgumentError(
        f'{name} names a file{paths.cwd_note(value or folder)}. Expected a '
        'folder (created when missing) where parsed rows are kept between '
        f'runs. Received: {name}={value!r}. Name a folder, or pass {off} to '
        'keep none.')
  if output_dir and os.path.commonpath([folder, output_dir]) == output_dir:
    outer = '--output-dir' if flag else 'model_dir'
    raise InvalidArgumentError(
        f'{name} is inside {outer}, which a run replaces. Expected a '
        f'folder outside it, kept between runs. Received: {name}={value!r}, '
        f'{outer}={output_dir!r}. Leave {name} out for the default '
        'folder, or name one outside the output folder.')
  kept_folder.check(folder, name, [output_dir], inputs)
  return folder


def _budget(value: Optional[str]) -> Optional[int]:
  """The checked --parsed-rows-budget, in bytes (None: the default)."""
  if value is None:
    return None
  try:
    number = float(value)
  except ValueError:
    number = -1.0
  if not number > 0 or number == float('inf'):
    raise InvalidArgumentError(
        '--parsed-rows-budget must be a positive number of gigabytes, the '
        f'most the parsed rows cache keeps. Received: --parsed-rows-budget='
        f'{value!r}. Pass a number such as 5 or 0.5, or leave it out for '
        f'{PARSED_ROWS_DEFAULT_BUDGET_GB}.')
  return int(number * 1e9)
