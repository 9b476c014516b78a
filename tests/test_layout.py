"""The package's layout: layers that import downwards only, no cycles, light
package __init__s. Read with `ast`, without importing TensorFlow."""

import ast
import io
import os
import re
import subprocess
import sys
import tokenize

import pytest

from conftest import REPO, command_env

PACKAGE = 'generic_trainer'
ROOT = os.path.join(REPO, PACKAGE)
# Rooms: the stages of a training, highest layer first; a module may import
# from its own room and the layers below it, never upwards or sideways. The
# entry points sit on top (the component, which renders TFJobs, above the
# command and the notebook); `training` runs the attempt (the plan in this
# process's cluster environment, then stage, train through `launch`,
# validate with `export_checks`, gate, publish through `publication`);
# `launch` trains where the plan says, building what user code receives
# (`fnargs`), or launching a Kubeflow step's job (`kubeflow`, which also
# compiles pipelines and renders jobs); `plan` resolves the training and loads the
# user's code (`usercode`, which reads tf.estimator modules through
# `migration`); a TrainSpec trains in `loop`, on `data`. Top-level modules
# and BASE_PACKAGES are the base.
LAYERS = [
    [PACKAGE, '__main__'],
    ['component'],
    ['command', 'notebook'],
    ['training'],
    ['export_checks', 'publication', 'launch'],
    ['kubeflow'],
    ['fnargs'],
    ['plan'],
    ['usercode'],
    ['migration'],
    ['canned'],
    ['loop'],
    ['data'],
    ['trainspec'],
]
BASE = 'base'
# Heads are part of what a TrainSpec declares (its model, loss and metrics
# are built with one); `system` is the plumbing every stage uses (atomic
# files, locks, scratch folders, paths, the machine's size, signals).
BASE_PACKAGES = ['heads', 'system']
# Subpackages users import names from (`from generic_trainer.canned import
# DNNClassifierSpec`): their __init__ re-exports those names, as attrs'
# thin __init__ does, from their own modules, none of which imports
# anything heavy at import time.
PUBLIC_PACKAGES = ['heads', 'canned']
# Public packages whose names import TFX: their __init__ loads them on first
# use (a module `__getattr__` over a {name: module} table), so importing the
# package stays light.
LAZY_PUBLIC_PACKAGES = ['component']


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
  if len(parts) == 1:  # The package's __init__: the public names, re-exported.
    return PACKAGE
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
  assert rank(room('generic_trainer.fnargs.fn_args')) > rank(
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
          'Import', 'Assign', 'FunctionDef'}, path
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


@pytest.mark.parametrize('entry', ['generic_trainer.component.executor.GenericExecutor',
                                   'generic_trainer.command.cli.main'])
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
# extra, or fixes what tf.keras means for the process (Keras's backend is
# decided by the plan, before the loop's modules load: `system.keras_env`).
_HEAVY = {'tensorflow', 'keras', 'tf_keras', 'numpy', 'tfx', 'apache_beam',
          'tfx_bsl', 'tensorflow_transform', 'ml_metadata',
          'tensorflow_metadata', 'tensorflow_serving', 'jax', 'jaxlib',
          'google', 'absl', 'portpicker', 'jsonschema', 'yaml', 'h5py',
          'kfp', 'kubeflow', 'kubeflow_trainer_api', 'kubernetes',
          'palmerpenguins', 'mkdocs', 'ctypes'}
_DECIDES_THE_PROCESS = {'tf_keras', 'jax', 'jaxlib', 'tfx',
                        'tensorflow_transform', 'apache_beam', 'tfx_bsl',
                        'ml_metadata', 'kubeflow', 'kubeflow_trainer_api',
                        'kfp', 'kubernetes', 'palmerpenguins', 'mkdocs',
                        'ctypes'}
