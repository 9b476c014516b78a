"""Where a module uses tf.estimator, read from its source without running
it: the loader refuses such a module before TensorFlow is imported (TF
2.16 has no tf.estimator), with the migration advice (`migration`)."""

import ast
from typing import List, Tuple

from generic_trainer.system import source_tree


_ESTIMATOR_MODULES = ('tensorflow_estimator', 'tensorflow.estimator',
                      'tensorflow.compat.v1.estimator',
                      'tensorflow.compat.v2.estimator')


def estimator_uses(source: str) -> List[Tuple[int, str]]:
  """(line, code) of each place the module uses tf.estimator, or [] (also
  for a source that does not parse: the loader reports that itself)."""
  try:
    tree = source_tree.parse(source)
  except SyntaxError:
    return []
  aliases = set()
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if alias.name.startswith(_ESTIMATOR_MODULES):
          found.append(node)
          aliases.add(alias.asname or alias.name)
    elif isinstance(node, ast.ImportFrom) and node.module:
      names = [a.name for a in node.names]
      if node.module.startswith(_ESTIMATOR_MODULES) or (
          node.module in ('tensorflow', 'tensorflow.compat.v1',
                          'tensorflow.keras', 'tensorflow.compat.v2') and
          'estimator' in names):
        found.append(node)
        aliases.update(a.asname or a.name for a in node.names)
  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute):
      name = source_tree.dotted(node)
      if not name:
        continue
      parts = name.split('.')
      if ('estimator' in parts[1:] and parts[0] in ('tf', 'tensorflow')) or (
          parts[0] in aliases and len(parts) > 1):
        if not any(source_tree.contains(f, node) for f in found):
          found.append(node)
  lines = {}
  for node in sorted(found, key=lambda n: (n.lineno, n.col_offset)):
    if node.lineno not in lines:
      text = ast.get_source_segment(source, node) or ''
      lines[node.lineno] = text.splitlines()[0] if text else ''
  return sorted(lines.items())
