"""How a tf.estimator module's settings are written as lines of a spec.

`read_column` turns one `tf.feature_column` call (as `module_source` read
it) into the canned column that replaces it (`Numeric`, `Bucketized`,
`Categorical`, `Crossed`); `setting` writes `  member = value  # where it
came from`, or, for a value the source computes at run time, the line to
copy it from. Used by `migration`.
"""

from typing import Any

from generic_trainer.migration.module_source import Call
from generic_trainer.migration.module_source import Unknown


def column_key(column) -> Any:
  if isinstance(column, str):
    return column
  if isinstance(column, Call):
    inner = column.arg(0, 'key')
    if isinstance(inner, Call) and column.short in (
        'bucketized_column', 'embedding_column', 'indicator_column',
        'weighted_categorical_column'):
      return column_key(inner if column.short != 'weighted_categorical_column'
                         else column.arg(0, 'categorical_column'))
    return inner
  return column


def read_column(column, columns, crosses, keys, names) -> None:
  """Adds what a feature column says: its key to `keys`, its Column to
  `columns`, a cross to `crosses`."""
  if not isinstance(column, Call):
    keys.append(column)
    return
  kind = column.short
  if kind == 'crossed_column':
    crossed = column.arg(0, 'keys') or []
    crossed_keys = [column_key(k) for k in crossed] if isinstance(
        crossed, list) else crossed
    for inner in crossed if isinstance(crossed, list) else []:
      if isinstance(inner, Call):
        read_column(inner, columns, crosses, [], names)
    bins = column.arg(1, 'hash_bucket_size', 1000)
    crosses.append(f'Crossed({py(tuple(crossed_keys))}, num_bins='
                   f'{py(bins)})')
    return
  if kind in ('embedding_column', 'indicator_column'):
    inner = column.arg(0, 'categorical_column')
    dim = column.arg(1, 'dimension') if kind == 'embedding_column' else None
    read_column(inner, columns, crosses, keys, names)
    key = column_key(inner)
    if dim is not None and key in columns:
      expression, note = columns[key]
      columns[key] = (expression[:-1] + (', ' if expression[-2] != '(' else '')
                      + f'embedding_dim={py(dim)})', note)
    return
  key = column_key(column)
  keys.append(key)
  if not isinstance(key, str):
    return
  if kind == 'numeric_column':
    names.add('Numeric')
    normalizer = column.kwargs.get('normalizer_fn')
    columns[key] = ('Numeric(normalize=False)' if normalizer is None else
                    'Numeric()', 'numeric_column: as it is' if normalizer is
                    None else 'numeric_column with a normalizer_fn')
  elif kind == 'bucketized_column':
    names.add('Bucketized')
    columns[key] = (f'Bucketized(boundaries={py(column.arg(1, "boundaries"))})',
                    'bucketized_column')
  elif kind == 'categorical_column_with_identity':
    names.add('Categorical')
    columns[key] = (f'Categorical(num_buckets='
                    f'{py(column.arg(1, "num_buckets"))})',
                    'categorical_column_with_identity')
  elif kind == 'categorical_column_with_vocabulary_list':
    names.add('Categorical')
    oov = column.arg(4, 'num_oov_buckets', 0)
    extra = f', num_oov={py(oov)}' if oov not in (0, 1) else ''
    columns[key] = (f'Categorical(vocabulary='
                    f'{py(column.arg(1, "vocabulary_list"))}{extra})',
                    'categorical_column_with_vocabulary_list')
  elif kind == 'categorical_column_with_vocabulary_file':
    names.add('Categorical')
    size = column.arg(2, 'vocabulary_size')
    top = f'top_k={py(size)}' if size is not None else ''
    columns[key] = (f'Categorical({top})',
                    'the vocabulary comes from the data; the Estimator read '
                    f'{py(column.arg(1, "vocabulary_file"))}')
  elif kind == 'categorical_column_with_hash_bucket':
    names.add('Categorical')
    columns[key] = (f'Categorical(top_k={py(column.arg(1, "hash_bucket_size"))})',
                    'was hashed into that many buckets; now the most '
                    'frequent values')
  else:
    columns[key] = ('None', f'{kind} has no canned column: leave it out, or '
                    'write your own build_model')


def setting(member: str, value, note: str) -> str:
  """`  member = value  # note`, the note above when the line is long, a
  long list one item per line."""
  if isinstance(value, Unknown):
    return (f'  {member} = ...  # line {value.line} computes it '
            f'({value.text}): copy its value')
  if isinstance(value, Call):
    return (f'  {member} = ...  # line {value.line} calls {value.name}: '
            'copy its value')
  text = f'  {member} = {py(value)}'
  if len(text) > 79 and isinstance(value, (list, tuple)):
    items = ''.join(f'      {py(v)},\n' for v in value)
    text = f'  {member} = [\n{items}  ]'
  if note and len(text) + len(note) + 4 <= 79:
    return f'{text}  # {note}'
  if note:
    return f'  # {note}\n{text}'
  return text


def py(value) -> str:
  if isinstance(value, Unknown):
    return f'...  # line {value.line}: {value.text}'
  if isinstance(value, Call):
    return f'...  # line {value.line}: {value.name}(...)'
  if isinstance(value, list):
    return '[' + ', '.join(py(v) for v in value) + ']'
  if isinstance(value, tuple):
    return '(' + ', '.join(py(v) for v in value) + (
        ',)' if len(value) == 1 else ')')
  if isinstance(value, float) and value == int(value) and abs(value) < 1e15:
    return repr(value)
  return repr(value)