# Modules that must import light: the package and its __init__s, what
# users import (keys, errors, train_spec, heads, canned), and the command
# up to its argument checks, and the program that puts a local worker in
# its network (a thread a heavy import starts there makes the kernel
# refuse it); with everything they import at top level.
_LIGHT_ROOTS = ['generic_trainer.keys', 'generic_trainer.errors',
                'generic_trainer.launch.network_entry',
                'generic_trainer.trainspec.spec',
                'generic_trainer.command.cli',
                'generic_trainer.command.cli_args', 'generic_trainer.__main__']
# Modules that import no TFX, Apache Beam or tfx_bsl's Beam parts at the
# top: the command's and the notebook's training path of a TrainSpec, which
# starts training soon after TensorFlow is imported (with everything they
# import at top level). An import of TFX inside a function keeps it off.
_NO_TFX_ROOTS = ['generic_trainer.command.run', 'generic_trainer.training.attempt',
                 'generic_trainer.launch.launcher',
                 'generic_trainer.notebook.estimator']
_TFX = {'tfx', 'apache_beam', 'ml_metadata', 'tensorflow_transform'}
# Reads the process's start time before any import, on purpose.
_ORDERED_BY_HAND = {'generic_trainer.command.cli'}


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


def _closure(roots):
  """`roots` and every package module they import at top level."""
  found, todo = set(), list(roots)
  while todo:
    module = todo.pop()
    if module in found or module not in MODULES:
      continue
    found.add(module)
    todo += list(_top_level_imports(MODULES[module]))
  return found


def _light_modules():
  roots = [m for m, p in MODULES.items() if p.endswith('__init__.py')]
  roots += _LIGHT_ROOTS + [m for m in MODULES if room(m) == BASE and
                           m.split('.')[1:2] == ['heads']]
  roots += [m for m in MODULES if m.startswith(f'{PACKAGE}.canned')]
  return _closure(roots)


def _imported(node):
  if isinstance(node, ast.Import):
    return [a.name for a in node.names]
  if node.module.startswith(PACKAGE):
    return [f'{node.module}.{a.name}' for a in node.names]
  return [node.module]


