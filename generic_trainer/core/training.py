"""One training attempt: load the user's run_fn, build FnArgs, call it."""

import contextlib
from typing import Any, Dict, List, Optional

from generic_trainer.core import module_loader
from generic_trainer.errors import GenericTrainerError, RunFnError


def train(input_dict: Dict[str, List[Any]],
          output_dict: Dict[str, List[Any]],
          exec_properties: Dict[str, Any],
          serving_dir: str,
          eval_dir: str,
          checkpoint_dir: Optional[str] = None) -> None:
  """Runs the user's `run_fn`, which exports into `serving_dir`.

  The module is loaded before FnArgs are built, so a broken module fails in
  seconds instead of after the data accessors are set up.

  Raises:
    UserModuleError, InvalidArgumentError, InputArtifactError: see their docs.
    RunFnError: `run_fn` raised; the user's exception is its `__cause__` and
      its traceback is in the message.
  """
  run_fn = module_loader.load_run_fn(exec_properties)
  source = module_loader.describe_source(exec_properties)
  from generic_trainer.core import fn_args as fn_args_lib  # pylint: disable=g-import-not-at-top
  fn_args = fn_args_lib.build_fn_args(input_dict, output_dict, exec_properties,
                                      serving_dir, eval_dir, checkpoint_dir)
  spec = getattr(run_fn, 'train_spec', None)
  with user_code(f'TrainSpec {spec.__name__}' if spec else 'run_fn', source):
    run_fn(fn_args)


@contextlib.contextmanager
def user_code(what: str, source: str):
  """Raises what the block raises as a RunFnError with the user's traceback.

  Our own errors pass unchanged: they already say what is wrong (a
  TrainSpec check, a NaN loss...).
  """
  try:
    yield
  except GenericTrainerError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    raise RunFnError(
        f'{what} ({source}) raised {type(e).__name__}: {e}\n'
        f'Its traceback:\n{module_loader.user_traceback(e)}\n'
        'Nothing was published.') from e
