"""A module file's source as a syntax tree, read without running it.

The one place that parses user source (`ast.parse`): the loader's static
checks (`usercode.module_loader.top_level_names`, `usercode.static_spec`) and the
migration advice's reader (`migration.module_source`) all go through it.
"""

import ast
import os
from typing import Optional

from generic_trainer.errors import UserModuleError


def parse(source, filename: str = '<module>') -> ast.Module:
  """The tree of `source` (str or bytes).

  Raises:
    SyntaxError: it does not parse.
  """
  return ast.parse(source, filename=filename)


def dotted(node: ast.AST) -> Optional[str]:
  """'tf.feature_column.numeric_column' of an attribute chain, or None."""
  parts = []
  while isinstance(node, ast.Attribute):
    parts.append(node.attr)
    node = node.value
  if isinstance(node, ast.Name):
    parts.append(node.id)
    return '.'.join(reversed(parts))
  return None


def contains(tree: ast.AST, node: ast.AST) -> bool:
  """Whether `node` is `tree` or inside it."""
  return any(child is node for child in ast.walk(tree))


def read(path: str) -> ast.Module:
  """The tree of the module file at `path`.

  Raises:
    UserModuleError: the file is missing, unreadable or has a syntax error
      (the message names the line).
  """
  if not os.path.isfile(path):
    raise missing_file_error(path)
  try:
    with open(path, 'rb') as f:
      return parse(f.read(), path)
  except SyntaxError as e:
    raise syntax_error(path, e) from e
  except (OSError, ValueError) as e:
    raise UserModuleError(
        f'Cannot read the module file {path!r}: {e}. Expected a readable '
        'Python source file. Received: that path. Check its permissions '
        'and encoding.') from e


def missing_file_error(path: str) -> UserModuleError:
  """The error for a module file that is not a file: a folder, or
  nothing."""
  if os.path.isdir(path):
    return _folder_error(path)
  return UserModuleError(
      'The module file does not exist. Expected a Python file. Received: '
      f'module_file={path!r} (working directory {os.getcwd()}). Check the '
      'path; an absolute path avoids surprises.')


def _folder_error(path: str) -> UserModuleError:
  """A module file that is a folder, with the .py files in it."""
  try:
    modules = sorted(n for n in os.listdir(path) if n.endswith('.py'))
  except OSError:
    modules = []
  if modules:
    inside = (f'{len(modules)} .py file(s): {", ".join(modules[:5])}'
              + (', ...' if len(modules) > 5 else ''))
    todo = ('Pass the .py file that defines run_fn or the TrainSpec, e.g. '
            f'module_file={os.path.join(path, modules[0])!r}.')
  else:
    inside = 'no .py file'
    todo = 'Pass the path of the .py file that defines run_fn or the TrainSpec.'
  return UserModuleError(
      f'The module file {path!r} is a folder, not a Python file. Expected '
      f'the path of a .py file. Received: a folder holding {inside}. {todo}')


def syntax_error(path: str, e: SyntaxError) -> UserModuleError:
  return UserModuleError(
      f'The module file {path!r} has a syntax error at line {e.lineno}: '
      f'{e.msg}. Expected Python that compiles. Received: '
      f'{(e.text or "").strip()!r} at line {e.lineno}. Fix the file; '
      f'`python -m py_compile {path}` shows the same error.')