def _imports_in_functions(tree):
  """(import node) of every import inside a function, at any depth (in an
  `if`, a `try`, a `with`, a nested function), each once."""
  found = []

  def visit(node, in_function):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
        found.append(child)
      visit(child, in_function or isinstance(
          child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

  visit(tree, False)
  return found


def _misplaced_imports():
  light = _light_modules()
  no_tfx = _closure(_NO_TFX_ROOTS)
  wrong = []
  for module, path in MODULES.items():
    if module in _ORDERED_BY_HAND:
      continue
    with open(path) as f:
      tree = ast.parse(f.read())
    # What the module imports at the top already, none of its functions
    # keeps out.
    at_top = {n.split('.')[0] for node in tree.body
              if isinstance(node, (ast.Import, ast.ImportFrom))
              and not getattr(node, 'level', 0)
              for n in _imported(node) if not n.startswith(PACKAGE)}
    for node in _imports_in_functions(tree):
      if getattr(node, 'level', 0):
        continue
      names = _imported(node)
      roots = {n.split('.')[0] for n in names} - at_top
      if module in light:
        needed = bool(roots & _HEAVY) or any(
            _resolve(n) not in light for n in names
            if n.startswith(PACKAGE))
      elif module in no_tfx:
        needed = bool(roots & (_DECIDES_THE_PROCESS | _TFX)) or any(
            _resolve(n) not in no_tfx for n in names
            if n.startswith(PACKAGE))
      else:
        needed = bool(roots & _DECIDES_THE_PROCESS)
      if not needed:
        wrong.append(f'{module}:{node.lineno} {ast.unparse(node)}')
  return wrong


def test_imports_inside_functions_keep_something_heavy_out():
  """An import inside a function (in its body, or in an `if`, `try` or
  `with` block of it) keeps TensorFlow, TFX, Beam or an optional package
  out of a module that must import light (or, elsewhere, keeps tf.keras
  and Keras's backend undecided until the training decides them); every
  other import is at the top, where a reader sees it."""
  wrong = _misplaced_imports()
  assert not wrong, 'move these to the top of their modules:\n' + '\n'.join(
      wrong)


def test_the_training_path_of_a_trainspec_imports_no_tfx():
  """The command's and the notebook's path to a TrainSpec's training (the
  attempt, the launcher, this process's training, FnArgs of local files)
  loads TensorFlow and Keras, not TFX or Apache Beam: a TrainSpec starts
  training seconds sooner."""
  code = ('import sys\n'
          + ''.join(f'import {m}\n' for m in _NO_TFX_ROOTS)
          + "print(sorted(m for m in ('tfx', 'apache_beam') "
            'if m in sys.modules))')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, env=command_env(), check=True)
  assert out.stdout.strip().splitlines()[-1] == '[]', out.stdout + out.stderr


def test_the_import_rule_sees_imports_in_nested_blocks():
  """The rule above finds an import inside an `if`, a `try` and a `with`
  of a function, and not one at the top."""
  tree = ast.parse('import os\n'
                   'def f():\n'
                   '  if x:\n    import json\n'
                   '  try:\n    import re\n  except ImportError:\n    pass\n'
                   '  with y:\n    from a import b\n')
  assert [ast.unparse(n) for n in _imports_in_functions(tree)] == [
      'import json', 'import re', 'from a import b']


# The most imports inside functions the package keeps (issue 45, "Lazy
# imports declared once"): a heavy module is a `system.lazy` object
# imported at the top; what is left imports a module of ours that imports
# TensorFlow or TFX at its top into a module that must import light, or
# imports TensorFlow on purpose (`console.import_tensorflow`). Counted by
# `_imports_in_functions` (each import statement inside a function, at any
# depth, once): 12 at issue 54; lower it when one goes, never raise it.
MAX_IMPORTS_IN_FUNCTIONS = 12


def test_few_imports_inside_functions():
  """Imports inside functions are the exception: at most
  MAX_IMPORTS_IN_FUNCTIONS in the whole package."""
  count = {}
  for module, path in MODULES.items():
    with open(path) as f:
      count[module] = len(_imports_in_functions(ast.parse(f.read())))
  total = sum(count.values())
  top = sorted(count.items(), key=lambda kv: -kv[1])[:8]
  assert total <= MAX_IMPORTS_IN_FUNCTIONS, f'{total} imports: {top}'


def test_no_module_imports_a_name_twice():
  """Each name is imported once per module: not twice at the top, and not
  again inside a function when the top already has it."""
  wrong = []
  for module, path in MODULES.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    inner = ([] if module in _ORDERED_BY_HAND else
             _imports_in_functions(tree))

    def bound(node):
      return {(node.module if isinstance(node, ast.ImportFrom) else None,
               a.name, a.asname) for a in node.names}

    seen = set()
    for node in top:
      twice = bound(node) & seen
      if twice:
        wrong.append(f'{module}:{node.lineno} {sorted(map(str, twice))}')
      seen |= bound(node)
    for node in inner:
      if bound(node) & seen:
        wrong.append(f'{module}:{node.lineno} {ast.unparse(node)} (also at '
                     'the top)')
  assert not wrong, wrong


def _package_docstrings():
  """{package: (docstring, its modules' and subpackages' names)}."""
  found = {}
  for module, path in MODULES.items():
    if not path.endswith('__init__.py') or module == PACKAGE:
      continue
    with open(path) as f:
      doc = ast.get_docstring(ast.parse(f.read())) or ''
    folder = os.path.dirname(path)
    names = {n[:-3] for n in os.listdir(folder)
             if n.endswith('.py') and n != '__init__.py'}
    names |= {n for n in os.listdir(folder)
              if os.path.isfile(os.path.join(folder, n, '__init__.py'))}
    found[module] = (doc, names)
  return found


def test_package_docstrings_name_every_module():
  """Each package's docstring names each of its modules and subpackages
  (as `name` or `name/`), so that it says what the package holds."""
  missing = [f'{package}: {name}'
             for package, (doc, names) in _package_docstrings().items()
             for name in sorted(names)
             if f'`{name}`' not in doc and f'`{name}/`' not in doc
             and f'`{name}.' not in doc]
  assert not missing, missing


def test_package_docstrings_allow_what_the_code_imports():
  """Each package's "May import" says which packages it may import: every
  room its modules do import is named there (as `name`), or the
  docstring allows the layers below it (which `LAYERS` then holds)."""
  wrong = []
  for package, (doc, _) in _package_docstrings().items():
    allowed = doc[doc.index('May import'):]
    if 'every layer below' in allowed or 'layers below' in allowed:
      continue  # The layer rule above holds it.
    own = room(package)
    imported = {room(t) for m, targets in GRAPH.items()
                if m == package or m.startswith(package + '.')
                for t in targets} - {own, BASE}
    for target in sorted(imported):
      if f'`{target}`' not in allowed:
        wrong.append(f'{package} imports {target}, which its docstring '
                     'does not allow')
  assert not wrong, wrong


def test_light_modules_import_nothing_heavy_at_the_top():
  """What must import light (the package's __init__s, what users import,
  the command up to its flags' checks) imports TensorFlow, TFX, Keras,
  numpy and the like only inside the functions that need them."""
  wrong = []
  for module in sorted(_light_modules()):
    with open(MODULES[module]) as f:
      tree = ast.parse(f.read())
    for node in tree.body:
      if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(
          node, 'level', 0):
        heavy = {n.split('.')[0] for n in _imported(node)} & _HEAVY
        if heavy:
          wrong.append(f'{module}:{node.lineno} {ast.unparse(node)}')
  assert not wrong, wrong


def _comments(source: str):
  """{line number: the comment on it, pylint directives removed}."""
  found = {}
  for token in tokenize.generate_tokens(io.StringIO(source).readline):
    if token.type == tokenize.COMMENT:
      text = re.sub(r'#\s*pylint:.*$', '', token.string).strip('# \t')
      found[token.start[0]] = text
  return found


def _why(lines, comments, node) -> str:
  """The comment that says why `node`, an import inside a function, is
  there: on its line, else the comment lines just above it (or above the
  run of imports it ends)."""
  if comments.get(node.lineno):
    return comments[node.lineno]
  above = node.lineno - 1
  while above > 0 and re.match(r'\s*(import|from)\s', lines[above - 1]):
    above -= 1  # A run of imports shares the comment above it.
  why = []
  while above > 0 and lines[above - 1].lstrip().startswith('#'):
    why.insert(0, comments.get(above, ''))
    above -= 1
  return ' '.join(w for w in why if w)


def test_every_import_inside_a_function_says_why():
  """Each import left inside a function has a comment, on its line or just
  above, saying why it is not at the top (a pylint directive alone says
  nothing)."""
  silent = []
  for module, path in sorted(MODULES.items()):
    with open(path) as f:
      source = f.read()
    lines, comments = source.splitlines(), _comments(source)
    for node in _imports_in_functions(ast.parse(source)):
      if not _why(lines, comments, node):
        silent.append(f'{module}:{node.lineno} {ast.unparse(node)}')
  assert not silent, 'say why these stay inside their functions:\n' + (
      '\n'.join(silent))


def test_the_why_rule_sees_a_silent_import():
  """The rule above takes a comment on the line, above it or above a run
  of imports, and not a bare pylint directive."""
  source = ('def f():\n'
            '  import a  # pylint: disable=g-import-not-at-top\n'
            '  import b  # Inside: b is heavy.\n'
            '  # Inside: c and d are heavy.\n'
            '  import c  # pylint: disable=g-import-not-at-top\n'
            '  import d\n')
  lines, comments = source.splitlines(), _comments(source)
  found = {ast.unparse(n): _why(lines, comments, n)
           for n in _imports_in_functions(ast.parse(source))}
  assert found == {'import a': '', 'import b': 'Inside: b is heavy.',
                   'import c': 'Inside: c and d are heavy.',
                   'import d': 'Inside: c and d are heavy.'}


LAZY = f'{PACKAGE}.system.lazy'


def _lazy_declarations():
  """[(module, line, the lazily imported module's name)] of every
  `LazyModule(...)` call in the package."""
  found = []
  for module, path in sorted(MODULES.items()):
    with open(path) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if isinstance(node, ast.Call) and 'LazyModule' in (
          getattr(node.func, 'id', None), getattr(node.func, 'attr', None)):
        name = node.args[0].value if node.args and isinstance(
            node.args[0], ast.Constant) else None
        found.append((module, node.lineno, name))
  return found


def test_heavy_modules_are_declared_lazily_once_in_system_lazy():
  """`system.lazy` alone declares LazyModule objects, each at its top
  level, one per module name; the others import those objects."""
  declared = _lazy_declarations()
  elsewhere = [f'{m}:{line}' for m, line, _ in declared if m != LAZY]
  assert not elsewhere, f'declare these in {LAZY}: {elsewhere}'
  names = [name for _, _, name in declared]
  assert len(names) >= 20 and None not in names, declared
  assert len(set(names)) == len(names), sorted(
      n for n in names if names.count(n) > 1)
  with open(MODULES[LAZY]) as f:
    tree = ast.parse(f.read())
  at_top = [n.value.args[0].value for n in tree.body
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)
            and getattr(n.value.func, 'id', None) == 'LazyModule']
  assert sorted(at_top) == sorted(names)


