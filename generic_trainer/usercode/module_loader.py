"""Finds the user's entry point from `module_file`, `module_path` or `run_fn`.

The three ways mirror `tfx.components.Trainer`:
  - `module_file`: a Python source file;
  - `module_path`: an importable module (or, after TFX packaged a module
    file, `name@/path/to/wheel`);
  - `run_fn`: a dotted path `package.module.name` to a function or a
    TrainSpec subclass.
A module provides either a top-level `run_fn(fn_args)` or a TrainSpec: a
subclass of `generic_trainer.TrainSpec` defined in the module itself. When
the module defines several, the one no other subclasses is used (so a module
may define a base spec and the spec derived from it); two unrelated specs,
or a spec and a `run_fn`, are refused as ambiguous.

We load modules ourselves (rather than through `udf_utils.get_fn`) so that an
error can name what the module does define, and so that later loaders can
look for other top-level names than `run_fn`.
"""

import contextlib
import importlib
import importlib.util
import inspect
import itertools
import os
import sys
import types
from typing import Any, Callable, Dict, Optional
import ast

from generic_trainer.system import source_tree
from generic_trainer.usercode import guard as user_code
from generic_trainer.usercode.guard import user_traceback
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import UserModuleError
from generic_trainer.errors import summarize
from generic_trainer.errors import with_traceback
from generic_trainer.keys import MODULE_FILE_KEY
from generic_trainer.keys import MODULE_PATH_KEY
from generic_trainer.keys import RUN_FN_KEY
from generic_trainer.keys import SOURCE_KEYS
from generic_trainer.migration import advice as migration
from generic_trainer.migration import estimator_uses
from generic_trainer.trainspec.spec import TrainSpec
from generic_trainer.trainspec.spec import check_complete
from generic_trainer.system.lazy import io_utils
from generic_trainer.system.lazy import udf_utils

_counter = itertools.count()




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


def _trainer_fn_migration(path: Optional[str]) -> str:
  """What to write instead of a `trainer_fn` module (`path`, its source):
  the canned spec for the Estimator it builds (`migration.advice`)."""
  source = ''
  if path and os.path.isfile(path):
    with open(path, errors='replace') as f:
      source = f.read()
  return migration.advice(source)


def check_no_estimator(path: Optional[str], what: str) -> None:
  """Refuses a module whose source uses tf.estimator, before importing it
  (and TensorFlow): importing it would fail with an ImportError, or its
  `run_fn` later, after the inputs are read.

  Raises:
    UserModuleError: naming the lines and the spec that replaces the
      Estimator, with the module's own settings (`migration.advice`).
  """
  if not path or not path.endswith('.py') or not os.path.isfile(path):
    return
  with open(path, errors='replace') as f:
    source = f.read()
  uses = estimator_uses.estimator_uses(source)
  if uses:
    raise UserModuleError(
        f'The user module ({what}) cannot run: '
        f'{migration.advice(source, uses)}')


def load_entry_point(key: str, value: str, name: Optional[str] = None
                     ) -> Callable[[Any], None]:
  """The user's `run_fn`, or a run_fn that trains their TrainSpec (whose
  `train_spec` attribute is the class).

  Args:
    key: 'module_file', 'module_path' or 'run_fn' (checked by the caller,
      `plan.plan`).
    value: Its value.
    name: With a module file or path, the top-level name to use (a
      function of fn_args, or a TrainSpec subclass); None: its `run_fn` or
      its TrainSpec.

  Raises:
    UserModuleError: the module is missing, does not import, or has no
      usable entry point.
  """
  source = f'{key}={value!r}'
  if key == RUN_FN_KEY:
    module_name, _, fn_name = value.rpartition('.')
    return _named_entry_point(_import_module(module_name, source=source),
                              module_name, fn_name, source)
  if key == MODULE_PATH_KEY:
    module = _import_module(value, source=source)
  else:
    module = _load_source_file(value)
  if name is None:
    return _module_entry_point(module, source)
  return _named_entry_point(module, value, name, source)


def load_from_file(path: str, name: Optional[str] = None
                   ) -> Callable[[Any], None]:
  """`load_entry_point` for a module file."""
  return load_entry_point(MODULE_FILE_KEY, path, name)


