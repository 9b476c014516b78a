"""The package's layout: layers that import downwards only, no cycles, light
package __init__s. Read with `ast`, without importing TensorFlow."""

import ast
import os
import subprocess
import sys

import pytest

from conftest import REPO, command_env

PACKAGE = 'generic_trainer'
ROOT = os.path.join(REPO, PACKAGE)
# Rooms, highest layer first; a module may import from its own room and the
# layers below it, never upwards or sideways (local and kubeflow share a
# layer but not a room). Top-level modules not named here are the base.
LAYERS = [
    ['__main__'],
    ['local', 'kubeflow'],
    ['executor'],
    ['launch'],
    ['core'],
    ['spec'],
    ['data'],
]
BASE = 'base'
MAX_LINES = 400


def _modules():
  """{dotted module name: path} of every module of the package."""
  found = {}
  for folder, _, files in os.walk(ROOT):
    for name in files:
      if name.endswith('.py'):
        path = os.path.join(folder, name)
        parts = os.path.relpath(path, REPO)[:-3].split(os.sep)
        if parts[-1] == '__init__':
          parts = parts[:-1]
        found['.'.join(parts)] = path
  return found


MODULES = _modules()


def _resolve(name):
  """The package module `name` refers to, or its nearest package."""
  while name and name not in MODULES:
    name = name.rpartition('.')[0]
  return name or None


def imports_of(path):
  """Package modules imported anywhere in `path`, at top level or inside a
  function (a lazy import is still a dependency)."""
  with open(path) as f:
    tree = ast.parse(f.read(), filename=path)
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names = [f'{node.module}.{a.name}' for a in node.names]
    else:
      continue
    for name in names:
      if name == PACKAGE or name.startswith(PACKAGE + '.'):
        resolved = _resolve(name)
        if resolved:
          found.add(resolved)
  return found


GRAPH = {module: imports_of(path) - {module}
         for module, path in MODULES.items()}


def room(module):
  """The subpackage or top-level module a module belongs to ('base' for the
  top-level modules every layer may use)."""
  parts = module.split('.')
  if len(parts) == 1:
    return BASE
  top = parts[1]
  return top if any(top in rooms for rooms in LAYERS) else BASE


def rank(room_name):
  for index, rooms in enumerate(LAYERS):
    if room_name in rooms:
      return index
  return len(LAYERS)


def _cycle(graph):
  """A cycle of `graph` as a list of nodes, or None."""
  state, stack = {}, []

  def visit(node):
    state[node] = 'open'
    stack.append(node)
    for target in sorted(graph.get(node, ())):
      if state.get(target) == 'open':
        return stack[stack.index(target):] + [target]
      if target not in state:
        found = visit(target)
        if found:
          return found
    stack.pop()
    state[node] = 'done'
    return None

  for node in sorted(graph):
    if node not in state:
      found = visit(node)
      if found:
        return found
  return None


def test_no_import_cycle_between_modules():
  """No module imports, through others, itself."""
  assert _cycle(GRAPH) is None, ' -> '.join(_cycle(GRAPH))


def test_no_import_cycle_between_rooms():
  """No subpackage imports, through others, itself."""
  rooms = {}
  for module, targets in GRAPH.items():
    rooms.setdefault(room(module), set()).update(
        room(t) for t in targets if room(t) != room(module))
  assert _cycle(rooms) is None, ' -> '.join(_cycle(rooms))


def test_layers_import_downwards_only():
  """A module imports from its own room or from the layers below it."""
  wrong = []
  for module, targets in sorted(GRAPH.items()):
    for target in sorted(targets):
      source_room, target_room = room(module), room(target)
      if source_room == target_room or target_room == BASE:
        continue
      if rank(target_room) <= rank(source_room):
        wrong.append(f'{module} -> {target}')
  assert not wrong, 'imports against the layers:\n' + '\n'.join(wrong)


def test_base_modules_import_only_base_modules():
  """errors, keys, train_spec, resume... import no subpackage."""
  wrong = [f'{m} -> {t}' for m, targets in GRAPH.items() if room(m) == BASE
           for t in targets if room(t) != BASE]
  assert not wrong, wrong


def test_the_checker_sees_a_wrong_way_import():
  """The checks above can fail: an upward import and a cycle are found."""
  assert rank(room('generic_trainer.core.fn_args')) > rank(
      room('generic_trainer.launch.keras_process'))
  assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
  assert _cycle({'a': {'b'}, 'b': set()}) is None


def test_subpackage_inits_are_docstrings_only():
  """A subpackage's __init__ says what it holds and may import; it runs no
  import, so that importing one module of it stays cheap."""
  inits = [p for m, p in MODULES.items()
           if p.endswith('__init__.py') and m != PACKAGE]
  assert len(inits) >= 7
  for path in inits:
    with open(path) as f:
      tree = ast.parse(f.read())
    assert ast.get_docstring(tree), path
    assert len(tree.body) == 1, f'{path} holds more than its docstring'
    assert 'May import' in ast.get_docstring(tree), path


def test_no_module_over_the_size_limit():
  """Modules stay small enough to read; past ~400 lines a file is two."""
  long = {m: n for m, p in MODULES.items()
          if (n := sum(1 for _ in open(p))) > MAX_LINES}
  assert not long, long


def test_importing_the_packages_loads_no_tensorflow():
  """The package and its subpackages import nothing heavy."""
  code = ('import sys, generic_trainer, generic_trainer.keys, '
          'generic_trainer.errors\n'
          + ''.join(f'import {m}\n' for m in sorted(MODULES)
                    if MODULES[m].endswith('__init__.py'))
          + "print(sorted(m for m in ('tensorflow', 'tfx', 'keras', "
            "'apache_beam') if m in sys.modules))")
  out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, env=command_env(), check=True)
  assert out.stdout.strip() == '[]', out.stdout + out.stderr


@pytest.mark.parametrize('entry', ['generic_trainer.executor.GenericExecutor',
                                   'generic_trainer.local.cli.main'])
def test_entry_points_compiled_into_pipelines_and_setup_exist(entry):
  """Compiled pipelines name the executor's class path; setup.py names the
  command's function."""
  module, _, name = entry.rpartition('.')
  with open(MODULES[module]) as f:
    tree = ast.parse(f.read())
  assert name in {n.name for n in tree.body
                  if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
