"""Running user code so that it cannot end the trainer.

User code (a module file at import, `run_fn`, a TrainSpec's members) runs
in the trainer's own process. While it runs:

- `sys.exit()`, `exit()` and `quit()` raise SystemExit, which is caught and
  reported as the user's error instead of ending the trainer (in a pipeline,
  SystemExit would escape `LocalDagRunner.run` and the script exit 0);
- `os._exit()`, which would end the process at once without an exception,
  raises `ExitCalled` instead (the real one is put back afterwards);
- a module sees `sys.argv` of its own file alone, not the trainer's command
  line, so one that parses arguments at import does not print its usage.
Either way the run fails with a message that says where the call was, and
nothing is published.
"""

import contextlib
import os
import sys
import traceback
from typing import Optional

from generic_trainer.errors import GenericTrainerError
from generic_trainer.errors import InputArtifactError
from generic_trainer.errors import RunFnError
from generic_trainer.errors import summarize
from generic_trainer.system import disk_full

# Frames of GenericTrainer's own code are left out of a user's traceback.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ExitCalled(BaseException):
  """`os._exit(code)` was called by user code; raised in its place.

  A BaseException, as SystemExit is, so that `except Exception` in user
  code does not swallow it.
  """

  def __init__(self, code: int = 0):
    super().__init__(code)
    self.code = code


def _exit_called(code: int = 0):
  raise ExitCalled(code)


@contextlib.contextmanager
def guarded(argv0: Optional[str] = None):
  """While the block runs, `os._exit` raises ExitCalled; with `argv0`,
  `sys.argv` is `[argv0]`."""
  real_exit, argv = os._exit, sys.argv  # pylint: disable=protected-access
  os._exit = _exit_called  # pylint: disable=protected-access
  if argv0 is not None:
    sys.argv = [argv0]
  try:
    yield
  finally:
    os._exit = real_exit  # pylint: disable=protected-access
    sys.argv = argv


# What user code raises when it tries to end the process: `except EXITS`.
EXITS = (SystemExit, ExitCalled)



def describe_exit(e: BaseException) -> str:
  """'sys.exit(0)' or 'os._exit(3)', for messages."""
  if isinstance(e, ExitCalled):
    return f'os._exit({e.code!r})'
  return f'sys.exit({e.code!r})'


def user_traceback(e: BaseException) -> str:
  """The traceback of `e` without the frames of GenericTrainer itself."""
  frames = traceback.extract_tb(e.__traceback__)
  frames = [f for f in frames if not f.filename.startswith(
      (_PACKAGE_DIR, '<frozen'))]
  return ''.join(traceback.format_list(frames)) + f'{type(e).__name__}: {e}'


@contextlib.contextmanager
def user_code(what: str, source: str, wrap: bool = True):
  """Runs the block as user code (see the module docstring); raises what it
  raises as a RunFnError with the user's traceback.

  Our own errors pass unchanged: they already say what is wrong (a
  TrainSpec check, a NaN loss...). TensorFlow's DataLossError (a data file
  cut short or damaged past its first records) becomes an
  InputArtifactError. With `wrap` False (a notebook, which shows the
  user's traceback itself), the user's exceptions pass unchanged too; an
  exit still becomes a RunFnError.
  """
  with guarded():
    try:
      yield
    except GenericTrainerError:
      raise
    except EXITS as e:
      raise RunFnError(
          f'{what} ({source}) called {describe_exit(e)}, which would end the '
          "trainer's process. User code must return when it is done, or "
          'raise an exception to fail the run. Received: '
          f'{describe_exit(e)}. Replace the call with a return or a raise. '
          'The trainer stopped it there '
          f'and published nothing. Where it was called:\n{user_traceback(e)}'
      ) from e
    except Exception as e:  # pylint: disable=broad-except
      if not wrap:
        raise
      full = disk_full.error_for(e, f'{what} ({source})')
      if full is not None:
        raise full from e
      if _is_data_loss(e):
        raise InputArtifactError(
            f'Reading the data failed while {what} ({source}) trained: '
            f'{summarize(e)}. A data file is corrupt or truncated (its first '
            'records read, so it was damaged or cut short further on). '
            'Expected whole TFRecord files. Received: the error above. '
            'Re-run the component that produced the examples (or re-write '
            'the files). Nothing was published.') from e
      idiom = keras2_idiom(e)
      if idiom is not None:
        raise RunFnError(
            f'{what} ({source}) raised {type(e).__name__}: {summarize(e)}. '
            f'{idiom}\nIts traceback:\n{user_traceback(e)}') from e
      raise RunFnError(
          f'{what} ({source}) raised {type(e).__name__}: {e}\n'
          f'Its traceback:\n{user_traceback(e)}\n'
          'Expected it to return once it has exported the model. Received: '
          'the exception above. Fix the code where its traceback points. '
          'Nothing was published.') from e


# Keras 3's refusals of tf.keras 2's ways of saving (the way TFX's docs and
# templates save): (words of Keras's message, what was expected).
_KERAS2_SAVING = (
    ('save_format', 'Keras 3 takes no save_format'),
    ('Invalid filepath extension for saving',
     'Keras 3 saves a .keras or .h5 file with model.save(), not a folder'),
)


def keras2_idiom(e: BaseException) -> Optional[str]:
  """For Keras 3 refusing a tf.keras 2 way of saving a model
  (`model.save(dir, save_format='tf')`, `model.save(dir)`): what was
  expected and what to do; None for any other error."""
  text = str(e)
  for words, why in _KERAS2_SAVING:
    if words in text:
      return (
          f'This is tf.keras 2\'s way of saving a SavedModel; {why}. Expected '
          'a SavedModel in fn_args.serving_model_dir, which Keras 3 writes '
          'with model.export(fn_args.serving_model_dir) (or '
          'tf.saved_model.save). Received: the call in the traceback below. '
          'Replace the call with model.export(fn_args.serving_model_dir), or '
          "run the module under tf.keras 2: keras_version='tf_keras' (the "
          'command: --keras-version tf_keras). Nothing was published.')
  return None


def _is_data_loss(e: BaseException) -> bool:
  tf = sys.modules.get('tensorflow')
  errors = getattr(tf, 'errors', None)
  return errors is not None and isinstance(e, errors.DataLossError)