def source_file(key: str, value: str) -> Optional[str]:
  """The user module's source file, whichever way it was given; None when
  it cannot be found without importing it (a packaged wheel's module)."""
  if key == MODULE_FILE_KEY:
    return value
  name = value if key == MODULE_PATH_KEY else value.rpartition('.')[0]
  if not name or '@' in name:  # A packaged wheel's name holds its hash.
    return None
  try:
    spec = importlib.util.find_spec(name)
  except (ImportError, ValueError):
    return None
  return spec.origin if spec else None


_ENTRY_POINTS = ('a top-level `run_fn(fn_args)` function or a subclass of '
                 '`generic_trainer.TrainSpec`')


def _named_entry_point(module: types.ModuleType, module_name: str,
                       fn_name: str, source: str):
  """The module's top-level `fn_name`: a run_fn, or a TrainSpec's run_fn."""
  if not hasattr(module, fn_name):
    raise UserModuleError(
        f'The module {module_name!r} ({source}) has no top-level '
        f'`{fn_name}`. It defines: {_public_names(module)}. Expected '
        f'{_ENTRY_POINTS}. Received: {fn_name!r}. Name one of those.')
  entry = getattr(module, fn_name)
  if _is_train_spec(entry):
    return _spec_run_fn(entry, source)
  return _checked_run_fn(entry, fn_name, source)


def _is_train_spec(obj) -> bool:
  return isinstance(obj, type) and issubclass(obj, TrainSpec) and (
      obj is not TrainSpec)


def _module_entry_point(module: types.ModuleType, source: str):
  """The module's run_fn, or the run_fn that trains its TrainSpec."""
  specs = [v for v in vars(module).values()
           if _is_train_spec(v) and v.__module__ == module.__name__]
  leaves = [s for s in specs
            if not any(o is not s and issubclass(o, s) for o in specs)]
  run_fn = vars(module).get(RUN_FN_KEY)
  if run_fn is not None and leaves:
    raise UserModuleError(
        f'The user module ({source}) defines both `run_fn` and the TrainSpec '
        f'{leaves[0].__name__}; GenericTrainer would not know which to use. '
        'Keep one of them. Expected one entry point. Received: run_fn and '
        f'{leaves[0].__name__}.')
  if len(leaves) > 1:
    raise UserModuleError(
        f'The user module ({source}) defines several unrelated TrainSpec '
        f'subclasses: {", ".join(sorted(c.__name__ for c in leaves))}. Keep '
        "one, or pass run_fn='module.SpecName' to choose. Expected one "
        f'TrainSpec. Received: {len(leaves)}.')
  if leaves:
    return _spec_run_fn(leaves[0], source)
  if run_fn is None:
    hint = _trainer_fn_migration(getattr(module, '__file__', None)) if hasattr(
        module, 'trainer_fn') else (
        'Define a top-level `def run_fn(fn_args):` or a subclass of '
        '`generic_trainer.TrainSpec` in it.')
    raise UserModuleError(
        f'The user module ({source}) has no top-level `run_fn` and no '
        f'TrainSpec. It defines: {_public_names(module)}. Expected '
        f'{_ENTRY_POINTS}. Received: a module without either. {hint}')
  return _checked_run_fn(run_fn, RUN_FN_KEY, source)


def _spec_run_fn(spec_class: type, source: str):
  """The run_fn that trains and exports `spec_class` (`loop.runner.SpecRun`),
  once the class is complete."""
  check_complete(spec_class, source)

  # Inside: the runner imports TensorFlow and Keras at its top; only once a
  # complete TrainSpec is found, so that finding the entry point (the
  # component, the command's checks) stays light.
  from generic_trainer.loop import runner  # pylint: disable=g-import-not-at-top
  return runner.SpecRun(spec_class)


def _checked_run_fn(fn, fn_name: str, source: str):
  if not callable(fn):
    raise UserModuleError(
        f'`{fn_name}` in the user module ({source}) must be a function taking '
        f'fn_args. Received: {fn_name} that is a {type(fn).__name__}. Define '
        f'it as `def {fn_name}(fn_args):`.')
  try:
    inspect.signature(fn).bind(object())
  except TypeError:
    raise UserModuleError(
        f'`{fn_name}` in the user module ({source}) must accept exactly one '
        f'argument, fn_args. Received: {fn_name}{inspect.signature(fn)}. '
        f'Change it to `def {fn_name}(fn_args):`.') from None
  except ValueError:  # Builtins without a signature: let the call decide.
    pass
  return fn


