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
# layer but not a room; the component renders TFJobs, so it sits above). Top-level modules not named here, and the
# subpackages in BASE_PACKAGES, are the base.
LAYERS = [
    ['__main__'],
    ['component'],
    ['local', 'kubeflow'],
    ['executor'],
    ['launch'],
    ['core'],
    ['canned'],
    ['loop'],
    ['data'],
]
BASE = 'base'
# Heads are part of what a TrainSpec declares: train_spec builds its model,
# loss and metrics with one, so they sit in the base beside it.
BASE_PACKAGES = ['heads']
# Subpackages users import names from (`from generic_trainer.canned import
# DNNClassifierSpec`): their __init__ re-exports those names, as attrs'
# thin __init__ does, from their own modules, none of which imports
# anything heavy at import time.
PUBLIC_PACKAGES = ['heads', 'canned']
# Public packages whose names import TFX: their __init__ loads them on first
# use (a module `__getattr__` over a {name: module} table), so importing the
# package stays light.
LAZY_PUBLIC_PACKAGES = ['component']
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
  if top in BASE_PACKAGES:
    return BASE
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
  import, so that importing one module of it stays cheap. The public
  packages' inits also re-export names from their own modules, and
  nothing else."""
  inits = {m: p for m, p in MODULES.items()
           if p.endswith('__init__.py') and m != PACKAGE}
  assert len(inits) >= 9
  for module, path in inits.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    assert ast.get_docstring(tree), path
    assert 'May import' in ast.get_docstring(tree), path
    if module.split('.')[1] in LAZY_PUBLIC_PACKAGES:
      assert {type(n).__name__ for n in tree.body[1:]} <= {
          'Assign', 'FunctionDef'}, path
      continue
    if module.split('.')[1] not in PUBLIC_PACKAGES:
      assert len(tree.body) == 1, f'{path} holds more than its docstring'
      continue
    for node in tree.body[1:]:
      reexport = isinstance(node, ast.ImportFrom) and node.module.startswith(
          module + '.')
      names = isinstance(node, ast.Assign) and [
          t.id for t in node.targets] == ['__all__']
      assert reexport or names, f'{path}: {ast.dump(node)[:80]}'


def test_public_packages_export_their_names():
  """`from generic_trainer.canned import DNNClassifierSpec` and `from
  generic_trainer import heads` work, without TensorFlow."""
  code = ('import sys\n'
          'from generic_trainer import heads\n'
          'from generic_trainer.canned import DNNClassifierSpec, Crossed\n'
          'heads.MultiClassHead(label_vocabulary=["a", "b", "c"])\n'
          "print(sorted(m for m in ('tensorflow', 'keras') if m in "
          'sys.modules))')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, env=command_env(), check=True)
  assert out.stdout.strip() == '[]', out.stdout + out.stderr


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


# What a module imports inside a function, and why (issue 25, "Imports a
# reader can see"): importing these costs seconds, needs an optional
# extra, or fixes what tf.keras means or Keras's backend for the process.
_HEAVY = {'tensorflow', 'keras', 'tf_keras', 'numpy', 'tfx', 'apache_beam',
          'tfx_bsl', 'tensorflow_transform', 'ml_metadata',
          'tensorflow_metadata', 'tensorflow_serving', 'jax', 'jaxlib',
          'google', 'absl', 'portpicker', 'jsonschema', 'yaml', 'h5py',
          'kfp', 'kubeflow', 'kubernetes', 'palmerpenguins', 'mkdocs',
          'ctypes'}
_DECIDES_THE_PROCESS = {'keras', 'tf_keras', 'jax', 'jaxlib', 'tfx',
                        'tensorflow_transform', 'apache_beam', 'tfx_bsl',
                        'ml_metadata', 'tensorflow_serving', 'kubeflow',
                        'kfp', 'kubernetes', 'palmerpenguins', 'mkdocs',
                        'ctypes'}
# Modules that must import light: the package and its __init__s, what
# users import (keys, errors, train_spec, heads, canned), and the command
# up to its argument checks; with everything they import at top level.
_LIGHT_ROOTS = ['generic_trainer.keys', 'generic_trainer.errors',
                'generic_trainer.train_spec', 'generic_trainer.resume',
                'generic_trainer.local.cli',
                'generic_trainer.local.cli_args', 'generic_trainer.__main__']
# Reads the process's start time before any import, on purpose.
_ORDERED_BY_HAND = {'generic_trainer.local.cli'}


def _top_level_imports(path):
  with open(path) as f:
    tree = ast.parse(f.read())
  found = set()
  for node in tree.body:
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
      found |= {_resolve(f'{node.module}.{a.name}') for a in node.names}
    elif isinstance(node, ast.Import):
      found |= {_resolve(a.name) for a in node.names}
  return found - {None}


def _light_modules():
  roots = [m for m, p in MODULES.items() if p.endswith('__init__.py')]
  roots += _LIGHT_ROOTS + [m for m in MODULES if room(m) == BASE and
                           m.split('.')[1:2] == ['heads']]
  roots += [m for m in MODULES if m.startswith(f'{PACKAGE}.canned')]
  light, todo = set(), roots
  while todo:
    module = todo.pop()
    if module in light or module not in MODULES:
      continue
    light.add(module)
    todo += list(_top_level_imports(MODULES[module]))
  return light


def _imported(node):
  if isinstance(node, ast.Import):
    return [a.name for a in node.names]
  if node.module.startswith(PACKAGE):
    return [f'{node.module}.{a.name}' for a in node.names]
  return [node.module]


def test_imports_inside_functions_keep_something_heavy_out():
  """An import inside a function keeps TensorFlow, TFX, Beam or an optional
  package out of a module that must import light (or, elsewhere, keeps
  tf.keras and Keras's backend undecided until the training decides
  them); every other import is at the top, where a reader sees it."""
  light = _light_modules()
  wrong = []
  for module, path in MODULES.items():
    if module in _ORDERED_BY_HAND:
      continue
    with open(path) as f:
      tree = ast.parse(f.read())
    for function in ast.walk(tree):
      if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        continue
      for node in function.body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or (
            getattr(node, 'level', 0)):
          continue
        names = _imported(node)
        roots = {n.split('.')[0] for n in names}
        if module in light:
          needed = bool(roots & _HEAVY) or any(
              _resolve(n) not in light for n in names
              if n.startswith(PACKAGE))
        else:
          needed = bool(roots & _DECIDES_THE_PROCESS)
        if not needed:
          wrong.append(f'{module}:{node.lineno} {ast.unparse(node)}')
  assert not wrong, 'move these to the top of their modules:\n' + '\n'.join(
      wrong)
