"""CSV files as gzip TFRecords of tf.Example, each mistake named by file,
line and column.

- Encoding: UTF-8, with or without a byte-order mark (Excel writes one).
- Delimiter: a comma, or the one `--csv-delimiter` names; a file that
  splits evenly at ';', tab or '|' but not at commas is refused, naming
  the delimiter found (`csv_dialect`).
- Every row has as many fields as the header (a missing or extra comma is
  named by its line).
- Kinds: a column is int, float or bytes (strings). A column of numbers with
  a stray word ('n/a', '12,5'...) is refused, naming the lines, rather than
  read as strings; so is a column of numbers with decimal commas ('39,1').
  Empty fields and the spellings of `csv_dialect.MISSING` ('NA', 'N/A',
  'null', 'NaN', '?', '-') are missing values, counted per column (the
  Table's `missing`); a column that cannot be missing (a label, a feature
  the schema requires) refuses them, naming the lines.
- With a schema (given, or inferred from the train data when converting the
  eval data), the columns must be the schema's features and each value of
  the kind the schema says.
"""

import csv
import itertools
from typing import Dict, List, Optional, Tuple

import attr

from generic_trainer.keys import INFERRED_SCHEMA
from generic_trainer.errors import InputArtifactError
from generic_trainer.data import csv_dialect
from generic_trainer.data import tfrecords
from generic_trainer.system.lazy import schema_pb2
from generic_trainer.system.lazy import tf

KINDS = ('int', 'float', 'bytes')
_STRAYS_SHOWN = 3


@attr.s(frozen=True)
class Table:
  """A CSV file read and checked: its header and its rows by line number."""
  path = attr.ib(type=str)
  header = attr.ib(type=List[str])
  rows = attr.ib(type=List[Tuple[int, List[str]]])
  delimiter = attr.ib(type=str, default=',')
  missing = attr.ib(type=Dict[str, Dict[str, int]], factory=dict)


def read(path: str, delimiter: Optional[str] = None,
         limit: Optional[int] = None) -> Table:
  """Reads `path`, separated by `delimiter` (None: commas, and another
  delimiter found is refused); raises InputArtifactError naming what is
  wrong. With `limit`, its header and first `limit` lines only: the
  sample of `data.first_look`."""
  with open(path, newline='', encoding='utf-8-sig') as f:
    try:
      text = f.read() if limit is None else ''.join(
          itertools.islice(f, limit + 1))
    except UnicodeDecodeError as e:
      raise InputArtifactError(
          f'{path} is not UTF-8 text ({e}). Expected a CSV file in UTF-8. '
          f'Received: byte {e.object[e.start:e.start + 1]!r} at offset '
          f'{e.start}. Save it as UTF-8 (CSV UTF-8 in spreadsheet programs).'
          ) from e
  delimiter = csv_dialect.delimiter_of(path, text, delimiter)
  reader = csv.reader(text.splitlines(), delimiter=delimiter)
  header = next(reader, None)
  if not header or not any(h.strip() for h in header):
    raise InputArtifactError(
        f'{path} is empty or its first line is blank. Expected the first '
        f'line to name the columns, separated by {_quote(delimiter)} '
        '(species,bill_length_mm,...), then one row of values per example. '
        f'Received: {"an empty file" if not text.strip() else "a blank first line"}'
        f' ({len(text)} bytes). Write the column names on the first line '
        '(e.g. species,bill_length_mm), then the rows; or leave the file '
        'out of the data.')
  header = [h.strip() for h in header]
  doubled = sorted({h for h in header if header.count(h) > 1})
  if doubled or '' in header:
    raise InputArtifactError(
        f'{path}: the header names the column(s) {doubled or [""]} more than '
        f'once or not at all. Received: {header}. Give every column one '
        'name of its own. Expected one name per column.')
  rows = []
  for line, row in enumerate(reader, start=2):
    if not row or not any(field.strip() for field in row):
      continue
    if len(row) != len(header):
      raise InputArtifactError(
          f'{path}, line {line}: {len(row)} field(s), expected {len(header)} '
          f'as in the header ({_quote(delimiter)}-separated: '
          f'{", ".join(header)}). Received: {row!r:.200}. Fix the row: a '
          'missing or extra delimiter, or a value with a delimiter in it '
          'that is not quoted.')
    rows.append((line, row))
  if not rows:
    raise InputArtifactError(
        f'{path} has a header but no rows. Expected at least one row of '
        f'values under the header. Received: the header alone '
        f'({", ".join(header)}). Add the rows, or leave the file out of the '
        'data.')
  return Table(path, header, rows, delimiter,
               csv_dialect.missing_counts(header, rows))