def _public_names(module: types.ModuleType) -> str:
  names = sorted(n for n, v in vars(module).items()
                 if not n.startswith('_') and not inspect.ismodule(v))
  return ', '.join(names) if names else 'nothing public'


def _exit_at_import(what: str, e: BaseException) -> UserModuleError:
  return UserModuleError(with_traceback(
      f'Importing {what} called {user_code.describe_exit(e)}: the module '
      'ended the process while it was being imported. A module file runs at '
      'import time; code that parses the command line or runs a script '
      "belongs under `if __name__ == '__main__':`; its traceback shows "
      'where it was called.', user_traceback(e)))


def _load_source_file(path: str) -> types.ModuleType:
  """Imports a Python source file under a fresh module name."""
  local_path = path
  if '://' in path:  # Remote (gs://...): TFX copies it to a local file.
    try:
      local_path = io_utils.ensure_local(path)
    except Exception as e:  # pylint: disable=broad-except
      raise UserModuleError(
          f'Cannot read the module file {path!r}: {e}. Check the path. '
          f'Expected a readable file. Received: {type(e).__name__}.') from e
  if not os.path.isfile(local_path):
    raise source_tree.missing_file_error(path)
  check_no_estimator(local_path, f'{MODULE_FILE_KEY}={path!r}')
  stem = os.path.splitext(os.path.basename(local_path))[0]
  name = f'_generic_trainer_user_module_{next(_counter)}_{stem}'
  spec = importlib.util.spec_from_file_location(name, local_path)
  if spec is None:
    raise UserModuleError(
        f'The module file {path!r} is not a Python source file. Expected a '
        f'path ending in .py. Received: {path!r}. Pass the module\'s .py '
        'file.')
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  try:
    with user_code.guarded(argv0=local_path), _beside(local_path):
      spec.loader.exec_module(module)
  except ModuleNotFoundError as e:
    del sys.modules[name]
    if not e.name or '.' in e.name or importlib.util.find_spec(
        e.name.split('.')[0]) is not None:
      raise _import_error(path, e) from e
    folder = os.path.dirname(os.path.abspath(local_path))
    raise UserModuleError(with_traceback(
        f'Importing the module file {path!r} raised ModuleNotFoundError: '
        f'{e}: {e.name!r} is neither installed nor a .py file (or package) '
        f"in the module's folder, {folder}. Expected every module it "
        'imports importable: installed in the trainer environment, or '
        'beside the module file (a pipeline packages every .py file of '
        'that folder with it, and the module is imported with that folder '
        f'on sys.path). Received: import {e.name}. Install the package that '
        f'provides {e.name!r}, or, for a helper module of yours, put '
        f'{e.name}.py in {folder}.', user_traceback(e))) from e
  except SyntaxError as e:
    del sys.modules[name]
    raise source_tree.syntax_error(path, e) from e
  except user_code.EXITS as e:
    del sys.modules[name]
    raise _exit_at_import(f'the module file {path!r}', e) from e
  except Exception as e:  # pylint: disable=broad-except
    del sys.modules[name]
    raise _import_error(path, e) from e
  return module


def _import_error(path: str, e: BaseException) -> UserModuleError:
  return UserModuleError(with_traceback(
      f'Importing the module file {path!r} raised '
      f'{type(e).__name__}: {summarize(e)}. The module runs at import '
      'time. Expected the module to import without an error. Received: '
      f'{type(e).__name__}, whose traceback ends this message. Fix the '
      'module where its traceback points.', user_traceback(e)))


@contextlib.contextmanager
def _beside(path: str):
  """While the module file at `path` is imported, its folder is first on
  sys.path, so that it imports the modules beside it (`import helper`), as
  TFX's Trainer does (it packages every .py file of that folder with the
  module). Afterwards the folder leaves sys.path, and so do the modules
  imported from it from sys.modules (the user's module keeps them), so
  that another module file's `helper` is its own; unless the module put
  its folder on sys.path itself, which then stays as it made it."""
  folder = os.path.dirname(os.path.abspath(path))
  if folder in {os.path.abspath(p or os.curdir) for p in sys.path}:
    yield  # On sys.path already (the working directory...): as it is.
    return
  before = set(sys.modules)
  sys.path.insert(0, folder)
  try:
    yield
  finally:
    try:
      sys.path.remove(folder)
    except ValueError:  # The module took it off itself.
      pass
    # Unless the module put its folder on sys.path itself (its choice).
    new = set() if folder in sys.path else set(sys.modules) - before
    for name in new:
      origin = getattr(sys.modules.get(name), '__file__', None) or ''
      if (os.path.abspath(origin).startswith(folder + os.sep) and
          name.split('.')[0] != 'generic_trainer'):
        del sys.modules[name]


