"""Examples made from a CSV split at the wrong delimiter.

CsvExampleGen splits lines at commas only. A file separated by ';', tab or
'|' becomes one feature per example, named after the whole header
('species;bill_length_mm;...') and holding the whole line as bytes; SchemaGen
and a `run_fn` then train on it without a word. The trainer looks at the
first example of each split first (`fnargs.inputs.check_splits`) and refuses
one whose feature name and value split at the same other delimiter into the
same number of parts.
"""

from typing import Optional
from tensorflow.core.example import example_pb2

_DELIMITERS = (';', '\t', '|')


def problem(record: bytes) -> Optional[str]:
  """What is wrong with a serialized tf.Example read from a CSV split at
  the wrong delimiter, said with the four parts; None if nothing is."""
  try:
    example = example_pb2.Example.FromString(record)
  except Exception:  # pylint: disable=broad-except
    return None  # Not a tf.Example: the record check says so.
  for name, feature in example.features.feature.items():
    for delimiter in _DELIMITERS:
      columns = name.split(delimiter)
      if len(columns) < 2 or not all(c.strip() for c in columns):
        continue
      values = list(feature.bytes_list.value)
      line = values[0].decode('utf-8', 'replace') if values else ''
      if len(line.split(delimiter)) != len(columns):
        continue
      shown = 'tab' if delimiter == '\t' else repr(delimiter)
      return (
          f'the feature {name!r} is a whole CSV header: the CSV was split at '
          f'commas, but it is separated by {shown}. Expected one feature per '
          f'column ({", ".join(columns)}). Received: one feature holding '
          f'whole lines ({line[:80]!r}). Re-save the CSV with commas '
          f'(pandas: pd.read_csv(path, sep={delimiter!r}).to_csv(new_path, '
          'index=False)) and run ExampleGen again: CsvExampleGen splits at '
          'commas only.')
  return None