def infer_kinds(tables: List[Table]) -> Dict[str, str]:
  """{column: 'int' | 'float' | 'bytes'} of the tables (same header).

  Raises:
    InputArtifactError: columns of numbers hold a few words, or decimal
      commas; the message names every such column at once, each with its
      file and line.
  """
  header = tables[0].header
  for table in tables[1:]:
    _check_same_columns(table, header, f'{tables[0].path} (the first file)')
  kinds, problems = {}, []
  for index, name in enumerate(header):
    values = [(t.path, line, row[index]) for t in tables
              for line, row in t.rows if not csv_dialect.is_missing(
                  row[index])]
    try:
      kinds[name] = _kind(name, values, tables[0].delimiter)
    except InputArtifactError as e:
      problems.append(str(e))
  if problems:
    raise InputArtifactError(' '.join(problems))
  return kinds


def kinds_from_schema(schema) -> Dict[str, str]:
  """{feature: kind} of a Schema's features."""
  by_type = {schema_pb2.INT: 'int', schema_pb2.FLOAT: 'float',
             schema_pb2.BYTES: 'bytes'}
  return {f.name: by_type.get(f.type, 'bytes') for f in schema.feature}


def check_against(table: Table, kinds: Dict[str, str], source: str) -> None:
  """Raises unless `table`'s columns are those of `kinds` (from `source`)."""
  _check_same_columns(table, list(kinds), source)


def required_by_schema(schema, source: str) -> Dict[str, str]:
  """{feature: why} of the features `schema` says are in every example
  (presence.min_fraction 1)."""
  return {f.name: f'{source} requires it in every example (presence '
                  'min_fraction 1)'
          for f in schema.feature if f.presence.min_fraction >= 1.0}


def check_required(tables: List[Table], required: Dict[str, str]) -> None:
  """No missing value in a column of `required` ({column: why}; the key
  '*' stands for every column not named).

  Raises:
    InputArtifactError: naming every such column at once, with why it
      cannot be missing, its lines and the spellings found.
  """
  found = []  # (table, column, why, lines): every one, not the first.
  for table in tables:
    every = required.get('*')  # data.local_files.ALL_COLUMNS
    named = {n: w for n, w in required.items() if n != '*'}
    if every:
      named.update({n: every for n in table.header if n not in named})
    for name, why in sorted(named.items()):
      if name not in table.missing:
        continue
      index = table.header.index(name)
      found.append((table, name, why, [
          line for line, row in table.rows
          if csv_dialect.is_missing(row[index])]))
  if not found:
    return
  spelled = ', '.join(repr(s) for s in sorted(
      {s for table, name, _, _ in found for s in table.missing[name]}))
  if len(found) == 1:
    (table, name, why, lines), = found
    raise InputArtifactError(
        f'{table.path}: column {name!r} has {len(lines)} missing value(s) '
        f'(line {_lines(lines)}), but it cannot be missing: {why}. Expected '
        f'a value on every row of {name!r}. Received: {spelled} (read as '
        'missing). Fill those cells in, or drop those rows.')
  paths = sorted({table.path for table, _, _, _ in found})
  where = paths[0] if len(paths) == 1 else ', '.join(paths)
  columns = sorted({name for _, name, _, _ in found})
  cells = '; '.join(
      f'{name!r} {len(lines)} (line {_lines(lines)}'
      + (f' of {table.path}' if len(paths) > 1 else '') + ')'
      for table, name, _, lines in found)
  whys = {}
  for _, name, why, _ in found:
    whys.setdefault(why, []).append(name)
  said = '; '.join(
      f'{", ".join(repr(n) for n in names)}: {why}' if len(whys) > 1
      else why for why, names in whys.items())
  raise InputArtifactError(
      f'{where}: {len(columns)} columns have missing values '
      f'({sum(len(f[3]) for f in found)} cells: {cells}), but they cannot '
      f'be missing: {said}. Expected a value on every row of '
      f'{", ".join(repr(c) for c in columns)}. Received: {spelled} (read as '
      'missing). Fill those cells in, or drop those rows.')


def _lines(lines: List[int]) -> str:
  """'5', '3, 8 and 12 more': the first lines of a list, shown."""
  return ', '.join(map(str, lines[:_STRAYS_SHOWN])) + (
      f' and {len(lines) - _STRAYS_SHOWN} more'
      if len(lines) > _STRAYS_SHOWN else '')


def write(tables: List[Table], kinds: Dict[str, str], out: str) -> None:
  """Writes the rows as gzip tf.Examples to `out`, each value of its
  column's kind; a value that is not is named by file, line and column."""