def _import_module(module_path: str, source: str) -> types.ModuleType:
  """Imports `module_path`, installing the wheel of `name@wheel` first."""
  if '@' not in module_path and module_path not in sys.modules:
    try:
      found = importlib.util.find_spec(module_path)
    except (ImportError, ValueError):
      found = None
    check_no_estimator(getattr(found, 'origin', None), source)
  name, wheels = udf_utils.decode_user_module_key(module_path)
  try:
    with udf_utils.TempPipInstallContext(wheels), user_code.guarded(
        argv0=name):
      if name in sys.modules:
        return importlib.reload(sys.modules[name])
      return importlib.import_module(name)
  except user_code.EXITS as e:
    raise _exit_at_import(f'the module {name!r} ({source})', e) from e
  except ModuleNotFoundError as e:
    if e.name and (e.name == name or name.startswith(e.name + '.')):
      raise UserModuleError(
          f'Cannot find the module {name!r} ({source}). Expected an '
          'importable module: install it in the trainer environment or put '
          'it on PYTHONPATH, or pass module_file with its path instead.'
      ) from e
    raise UserModuleError(with_traceback(
        f'Importing {name!r} ({source}) failed: it imports {e.name!r}, which '
        f'is not installed. Install it in the trainer environment. Expected '
        f'{e.name!r} importable. Received: ModuleNotFoundError.',
        user_traceback(e))) from e
  except SyntaxError as e:
    raise UserModuleError(
        f'The module {name!r} ({source}) has a syntax error in {e.filename} '
        f'at line {e.lineno}: {e.msg}. Expected Python that compiles. '
        f'Received: {(e.text or "").strip()!r}. Fix that line.') from e
  except Exception as e:  # pylint: disable=broad-except
    raise UserModuleError(with_traceback(
        f'Importing {name!r} ({source}) raised {type(e).__name__}: '
        f'{summarize(e)}. Expected the module to import without an error. '
        f'Received: {type(e).__name__}, whose traceback ends this message. '
        'Fix the module where its traceback points.', user_traceback(e))) from e


def top_level_names(path: str) -> Optional[Dict[str, str]]:
  """What a module file defines at top level, read without running it.

  Returns {name: kind}, kind being 'function', 'class', 'import' or
  'assign'; None when a star import makes it unknowable.

  Raises:
    UserModuleError: the file is missing or has a syntax error.
  """
  tree = source_tree.read(path)
  kinds = {}
  for node in tree.body:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      kinds[node.name] = 'function'
    elif isinstance(node, ast.ClassDef):
      kinds[node.name] = 'class'
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
      if any(a.name == '*' for a in node.names):
        return None
      kinds.update({(a.asname or a.name).split('.')[0]: 'import'
                    for a in node.names})
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      kinds.update({t.id: 'assign' for t in targets if isinstance(t, ast.Name)})
  return kinds


def check_module_source(path: str) -> None:
  """Checks a local module file early, at pipeline construction.

  Catches a missing file, a syntax error, and a module with neither a
  top-level `run_fn` nor any class (a TrainSpec is checked when loaded),
  without running the module. Remote paths (gs://...) are left to run time.

  Raises:
    UserModuleError: with what is wrong and what to do.
  """
  if '://' in path:
    return
  kinds = top_level_names(path)
  check_no_estimator(path, f'{MODULE_FILE_KEY}={path!r}')
  if kinds is None:
    return  # Cannot know statically.
  if RUN_FN_KEY not in kinds and 'class' not in kinds.values():
    hint = _trainer_fn_migration(path) if 'trainer_fn' in kinds else (
        'Define a top-level `def run_fn(fn_args):` or a subclass of '
        '`generic_trainer.TrainSpec` in it.')
    public = sorted(n for n in kinds if not n.startswith('_'))
    raise UserModuleError(
        f'The module file {path!r} has no top-level `run_fn` and no '
        f"TrainSpec. It defines: {', '.join(public) or 'nothing public'}. "
        f'Expected {_ENTRY_POINTS}. Received: a module without either. '
        f'{hint}')
