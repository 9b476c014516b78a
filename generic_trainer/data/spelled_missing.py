"""Columns of numbers whose missing values a CSV spelled out, in Examples.

CsvExampleGen reads an empty cell as a missing value, but `NA` (as R and
the raw penguin table write it), `N/A`, `null`, `NaN`, `?` or `-` as a word:
the whole column becomes strings. A model that casts it fails deep inside
TensorFlow; one that takes strings as categories (a canned spec's columns)
trains on numbers as if they were names, and publishes without a word. The
trainer reads the first records of a split first (`fnargs.inputs`) and
refuses a string feature whose values are numbers but for such spellings.
"""

import itertools
from typing import Dict, List, Optional, Set
import tensorflow as tf
from tfx_bsl.coders import example_coder

from generic_trainer.data import tfrecords

# As `data.csv_dialect.MISSING`, compared without case (not the empty
# string: CsvExampleGen reads an empty cell as missing).
_SPELLINGS = frozenset(['na', 'n/a', 'nan', 'null', '?', '-'])
_RECORDS = 2000
_RECORD_BYTES = 8 << 20  # At most, for _RECORDS of wide rows or images.
_BYTES = ('binary', 'large_binary')  # Arrow's types of a bytes_list value.


def problem(path: str) -> Optional[str]:
  """What is wrong with the first records of the TFRecord file `path`,
  said with the four parts; None when no string feature holds numbers and
  spelled-out missing values."""
  try:
    strings = _string_values(_first_records(path))
  except Exception:  # pylint: disable=broad-except
    return None  # Damage is the record checks' to report.
  spelled: Dict[str, Set[str]] = {}
  for name, values in strings.items():
    numbers = words = False
    for raw in values:
      value = raw.decode('utf-8', 'replace').strip()
      if value.lower() in _SPELLINGS:
        spelled.setdefault(name, set()).add(value)
      elif _is_number(value):
        numbers = True
      else:
        words = True
        break
    if words or not numbers:
      spelled.pop(name, None)
  found = sorted(spelled)
  if not found:
    return None
  shown = ', '.join(f'{n!r} ({", ".join(sorted(map(repr, spelled[n])))})'
                    for n in found)
  return (
      f'the column(s) {found} hold numbers, and missing values spelled out '
      f'as words: {shown}; CsvExampleGen read those columns as strings, so '
      'a model would take the numbers as names or fail to cast them. '
      'Expected numbers, with a missing value left empty. Received: string '
      f'features {found}. Leave missing values empty in the CSV (pandas: '
      "pd.read_csv(path).to_csv(new_path, index=False) writes NA as an "
      'empty cell) and run ExampleGen again.')


def _first_records(path: str) -> List[bytes]:
  """The first `_RECORDS` records of the file, fewer past `_RECORD_BYTES`."""
  records, size = [], 0
  for record in itertools.islice(tfrecords.records(path), _RECORDS):
    records.append(record)
    size += len(record)
    if size >= _RECORD_BYTES:
      break
  return records


def _string_values(records: List[bytes]) -> Dict[str, List[bytes]]:
  """{feature: its distinct bytes values} of the string features of
  `records`, decoded by tfx_bsl's C++ decoder: Python sees only string
  columns (the whole check of 2,000 rows of 12 numbers: 18 ms, against 47
  ms walking each tf.Example's features in Python)."""
  if not records:
    return {}
  try:
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)
  except Exception:  # pylint: disable=broad-except
    # A feature of another kind in another record (a RuntimeError).
    return _string_values_one_by_one(records)
  strings = {}
  for name, column in zip(batch.schema.names, batch.columns):
    # A list of bytes; a feature without values in any record is of nulls.
    if str(getattr(column.type, 'value_type', '')) in _BYTES:
      strings[name] = column.flatten().unique().to_pylist()
  return strings


def _string_values_one_by_one(records: List[bytes]
                              ) -> Dict[str, List[bytes]]:
  """`_string_values`, each record decoded in Python."""
  strings: Dict[str, Dict[bytes, None]] = {}
  for record in records:
    for name, feature in tf.train.Example.FromString(
        record).features.feature.items():
      for value in feature.bytes_list.value:
        strings.setdefault(name, {})[value] = None
  return {name: list(values) for name, values in strings.items()}


def _is_number(value: str) -> bool:
  try:
    float(value)
  except ValueError:
    return False
  return True
