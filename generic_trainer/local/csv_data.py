"""CSV files as gzip TFRecords of tf.Example, each mistake named by file,
line and column.

- Encoding: UTF-8, with or without a byte-order mark (Excel writes one).
- Delimiter: a comma; a file whose header holds no comma but one of ';',
  tab or '|' is read with that one.
- Every row has as many fields as the header (a missing or extra comma is
  named by its line).
- Kinds: a column is int, float or bytes (strings). A column of numbers with
  a stray word ('n/a', '12,5'...) is refused, naming the lines, rather than
  read as strings. Empty and 'NA' fields are missing values.
- With a schema (given, or inferred from the train data when converting the
  eval data), the columns must be the schema's features and each value of
  the kind the schema says.
"""

import csv
from typing import Dict, List, Optional, Tuple

import attr

from generic_trainer.errors import InputArtifactError

MISSING = ('', 'NA')
KINDS = ('int', 'float', 'bytes')
_OTHER_DELIMITERS = (';', '\t', '|')
_STRAYS_SHOWN = 3


@attr.s(frozen=True)
class Table:
  """A CSV file read and checked: its header and its rows by line number."""
  path = attr.ib(type=str)
  header = attr.ib(type=List[str])
  rows = attr.ib(type=List[Tuple[int, List[str]]])
  delimiter = attr.ib(type=str, default=',')


def read(path: str) -> Table:
  """Reads `path`; raises InputArtifactError naming what is wrong."""
  with open(path, newline='', encoding='utf-8-sig') as f:
    try:
      text = f.read()
    except UnicodeDecodeError as e:
      raise InputArtifactError(
          f'{path} is not UTF-8 text ({e}). Expected a CSV file in UTF-8; '
          'save it as UTF-8 (CSV UTF-8 in spreadsheet programs).') from e
  first_line = text.split('\n', 1)[0]
  delimiter = ','
  if ',' not in first_line:
    others = [d for d in _OTHER_DELIMITERS if d in first_line]
    if len(others) == 1:
      delimiter = others[0]
  reader = csv.reader(text.splitlines(), delimiter=delimiter)
  header = next(reader, None)
  if not header or not any(h.strip() for h in header):
    raise InputArtifactError(
        f'{path} is empty or its first line is blank. Expected a CSV file '
        'whose first line names the columns.')
  header = [h.strip() for h in header]
  doubled = sorted({h for h in header if header.count(h) > 1})
  if doubled or '' in header:
    raise InputArtifactError(
        f'{path}: the header names the column(s) {doubled or [""]} more than '
        f'once or not at all. Received: {header}. Give every column one '
        'name of its own.')
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
    raise InputArtifactError(f'{path} has a header but no rows.')
  return Table(path, header, rows, delimiter)


def infer_kinds(tables: List[Table]) -> Dict[str, str]:
  """{column: 'int' | 'float' | 'bytes'} of the tables (same header).

  Raises:
    InputArtifactError: a column of numbers holds a few words; the message
      names them with their file and line.
  """
  header = tables[0].header
  for table in tables[1:]:
    _check_same_columns(table, header, f'{tables[0].path} (the first file)')
  kinds = {}
  for index, name in enumerate(header):
    values = [(t.path, line, row[index]) for t in tables
              for line, row in t.rows if row[index] not in MISSING]
    kinds[name] = _kind(name, values)
  return kinds


def kinds_from_schema(schema) -> Dict[str, str]:
  """{feature: kind} of a Schema's features."""
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  by_type = {schema_pb2.INT: 'int', schema_pb2.FLOAT: 'float',
             schema_pb2.BYTES: 'bytes'}
  return {f.name: by_type.get(f.type, 'bytes') for f in schema.feature}


def check_against(table: Table, kinds: Dict[str, str], source: str) -> None:
  """Raises unless `table`'s columns are those of `kinds` (from `source`)."""
  _check_same_columns(table, list(kinds), source)


def write(tables: List[Table], kinds: Dict[str, str], out: str,
          mode: Optional[int] = None) -> None:
  """Writes the rows as gzip tf.Examples to `out` (a new file of `mode`,
  written whole: `tfrecords.writer`), each value of its column's kind; a
  value that is not is named by file, line and column."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import tfrecords  # pylint: disable=g-import-not-at-top
  with tfrecords.writer(out, mode) as writer:
    for table in tables:
      columns = [(i, name, kinds[name]) for i, name in enumerate(table.header)
                 if name in kinds]
      for line, row in table.rows:
        feature = {}
        for index, name, kind in columns:
          value = row[index]
          if value in MISSING:
            continue
          feature[name] = _feature(tf, value, kind, table.path, line, name)
        writer.write(tf.train.Example(features=tf.train.Features(
            feature=feature)).SerializeToString())


def _feature(tf, value: str, kind: str, path: str, line: int, name: str):
  try:
    if kind == 'int':
      return tf.train.Feature(int64_list=tf.train.Int64List(
          value=[int(value)]))
    if kind == 'float':
      return tf.train.Feature(float_list=tf.train.FloatList(
          value=[float(value)]))
  except ValueError:
    expected = 'an integer' if kind == 'int' else 'a number'
    raise InputArtifactError(
        f'{path}, line {line}, column {name!r}: {value!r} is not {expected}, '
        f'as the column is {kind} in the schema the data must follow (the '
        'one given, or inferred from the train data). Fix the value, or '
        'leave it empty for a missing value.') from None
  return tf.train.Feature(bytes_list=tf.train.BytesList(
      value=[value.encode()]))


def _kind(name: str, values: List[Tuple[str, int, str]]) -> str:
  for kind, parse in (('int', int), ('float', float)):
    bad = [v for v in values if not _parses(parse, v[2])]
    if not bad:
      return kind
  numbers = len(values) - len(bad)
  if bad and numbers >= 0.9 * len(values):
    shown = '; '.join(f'{path}, line {line}: {value!r}'
                      for path, line, value in bad[:_STRAYS_SHOWN])
    more = (f' and {len(bad) - _STRAYS_SHOWN} more' if len(bad) > _STRAYS_SHOWN
            else '')
    raise InputArtifactError(
        f'Column {name!r} holds numbers in {numbers} rows but not in '
        f'{len(bad)}: {shown}{more}. Expected one kind of value per column. '
        'Fix those values (a decimal comma, a word for a missing value), or '
        'leave them empty (or NA) for missing values.')
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