def _lazy_names(tree):
  """The names a module binds to `system.lazy`'s module objects."""
  return {a.asname or a.name for node in tree.body
          if isinstance(node, ast.ImportFrom) and node.module == LAZY
          for a in node.names} - {'installed', 'LazyModule'}


def _read_at_import(tree):
  """Lines where a module reads one of its lazy modules while it is being
  imported: at its top level, in a class body, a decorator, a default
  argument or an annotation (anywhere but a function's body)."""
  names, found = _lazy_names(tree), []

  def visit(node, in_body):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      arguments = node.args
      evaluated = list(arguments.defaults) + [
          d for d in arguments.kw_defaults if d]
      if not isinstance(node, ast.Lambda):
        evaluated += node.decorator_list + [node.returns] + [
            a.annotation for a in arguments.posonlyargs + arguments.args +
            arguments.kwonlyargs + [arguments.vararg, arguments.kwarg]
            if a is not None]
      for part in evaluated:
        if part is not None:
          visit(part, in_body)
      body = [node.body] if isinstance(node, ast.Lambda) else node.body
      for statement in body:
        visit(statement, True)
      return
    if isinstance(node, ast.Name) and node.id in names and not in_body:
      found.append(node.lineno)
    for child in ast.iter_child_nodes(node):
      visit(child, in_body)

  visit(tree, False)
  return found


