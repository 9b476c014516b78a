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
    self.label_key = None  # A str constant, or a list of them.
    self.feature_keys = None  # A list of str constants.
    for item in node.body:
      targets = (item.targets if isinstance(item, ast.Assign) else
                 [item.target] if isinstance(item, ast.AnnAssign) else [])
      for target in targets:
        if isinstance(target, ast.Name) and target.id in _HEAD_ATTRIBUTES:
          self.head = True
        elif (isinstance(target, ast.Name) and target.id == 'backend' and
              isinstance(item.value, ast.Constant)):
          self.backend = item.value.value
        elif isinstance(target, ast.Name) and target.id in (
            'label_key', 'feature_keys') and item.value is not None:
          names = _names(item.value)
          if names is None and not (isinstance(item.value, ast.Constant)
                                    and item.value.value is None):
            names = _UNKNOWN  # A name or a call: the source does not say.
          setattr(self, target.id, names)


_UNKNOWN = 'unknown'  # A member set to what the source does not say.


def _names(node: ast.AST):
  """A str constant, a list or tuple of them as a list, else None."""
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    return node.value
  if isinstance(node, (ast.List, ast.Tuple)) and all(
      isinstance(e, ast.Constant) and isinstance(e.value, str)
      for e in node.elts):
    return [e.value for e in node.elts]
  return None


class Declared:
  """What a module's one TrainSpec declares plainly in its source.

  Attributes:
    name: The TrainSpec class.
    labels: Its `label_key`(s), a list of column names.
    features: Its `feature_keys`, or None (every column).
    features_said: False when `feature_keys` is set to what the source
      does not say plainly (a name, a call): `features` is then None too.
    canned: The canned spec it derives from, by name ('DNNRegressorSpec'),
      or None; a canned spec fills a missing feature with 0 or '', as in a
      pipeline.
    classifier: Whether it is a canned classifier (its labels are
      classes, not amounts).
  """

  def __init__(self, name, labels, features, canned, classifier):
    self.name, self.labels = name, labels
    self.features_said = features != _UNKNOWN
    self.features = features if isinstance(features, list) else None
    self.canned, self.classifier = canned, classifier


def _module(path: str, entry: Optional[str]):
  """(classes, canned, ours) of a module plainly made of classes: its
  classes by name, the names bound to canned specs and to our package;
  None for a run_fn module (the entry point a function), a star import, a
  file that cannot be read."""
  try:
    tree = source_tree.read(path)
  except UserModuleError:
    return None  # Loading the module reports it, with the line.
  canned, ours = set(), set()
  classes: Dict[str, _Spec] = {}
  for node in tree.body:
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
      if any(a.name == '*' for a in node.names):
        return None
      for alias in node.names:
        bound = alias.asname or alias.name
        if node.module.startswith(_CANNED) and alias.name.endswith('Spec'):
          canned.add(bound)
        elif node.module.startswith('generic_trainer'):
          ours.add(bound)
    elif isinstance(node, ast.FunctionDef) and node.name == (
        entry or RUN_FN_KEY):
      return None
    elif isinstance(node, ast.ClassDef):
      classes[node.name] = _Spec(node)
  return classes, canned, ours


def declared(path: str, entry: Optional[str] = None) -> Optional[Declared]:
  """What the module's TrainSpec (the class `entry`, when named) declares
  of its columns, when its source says it plainly: its label(s) as str
  constants in the class or a base of the module; None otherwise (a
  run_fn, several TrainSpecs, a label computed or inherited from
  elsewhere). Read before TensorFlow loads, for the checks of the data's
  header (`data.first_look`)."""
  if not isinstance(path, str) or not os.path.isfile(path):
    return None
  found = _module(path, entry)
  if found is None:
    return None
  classes, canned, ours = found
  specs = [s for s in classes.values() if (not entry or s.name == entry)
           and _kind(s, classes, canned, ours, set()) in ('headed', 'plain')]
  if len(specs) != 1:
    return None
  spec = specs[0]
  labels = _inherited(spec, classes, 'label_key')
  if isinstance(labels, str) and labels != _UNKNOWN:
    labels = [labels]
  if not isinstance(labels, list) or not labels:
    return None
  features = _inherited(spec, classes, 'feature_keys')
  bases = _canned_bases(spec, classes, canned)
  return Declared(spec.name, list(labels), features,
                  canned=bases[0] if bases else None,
                  classifier=any('Classifier' in b for b in bases))


def is_run_fn(path: str, entry: Optional[str] = None) -> bool:
  """Whether the module plainly defines its entry point (`entry`, else
  `run_fn`) as a top-level function."""
  try:
    tree = source_tree.read(path)
  except UserModuleError:
    return False
  return any(isinstance(node, ast.FunctionDef) and node.name == (
      entry or RUN_FN_KEY) for node in tree.body)


def _inherited(spec: _Spec, classes: Dict[str, _Spec], member: str,
               seen=frozenset()):
  """The class's own `member`, or the nearest base's in the module."""
  own = getattr(spec, member)
  if own is not None or spec.name in seen:
    return own
  for base in spec.bases:
    if base in classes:
      found = _inherited(classes[base], classes, member, seen | {spec.name})
      if found is not None:
        return found
  return None


def _canned_bases(spec: _Spec, classes: Dict[str, _Spec], canned: set,
                  seen=frozenset()) -> list:
  """The canned specs the class derives from, by their names."""
  found = []
  for base in spec.bases:
    name = (base or '').split('.')[-1]
    if base in canned or (base or '').startswith(_CANNED + '.'):
      found.append(name)
    elif base in classes and base not in seen:
      found += _canned_bases(classes[base], classes, canned,
                             seen | {spec.name})
  return found


def headed_specs(path: str,
                 entry: Optional[str] = None) -> Dict[str, Optional[str]]:
  """{class: its `backend` or None} of the module's TrainSpec classes
  (or of the class `entry`, when the entry point is named) that have a
  head, when the module is plainly a TrainSpec module whose every TrainSpec
  has one; else {} (a run_fn, a class whose kind or head the source does
  not say, a star import, a file that cannot be read)."""
  module = _module(path, entry)
  if module is None:
    return {}
  classes, canned, ours = module
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
