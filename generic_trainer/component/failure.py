"""A failed execution says its reason first, in any TFX script.

TFX's launcher logs `Execution N failed.` and lets the executor's exception
escape `LocalDagRunner.run` (tfx/orchestration/portable/launcher.py,
`launch`), so a team's own script ends with Python's traceback: ~40 lines
through TFX and GenericTrainer, the user's exception chained above it, and
our message last. Under an orchestrator (an executor given a TFX
`Context`), `Do` instead hands our error (`GenericTrainerError`: the user's
code's errors arrive wrapped in one) to `said_first`, which

- writes the whole traceback, chain included, to `traceback.txt` in the
  node's stateful working dir (TFX keeps it after a failure; the Model and
  ModelRun folders it deletes);
- logs the reason first, at ERROR (what is wrong, expected, received, what
  to do), with the file's path;
- gives `Do` the same kind of error to raise instead, whose message is
  that reason and the path, without the chain (`from None`), so the execution still fails
  as TFX's contract wants and the traceback Python prints is the short
  path from the script to `Do`. The original error stays its
  `__context__`.

Called directly (no Context: tests, code that inspects the error), `Do`
raises the original error, its cause and traceback unchanged.
"""

import copy
import os
import traceback
from typing import Optional

from absl import logging

from generic_trainer.errors import GenericTrainerError
from generic_trainer.errors import TRACEBACK_HEADER
from generic_trainer.errors import reason
from generic_trainer.system import atomic_files
from generic_trainer.system.lazy import tf

TRACEBACK_FILE = 'traceback.txt'


def said_first(error: GenericTrainerError, folder: Optional[str]
               ) -> Optional[GenericTrainerError]:
  """Writes `error`'s traceback to `folder/traceback.txt` and logs its
  reason first; returns the error to raise instead, `from None` (see the
  module docstring). None, when `folder` is None (no orchestrator) or the
  traceback cannot be written: raise `error` itself."""
  if folder is None:
    return None
  path = _write_traceback(error, folder)
  if not path:
    return None
  carried = TRACEBACK_HEADER in str(error)
  text = (f'{reason(error).rstrip()}\nIts traceback'
          + (" (the user's code's frames, then the whole chain)" if carried
             else '') + f' is in {path}')
  logging.error('GenericTrainer failed: %s: %s', type(error).__name__, text)
  return _copy_with_message(error, text)


def _write_traceback(error: BaseException, folder: str):
  """The file holding `error`'s whole traceback, chain included; '' when it
  cannot be written."""
  path = os.path.join(folder, TRACEBACK_FILE)
  text = str(error) + '\n\n' + ''.join(traceback.format_exception(
      type(error), error, error.__traceback__))
  try:
    tf.io.gfile.makedirs(folder)
    atomic_files.write_text(path, text)
  except Exception:  # pylint: disable=broad-except
    return ''
  return path


def _copy_with_message(error: BaseException, text: str):
  """An error of `error`'s class and attributes whose message is `text`;
  None when the class cannot be copied."""
  try:
    short = copy.copy(error)
  except Exception:  # pylint: disable=broad-except
    return None
  short.args = (text,)
  return short if str(short) == text else None
