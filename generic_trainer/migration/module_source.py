"""Reads a tf.estimator module's settings from its source, without running it.

A TFX module of the Estimator era cannot be imported any more (TF 2.16
removed `tf.estimator`), so what it configures is read from its syntax
tree: `Reader(source)` evaluates the constant part of the module (literals,
module constants, arithmetic, comprehensions, calls to its own small
functions such as `_transformed_name`, and `tf.feature_column` calls), and
leaves what it cannot compute as `Unknown`, with its line.

`estimator_uses` finds where a module touches tf.estimator. Only `ast`: importing this module loads no TensorFlow.
"""

import ast
import dataclasses
import math
from typing import Any, Dict, List, Optional, Tuple

from generic_trainer.system import source_tree

_BUILTINS = {'max': max, 'min': min, 'int': int, 'float': float, 'str': str,
             'range': range, 'len': len, 'zip': zip, 'list': list,
             'round': round, 'sorted': sorted, 'abs': abs, 'sum': sum,
             'tuple': tuple, 'dict': dict, 'enumerate': enumerate,
             'bool': bool}
_MATH = {'sqrt': math.sqrt, 'ceil': math.ceil, 'floor': math.floor,
         'log': math.log, 'pow': pow}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Pow: lambda a, b: a ** b}
_DEPTH = 6


class Unknown:
  """A value the source computes from what is known only when it runs."""

  def __init__(self, node: ast.AST, source: str):
    self.line = getattr(node, 'lineno', 0)
    self.text = ast.get_source_segment(source, node) or ast.dump(node)[:60]

  def __repr__(self):
    return f'<line {self.line}: {self.text}>'

  def __bool__(self):
    raise _Unknowable(self)


class Call:
  """A call the module makes to a library (`tf.feature_column.*`, an
  Estimator, an optimizer): its dotted name and evaluated arguments."""

  def __init__(self, name: str, args: List[Any], kwargs: Dict[str, Any],
               node: ast.AST):
    self.name = name
    self.args = args
    self.kwargs = kwargs
    self.line = getattr(node, 'lineno', 0)

  @property
  def short(self) -> str:
    return self.name.rsplit('.', 1)[-1]

  def arg(self, index: int, keyword: str, default=None):
    if keyword in self.kwargs:
      return self.kwargs[keyword]
    return self.args[index] if len(self.args) > index else default

  def __repr__(self):
    return f'{self.short}({self.args}, {self.kwargs})'


def _iterable(value) -> bool:
  """Whether a value the reader knows can be looped over: a list, a zip...
  but not a `Call` (what another module's function returns is not known
  here) nor a number."""
  return hasattr(value, '__iter__') and not isinstance(value, (Call, Unknown))


class _Unknowable(Exception):

  def __init__(self, unknown: Unknown):
    super().__init__(repr(unknown))
    self.unknown = unknown


