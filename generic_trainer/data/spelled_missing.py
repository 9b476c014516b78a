"""Columns of numbers whose missing values a CSV spelled out, in Examples.

CsvExampleGen reads an empty cell as a missing value, but `NA` (as R and
the raw penguin table write it), `N/A`, `null`, `NaN`, `?` or `-` as a word:
the whole column becomes strings. A model that casts it fails deep inside
TensorFlow; one that takes strings as categories (a canned spec's columns)
trains on numbers as if they were names, and publishes without a word. The
trainer reads the first records of a split first (`core.inputs`) and
refuses a string feature whose values are numbers but for such spellings.
"""

import itertools
from typing import Dict, Optional, Set

# As `local.csv_dialect.MISSING`, compared without case (not the empty
# string: CsvExampleGen reads an empty cell as missing).
_SPELLINGS = frozenset(['na', 'n/a', 'nan', 'null', '?', '-'])
_RECORDS = 2000


def problem(path: str) -> Optional[str]:
  """What is wrong with the first records of the TFRecord file `path`,
  said with the four parts; None when no string feature holds numbers and
  spelled-out missing values."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import tfrecords  # pylint: disable=g-import-not-at-top
  numbers: Dict[str, int] = {}
  spelled: Dict[str, Set[str]] = {}
  words: Set[str] = set()
  try:
    for record in itertools.islice(tfrecords.records(path), _RECORDS):
      example = tf.train.Example.FromString(record)
      for name, feature in example.features.feature.items():
        if name in words or not feature.bytes_list.value:
          continue
        for raw in feature.bytes_list.value:
          value = raw.decode('utf-8', 'replace').strip()
          if value.lower() in _SPELLINGS:
            spelled.setdefault(name, set()).add(value)
          elif _is_number(value):
            numbers[name] = numbers.get(name, 0) + 1
          else:
            words.add(name)
            break
  except Exception:  # pylint: disable=broad-except
    return None  # Damage is the record checks' to report.
  found = sorted(n for n in spelled if n in numbers and n not in words)
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


def _is_number(value: str) -> bool:
  try:
    float(value)
  except ValueError:
    return False
  return True
