"""How a CSV file is written: its delimiter, and how it spells a missing
value. Decided from the file's first lines, before any row is converted.

- Delimiter: a comma, unless `--csv-delimiter` names another. A file whose
  first lines split evenly at ';', tab or '|' but not at ',' (a spreadsheet
  in a European locale, a TSV) is refused, naming the delimiter found: read
  with a comma it would be one column whose name holds every header, and a
  model trained on it would publish without a word.
- Missing values: the spellings of `MISSING` (any case) are read as a
  missing value on purpose, and counted per column; the counts are logged
  and kept in train_result.json (`missing_values`).
"""

import csv
from typing import Dict, List, Optional

from generic_trainer.errors import InputArtifactError
from generic_trainer.errors import InvalidArgumentError

# Spellings of a missing value (compared without case): R and the raw
# penguin table write NA; spreadsheets N/A or an empty cell; databases
# null; pandas NaN; surveys ? or -.
MISSING = frozenset(['', 'na', 'n/a', 'nan', 'null', '?', '-'])
DELIMITERS = (',', ';', '\t', '|')
NAMES = {'tab': '\t', '\\t': '\t', 'comma': ',', 'semicolon': ';',
         'pipe': '|'}
_SAMPLE_LINES = 20


def is_missing(value: str) -> bool:
  """Whether a field spells a missing value (see `MISSING`)."""
  return value.strip().lower() in MISSING


def show(delimiter: str) -> str:
  """"';'", or 'tab'."""
  return 'tab' if delimiter == '\t' else repr(delimiter)


def parse_delimiter(value: Optional[str]) -> Optional[str]:
  """The delimiter a --csv-delimiter value names ('tab', ';'...), or None.

  Raises:
    InvalidArgumentError: not one character of DELIMITERS or a name.
  """
  if value is None:
    return None
  delimiter = NAMES.get(value.lower(), value)
  if delimiter not in DELIMITERS:
    raise InvalidArgumentError(
        '--csv-delimiter must be one character of , ; | or the word tab. '
        f'Expected the character between the fields. Received: '
        f'--csv-delimiter={value!r}. Pass one of those, or leave it out for '
        'commas.')
  return delimiter


def delimiter_of(path: str, text: str, given: Optional[str] = None) -> str:
  """The delimiter to read `text` (the file `path`) with: `given`, else a
  comma.

  Raises:
    InputArtifactError: `given` is None and the first lines split evenly at
      another delimiter, but not at commas; the message names the one
      found and how to read the file.
  """
  if given is not None:
    return given
  lines = [l for l in text.splitlines()[:_SAMPLE_LINES] if l.strip()]
  if not lines:
    return ','
  widths = {d: _widths(lines, d) for d in DELIMITERS}
  if _even(widths[',']):
    return ','
  found = [d for d in DELIMITERS[1:] if _even(widths[d])]
  if len(found) != 1:
    return ','
  delimiter = found[0]
  header = next(csv.reader([lines[0]], delimiter=delimiter))
  decimals = [field.strip() for line in lines[1:]
              for field in next(csv.reader([line], delimiter=delimiter))
              if _decimal_comma(field)]
  decimal = bool(decimals)
  raise InputArtifactError(
      f'{path} is separated by {show(delimiter)}, not by commas: its first '
      f'{len(lines)} line(s) split evenly into {widths[delimiter][0]} '
      f'columns at {show(delimiter)} ({", ".join(header)}), and at commas '
      f'into {_describe_widths(widths[","])}. Expected comma-separated '
      f'values. Received: {show(delimiter)}-separated lines'
      + (f', with decimal commas ({decimals[0]})' if decimal else '') +
      f'. Pass --csv-delimiter {_flag_value(delimiter)} to read it with '
      f'{show(delimiter)}'
      + (' and re-save the numbers with decimal points' if decimal else '')
      + ', or re-save it as CSV with commas '
      f'({resave_advice(delimiter, decimal)}).')


def resave_advice(delimiter: str, decimal: bool, to: str = ',') -> str:
  """"pandas: pd.read_csv(path, sep=';', decimal=',').to_csv(new_path,
  index=False)": the one line that re-saves a file separated by
  `delimiter` (with decimal commas when `decimal`) as one separated by
  `to`, with decimal points; every message that advises re-saving says
  it so (a decimal comma read without the file's `sep` would split each
  line at its commas)."""
  read = 'path' + (f', sep={delimiter!r}' if delimiter != ',' else '') + (
      ", decimal=','" if decimal else '')
  write = 'new_path' + (f', sep={to!r}' if to != ',' else '') + ', index=False'
  return f'pandas: pd.read_csv({read}).to_csv({write})'


def missing_counts(header: List[str], rows) -> Dict[str, Dict[str, int]]:
  """{column: {spelling: count}} of the fields read as missing."""
  counts: Dict[str, Dict[str, int]] = {}
  for _, row in rows:
    for name, value in zip(header, row):
      if is_missing(value):
        spelled = counts.setdefault(name, {})
        spelled[value.strip()] = spelled.get(value.strip(), 0) + 1
  return counts


def describe_missing(counts: Dict[str, Dict[str, int]]) -> str:
  """"bill_length_mm 2 ('NA' 2), sex 11 ('NA' 9, '' 2)"."""
  return ', '.join(
      f'{name} {sum(spelled.values())} (' + ', '.join(
          f'{spelling!r} {n}' for spelling, n in sorted(spelled.items())) +
      ')' for name, spelled in sorted(counts.items()))


def _widths(lines: List[str], delimiter: str) -> List[int]:
  try:
    return [len(row) for row in csv.reader(lines, delimiter=delimiter)]
  except csv.Error:
    return [0]


def _even(widths: List[int]) -> bool:
  return widths[0] > 1 and all(w == widths[0] for w in widths)


def _describe_widths(widths: List[int]) -> str:
  distinct = sorted(set(widths))
  if len(distinct) == 1:
    return f'{distinct[0]} column(s)'
  return f'{distinct[0]} to {distinct[-1]} columns, line by line'


def _decimal_comma(field: str) -> bool:
  head, _, tail = field.strip().lstrip('-').partition(',')
  return head.isdigit() and tail.isdigit()


def _flag_value(delimiter: str) -> str:
  return 'tab' if delimiter == '\t' else f"'{delimiter}'"