class Reader:
  """The module's constants, functions and calls, evaluated where it can."""

  def __init__(self, source: str):
    self.source = source
    self.tree = source_tree.parse(source)
    self.functions = {n.name: n for n in self.tree.body
                      if isinstance(n, ast.FunctionDef)}
    self.constants: Dict[str, Any] = {}
    self.lines: Dict[str, int] = {}
    self._run(self.tree.body, self.constants, 0, stop=None)

  # Evaluation.
  def value(self, node: ast.AST, env: Dict[str, Any], depth: int = 0):
    """The value of `node` in `env`, or an Unknown."""
    try:
      return self._eval(node, env, depth)
    except _Unknowable as e:
      if isinstance(node, ast.Name):
        return e.unknown
      return Unknown(node, self.source)
    except Exception:  # pylint: disable=broad-except
      return Unknown(node, self.source)

  def _known(self, node, env, depth):
    value = self._eval(node, env, depth)
    if isinstance(value, Unknown):
      raise _Unknowable(value)
    return value

  def _eval(self, node, env, depth):  # pylint: disable=too-many-return-statements,too-many-branches
    if isinstance(node, ast.Constant):
      return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
      items = []
      for element in node.elts:
        if isinstance(element, ast.Starred):
          items.extend(self._known(element.value, env, depth))
        else:
          items.append(self.value(element, env, depth))
      return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.Dict):
      return {self._known(k, env, depth): self.value(v, env, depth)
              for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name):
      if node.id in env:
        return env[node.id]
      if node.id in self.constants:
        return self.constants[node.id]
      if node.id in ('True', 'False', 'None'):
        return {'True': True, 'False': False, 'None': None}[node.id]
      return Unknown(node, self.source)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
      return _BINOPS[type(node.op)](self._known(node.left, env, depth),
                                    self._known(node.right, env, depth))
    if isinstance(node, ast.UnaryOp):
      operand = self._known(node.operand, env, depth)
      return {ast.USub: lambda v: -v, ast.UAdd: lambda v: v,
              ast.Not: lambda v: not v}[type(node.op)](operand)
    if isinstance(node, ast.BoolOp):
      result = None
      for value in node.values:
        result = self._known(value, env, depth)
        if isinstance(node.op, ast.Or) == bool(result):
          return result
      return result
    if isinstance(node, ast.IfExp):
      branch = node.body if self._known(node.test, env, depth) else node.orelse
      return self._eval(branch, env, depth)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
      left = self._known(node.left, env, depth)
      right = self._known(node.comparators[0], env, depth)
      return {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
              ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
              ast.Lt: lambda a, b: a < b, ast.Gt: lambda a, b: a > b,
              ast.LtE: lambda a, b: a <= b, ast.GtE: lambda a, b: a >= b,
              ast.Is: lambda a, b: a is b, ast.IsNot: lambda a, b: a is not b,
              }[type(node.ops[0])](left, right)
    if isinstance(node, ast.Subscript):
      container = self._known(node.value, env, depth)
      index = node.slice
      if isinstance(index, ast.Slice):
        part = [self._known(p, env, depth) if p else None
                for p in (index.lower, index.upper, index.step)]
        return container[slice(*part)]
      return container[self._known(index, env, depth)]
    if isinstance(node, ast.JoinedStr):
      return ''.join(str(self._known(v.value, env, depth))
                     if isinstance(v, ast.FormattedValue) else v.value
                     for v in node.values)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
      return self._comprehension(node, env, depth)
    if isinstance(node, ast.Call):
      return self._call(node, env, depth)
    return Unknown(node, self.source)

  def _comprehension(self, node, env, depth):
    results = []

    def loop(generators, scope):
      if not generators:
        results.append(self.value(node.elt, scope, depth))
        return
      first = generators[0]
      iterable = self._known(first.iter, scope, depth)
      if not _iterable(iterable):
        raise _Unknowable(Unknown(first.iter, self.source))
      for item in iterable:
        inner = dict(scope)
        self._bind(first.target, item, inner)
        if all(self._known(c, inner, depth) for c in first.ifs):
          loop(generators[1:], inner)

    loop(node.generators, dict(env))
    return results

  def _bind(self, target, value, env):
    if isinstance(target, ast.Name):
      env[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
      if not _iterable(value):
        raise _Unknowable(Unknown(target, self.source))
      values = list(value)
      for t, v in zip(target.elts, values):
        self._bind(t, v, env)
    else:
      raise _Unknowable(Unknown(target, self.source))

  def _call(self, node, env, depth):
    name = source_tree.dotted(node.func)
    if isinstance(node.func, ast.Attribute) and name is None or (
        isinstance(node.func, ast.Attribute) and
        node.func.attr in ('format', 'upper', 'lower', 'strip', 'replace',
                           'join') and
        not (name and name.split('.')[0] in ('tf', 'tensorflow'))):
      receiver = self._known(node.func.value, env, depth)
      if isinstance(receiver, str):
        args = [self._known(a, env, depth) for a in node.args]
        return getattr(receiver, node.func.attr)(*args)
      raise _Unknowable(Unknown(node, self.source))
    if name in _BUILTINS and name not in env:
      args = [self._known(a, env, depth) for a in node.args]
      return _BUILTINS[name](*args)
    if name and name.startswith('math.') and name[5:] in _MATH:
      return _MATH[name[5:]](*[self._known(a, env, depth) for a in node.args])
    if name in self.functions and depth < _DEPTH:
      return self.call_function(name, node, env, depth + 1)
    if name and '.' in name:  # A library call: kept with its arguments.
      return Call(name, [self.value(a, env, depth) for a in node.args],
                  {k.arg: self.value(k.value, env, depth)
                   for k in node.keywords if k.arg}, node)
    return Unknown(node, self.source)

  def call_function(self, name: str, call: Optional[ast.Call],
                    env: Dict[str, Any], depth: int = 1):
    """What the module's function `name` returns when `call` calls it."""
    function = self.functions[name]
    scope = self.arguments(function, call, env, depth)
    result = self._run(function.body, scope, depth, stop=None)
    if isinstance(result, _Return):
      return result.value
    return None

  def arguments(self, function: ast.FunctionDef, call: Optional[ast.Call],
                env: Dict[str, Any], depth: int = 0) -> Dict[str, Any]:
    """The function's parameters bound as `call` (or nothing) binds them."""
    params = function.args.args
    defaults = [None] * (len(params) - len(function.args.defaults)) + list(
        function.args.defaults)
    scope = {}
    for param, default in zip(params, defaults):
      scope[param.arg] = (self.value(default, {}, depth) if default is not None
                          else Unknown(param, self.source))
    if call is not None:
      for param, arg in zip(params, call.args):
        scope[param.arg] = self.value(arg, env, depth)
      for keyword in call.keywords:
        if keyword.arg:
          scope[keyword.arg] = self.value(keyword.value, env, depth)
    return scope

  # Statements.
  def _run(self, body, env, depth, stop):
    """Runs the straight-line part of `body` in `env` up to `stop` (a
    node); a name whose value depends on a branch becomes Unknown."""
    for statement in body:
      if stop is not None and source_tree.contains(statement, stop):
        if isinstance(statement, (ast.For, ast.If, ast.With, ast.Try)):
          inner = getattr(statement, 'body', [])
          return self._run(inner, env, depth, stop)
        return None
      result = self._statement(statement, env, depth, stop)
      if isinstance(result, _Return):
        return result
    return None

  def _statement(self, node, env, depth, stop):  # pylint: disable=too-many-branches
    if isinstance(node, ast.Return):
      return _Return(self.value(node.value, env, depth) if node.value
                     else None)
    if isinstance(node, ast.Assign):
      value = self.value(node.value, env, depth)
      for target in node.targets:
        self._assign(target, value, env, depth, node)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
      self._assign(node.target, self.value(node.value, env, depth), env,
                   depth, node)
    elif isinstance(node, ast.AugAssign) and isinstance(node.target,
                                                        ast.Name):
      old = env.get(node.target.id, self.constants.get(node.target.id))
      new = self.value(node.value, env, depth)
      if isinstance(old, Unknown) or isinstance(new, Unknown) or (
          type(node.op) not in _BINOPS) or old is None:
        env[node.target.id] = Unknown(node, self.source)
      else:
        env[node.target.id] = _BINOPS[type(node.op)](old, new)
    elif isinstance(node, ast.For):
      iterable = self.value(node.iter, env, depth)
      # A call of another module (`features.transformed_names(...)`) is a
      # Call, not a list: what it returns is not known here.
      if isinstance(iterable, Unknown) or not _iterable(iterable):
        self._forget(node, env)
        return None
      for item in iterable:
        try:
          self._bind(node.target, item, env)
        except _Unknowable:
          self._forget(node, env)
          return None
        result = self._run(node.body, env, depth, stop)
        if isinstance(result, _Return):
          return result
    elif isinstance(node, ast.If):
      test = self.value(node.test, env, depth)
      if isinstance(test, Unknown):
        self._forget(node, env)
        return None
      return self._run(node.body if test else node.orelse, env, depth, stop)
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
      self._method_call(node.value, env, depth)
    elif isinstance(node, (ast.With, ast.Try)):
      return self._run(node.body, env, depth, stop)
    elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and depth == 0:
      self.lines[node.name] = node.lineno
    return None

  def _assign(self, target, value, env, depth, node):
    if isinstance(target, ast.Name):
      env[target.id] = value
      if depth == 0:
        self.lines[target.id] = node.lineno
    elif isinstance(target, (ast.Tuple, ast.List)):
      try:
        self._bind(target, value, env)
      except Exception:  # pylint: disable=broad-except
        for element in target.elts:
          if isinstance(element, ast.Name):
            env[element.id] = Unknown(node, self.source)
    elif isinstance(target, ast.Subscript):
      container = self.value(target.value, env, depth)
      key = self.value(target.slice, env, depth)
      if isinstance(container, (dict, list)) and not isinstance(key, Unknown):
        container[key] = value

  def _method_call(self, call, env, depth):
    """`x.append(v)`, `x.extend(v)`, `x.update(v)` on a known local."""
    if not isinstance(call.func, ast.Attribute) or not isinstance(
        call.func.value, ast.Name):
      return
    target = env.get(call.func.value.id)
    if not isinstance(target, (list, dict)):
      return
    args = [self.value(a, env, depth) for a in call.args]
    method = call.func.attr
    if method in ('append', 'extend', 'update', 'pop') and len(args) == 1:
      getattr(target, method)(args[0])

  def _forget(self, node, env):
    for child in ast.walk(node):
      if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
        env[child.id] = Unknown(node, self.source)
      elif (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
            and isinstance(child.func.value, ast.Name)):
        # `columns.append(...)` in a loop not followed: `columns` changed.
        env[child.func.value.id] = Unknown(node, self.source)

  # Where things are.
  def enclosing_function(self, node: ast.AST) -> Optional[ast.FunctionDef]:
    """The innermost top-level function that holds `node`."""
    for function in self.functions.values():
      if source_tree.contains(function, node):
        return function
    return None

  def scope_at(self, node: ast.AST) -> Dict[str, Any]:
    """The local names of the function holding `node`, as they are just
    before it runs (the function's parameters bound from the module's one
    call to it, if it has exactly one)."""
    function = self.enclosing_function(node)
    if function is None:
      return {}
    callers = [c for c in ast.walk(self.tree) if isinstance(c, ast.Call) and
               source_tree.dotted(c.func) == function.name]
    env = {}
    call = callers[0] if len(callers) == 1 else None
    if call is not None:
      env = self.scope_at(call) if self.enclosing_function(call) not in (
          None, function) else {}
    scope = self.arguments(function, call, env)
    self._run(function.body, scope, 1, stop=node)
    return scope

  def calls(self, predicate) -> List[ast.Call]:
    """Every call node whose dotted name satisfies `predicate`, in order."""
    found = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and
             source_tree.dotted(n.func) and predicate(source_tree.dotted(n.func))]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))

  def segment(self, node: ast.AST) -> str:
    return ast.get_source_segment(self.source, node) or ''


@dataclasses.dataclass
class _Return:
  value: Any
