"""The command's flags for parsed rows kept across runs (`data.span_cache`):
`--parsed-rows-cache DIR|off` and `--parsed-rows-budget GB`, declared and
checked before anything heavy loads, and what a run keeps (`KeptRows`).
"""

import os
from typing import Any, Dict, Optional

import attr

from generic_trainer import paths
from generic_trainer.errors import InvalidArgumentError

PARSED_ROWS = 'parsed-rows'  # The default cache's folder, in the user's.
PARSED_ROWS_OFF = 'off'
_DEFAULT_BUDGET_GB = 20


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
      f'used files\' rows go first (default: {_DEFAULT_BUDGET_GB})')


def kept_rows(cache: Optional[str], budget: Optional[str],
              output_dir: str) -> Optional[KeptRows]:
  """The checked flags: what a run keeps, or None (`off`).

  Raises:
    InvalidArgumentError: a flag is wrong; the message names it.
  """
  folder = _parsed_rows_dir(cache, output_dir)
  return KeptRows(folder, _budget(budget)) if folder else None


def _parsed_rows_dir(value: Optional[str], output_dir: str) -> Optional[str]:
  """The checked --parsed-rows-cache: a folder (the default one when
  unset), or None for `off`."""
  if value == PARSED_ROWS_OFF:
    return None
  folder = os.path.abspath(value or paths.user_cache_dir(PARSED_ROWS))
  if os.path.exists(folder) and not os.path.isdir(folder):
    raise InvalidArgumentError(
        f'--parsed-rows-cache names a file{paths.cwd_note(value or folder)}. '
        'Expected a folder (created when missing) where parsed rows are '
        f'kept between runs. Received: --parsed-rows-cache={value!r}. Name '
        f'a folder, or pass --parsed-rows-cache={PARSED_ROWS_OFF} to keep '
        'none.')
  inside = os.path.commonpath([folder, output_dir]) == output_dir
  if inside:
    raise InvalidArgumentError(
        '--parsed-rows-cache is inside --output-dir, which a run replaces. '
        'Expected a folder outside it, kept between runs. Received: '
        f'--parsed-rows-cache={value!r}, --output-dir={output_dir!r}. Leave '
        '--parsed-rows-cache out for the default folder, or name one '
        'outside the output folder.')
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
        f'{_DEFAULT_BUDGET_GB}.')
  return int(number * 1e9)
