"""What a module file's TrainSpec declares, read with `ast`, not run.

At pipeline construction (and when the command parses its arguments) the
module is not imported: importing it would import TensorFlow and Keras,
seconds and a backend choice too early. What its source says plainly is
enough to refuse one mistake then rather than at run time: a TrainSpec with
a head (every canned spec has one) on JAX (docs/errors.md, row 222; row 115
is the same refusal at run time, for what the source does not say plainly:
a head inherited from a class of another module, or `module_path`).
"""

import ast
import os
from typing import Dict, Optional

from generic_trainer.system import source_tree
from generic_trainer.errors import InvalidArgumentError, UserModuleError
from generic_trainer.keys import JAX_BACKEND, MODULE_FILE_KEY, RUN_FN_KEY

_CANNED = 'generic_trainer.canned'
_HEAD_ATTRIBUTES = ('head', 'heads')


class _Spec:
  """A class of the module: its bases, and what its body says."""

  def __init__(self, node: ast.ClassDef):
    self.name = node.name
    self.bases = [source_tree.dotted(b) for b in node.bases]
    self.head = False
    self.backend = None
    for item in node.body:
      targets = (item.targets if isinstance(item, ast.Assign) else
                 [item.target] if isinstance(item, ast.AnnAssign) else [])
      for target in targets:
        if isinstance(target, ast.Name) and target.id in _HEAD_ATTRIBUTES:
          self.head = True
        elif (isinstance(target, ast.Name) and target.id == 'backend' and
              isinstance(item.value, ast.Constant)):
          self.backend = item.value.value


def headed_specs(path: str,
                 entry: Optional[str] = None) -> Dict[str, Optional[str]]:
  """{class: its `backend` or None} of the module's TrainSpec classes
  (or of the class `entry`, when the entry point is named) that have a
  head, when the module is plainly a TrainSpec module whose every TrainSpec
  has one; else {} (a run_fn, a class whose kind or head the source does
  not say, a star import, a file that cannot be read)."""
  try:
    tree = source_tree.read(path)
  except UserModuleError:
    return {}  # Loading the module reports it, with the line.
  canned, ours = set(), set()  # Names bound to canned specs, our package.
  classes: Dict[str, _Spec] = {}
  for node in tree.body:
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
      if any(a.name == '*' for a in node.names):
        return {}
      for alias in node.names:
        bound = alias.asname or alias.name
        if node.module.startswith(_CANNED) and alias.name.endswith('Spec'):
          canned.add(bound)
        elif node.module.startswith('generic_trainer'):
          ours.add(bound)
    elif isinstance(node, ast.FunctionDef) and node.name == (
        entry or RUN_FN_KEY):
      return {}
    elif isinstance(node, ast.ClassDef):
      classes[node.name] = _Spec(node)
  found = {}
  for spec in classes.values():
    if entry and spec.name != entry:
      continue
    kind = _kind(spec, classes, canned, ours, set())
    if kind in ('plain', None):
      return {}  # A TrainSpec without a head may be the entry point.
    if kind == 'headed':
      found[spec.name] = _backend(spec, classes)
  return found


def check_heads_on_jax(path: str, backend: Optional[str], source: str,
                       entry: Optional[str] = None) -> None:
  """Refuses a module whose TrainSpec has a head when it would train on
  JAX: `backend` ('jax', from `source`: "backend='jax'", '--backend=jax')
  or the spec's own `backend = 'jax'`.

  Raises:
    InvalidArgumentError: naming the spec, the backend and what to do.
  """
  if not isinstance(path, str) or '://' in path or not os.path.isfile(path):
    return
  for name, own in headed_specs(path, entry).items():
    chosen, where = (backend, source) if backend else (
        own, f"{name}.backend='jax'")
    if chosen != JAX_BACKEND:
      continue
    file_flag = ('--module-file' if source.startswith('--') else
                 MODULE_FILE_KEY)
    raise InvalidArgumentError(
        f'{where} cannot train {name} of {path}: it has a head (every '
        "canned spec has one), and a head's export signatures call the "
        'model from TensorFlow, which a JAX model cannot be called from. '
        'Expected a TrainSpec without a head on JAX, or TensorFlow. '
        f'Received: {where}, {file_flag}={path!r}. Train it on TensorFlow '
        "(backend='tensorflow', or leave it unset), or drop the head and "
        'give build_loss and build_metrics.')


def _kind(spec: _Spec, classes: Dict[str, _Spec], canned: set, ours: set,
          seen: set) -> Optional[str]:
  """'headed', 'plain' (a TrainSpec without a head), 'other' (not a
  TrainSpec), or None when the source does not say."""
  if spec.name in seen:
    return None
  seen = seen | {spec.name}
  kinds = []
  for base in spec.bases:
    root = base.split('.')[0] if base else None
    if base is None:
      return None
    if base in canned or (base.startswith(_CANNED + '.') and
                          base.endswith('Spec')) or (
                              base.split('.')[-1].endswith('Spec') and
                              root == 'canned' and 'canned' in ours):
      kinds.append('headed')
    elif base.split('.')[-1] == 'TrainSpec' and (root in ours or
                                                 base.startswith(
                                                     'generic_trainer.')):
      kinds.append('plain')
    elif base in classes:
      kinds.append(_kind(classes[base], classes, canned, ours, seen))
    elif root in ours or base.startswith('generic_trainer'):
      return None  # Another name of ours: cannot say.
    else:
      kinds.append('other')
  if None in kinds:
    return None
  if 'headed' in kinds or (spec.head and 'plain' in kinds):
    return 'headed'
  if 'plain' in kinds:
    return 'plain'
  return 'other' if not spec.head else None


def _backend(spec: _Spec, classes: Dict[str, _Spec]) -> Optional[str]:
  """The class's own `backend`, or the nearest base's in the module."""
  if spec.backend is not None:
    return spec.backend
  for base in spec.bases:
    if base in classes:
      found = _backend(classes[base], classes)
      if found is not None:
        return found
  return None