def test_lazy_modules_are_read_only_inside_functions():
  """No module reads a `system.lazy` module while it is itself imported
  (that would import TensorFlow, TFX... there), and the check sees one
  that does."""
  wrong = []
  for module, path in sorted(MODULES.items()):
    with open(path) as f:
      lines = _read_at_import(ast.parse(f.read()))
    wrong += [f'{module}:{line}' for line in lines]
  assert not wrong, wrong
  tree = ast.parse(f'from {LAZY} import tf\n'
                   'def f(x=tf.float32):\n  return tf.constant(x)\n'
                   'class A:\n  kind = tf.string\n')
  assert _read_at_import(tree) == [2, 5]


def test_importing_the_light_modules_loads_nothing_heavy():
  """Every module that must import light (the __init__s, what users
  import, the command up to its flags' checks, and all they import at the
  top) imports, with the lazy modules they hold, no TensorFlow, Keras,
  TFX, numpy or absl."""
  light = sorted(m for m in _light_modules() if m != f'{PACKAGE}.__main__')
  assert LAZY in light
  code = ('import sys\n' + ''.join(f'import {m}\n' for m in light)
          + "print(sorted(m for m in ('tensorflow', 'keras', 'tf_keras', "
            "'tfx', 'tfx_bsl', 'tensorflow_transform', 'apache_beam', "
            "'numpy', 'jax', 'absl') if m in sys.modules))")
  out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, env=command_env(), check=True)
  assert out.stdout.strip() == '[]', out.stdout + out.stderr