def write(tables: List[Table], kinds: Dict[str, str], out: str,
          mode: Optional[int] = None, source: Optional[str] = None) -> None:
  """Writes the rows as gzip tf.Examples to `out` (a new file of `mode`,
  written whole: `tfrecords.writer`), each value of its column's kind; a
  value that is not is named by file, line and column, and by `source`,
  the schema the kinds come from (None: inferred from these tables)."""
  with tfrecords.writer(out, mode) as writer:
    for table in tables:
      columns = [(i, name, kinds[name]) for i, name in enumerate(table.header)
                 if name in kinds]
      for line, row in table.rows:
        feature = {}
        for index, name, kind in columns:
          value = row[index]
          if csv_dialect.is_missing(value):
            continue
          feature[name] = _feature(value, kind, table.path, line, name,
                                   source)
        # deterministic: a map's keys in order, so the same rows give the
        # same bytes run after run (a kept-rows hit on a retrain).
        writer.write(tf.train.Example(features=tf.train.Features(
            feature=feature)).SerializeToString(deterministic=True))


def _feature(value: str, kind: str, path: str, line: int, name: str,
             source: Optional[str] = None):
  try:
    if kind == 'int':
      return tf.train.Feature(int64_list=tf.train.Int64List(
          value=[int(value)]))
    if kind == 'float':
      return tf.train.Feature(float_list=tf.train.FloatList(
          value=[float(value)]))
  except ValueError:
    expected = 'an integer' if kind == 'int' else 'a number'
    if source == INFERRED_SCHEMA:  # Eval data against the train data's.
      raise InputArtifactError(
          f'{path}, line {line}, column {name!r}: {value!r} is not '
          f'{expected}, as the column is {kind} in {source} (every value of '
          'it there is). Expected the eval data\'s columns of the train '
          f"data's kinds: {expected}. Received: {value!r}. Fix the value, or "
          'leave it empty for a missing value; if the column holds words, '
          'it must in the train data too (or pass --schema with the column '
          'as BYTES).') from None
    raise InputArtifactError(
        f'{path}, line {line}, column {name!r}: {value!r} is not {expected}, '
        f'as the column is {kind} in '
        f'{source or "the schema the data must follow"}. Expected '
        f'{expected}. Received: {value!r}. Fix the value, or leave it empty '
        'for a missing value; if the column holds words, say BYTES for it '
        'in the schema.') from None
  return tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[value.encode()]))


def _kind(name: str, values: List[Tuple[str, int, str]],
          delimiter: str = ',') -> str:
  for kind, parse in (('int', int), ('float', float)):
    bad = [v for v in values if not _parses(parse, v[2])]
    if not bad:
      return kind
  commas = [v for v in bad if _parses(float, v[2].replace(',', '.', 1))]
  if commas and len(commas) == len(bad):
    path, line, value = commas[0]
    raise InputArtifactError(
        f'Column {name!r} holds numbers written with a decimal comma '
        f'({len(commas)} rows; first {path}, line {line}: {value!r}), which '
        'would be read as words. Expected numbers with a decimal point '
        f'({value.replace(",", ".", 1)}). Received: {value!r}. Re-save the '
        f'file with decimal points ({csv_dialect.resave_advice(delimiter, True, delimiter)}).')
  numbers = len(values) - len(bad)
  if bad and numbers >= 0.9 * len(values):
    shown = '; '.join(f'{path}, line {line}: {value!r}'
                      for path, line, value in bad[:_STRAYS_SHOWN])
    more = (f' and {len(bad) - _STRAYS_SHOWN} more' if len(bad) > _STRAYS_SHOWN
            else '')
    raise InputArtifactError(
        f'Column {name!r} holds numbers in {numbers} rows but not in '
        f'{len(bad)}: {shown}{more}. Expected one kind of value per column: '
        f'numbers. Received: {len(bad)} value(s) that are not. Fix those '
        'values, or leave them empty (or NA) for missing values.')
  return 'bytes'


def _parses(parse, value: str) -> bool:
  try:
    parse(value)
  except ValueError:
    return False
  return True


def _check_same_columns(table: Table, expected: List[str],
                        source: str) -> None:
  missing = [c for c in expected if c not in table.header]
  extra = [c for c in table.header if c not in expected]
  if missing or extra:
    raise InputArtifactError(
        f'{table.path} has other columns than {source}: missing {missing}, '
        f'extra {extra}. Expected the columns {expected}. Received: '
        f'{table.header}. Give every data file the same columns.')


def _quote(delimiter: str) -> str:
  return {'\t': 'tab'}.get(delimiter, repr(delimiter))

