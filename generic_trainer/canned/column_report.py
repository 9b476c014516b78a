"""What a canned spec chose for each feature, told before it trains.

A canned spec takes every feature of the schema (but the labels) and gives
each a column (`columns.default_column`) without being asked; a user who
never listed the features learns what the model reads only here: one
short block, a line per feature with its column and what it learnt from
the data.

Three kinds of category train without error and learn nothing that holds
for new rows, and are flagged with what to do (rows 610, 611 and 614 of
docs/errors.md):
- an ID (`customer_id`): a category with (nearly) one value per row; the
  model learns each train row apart, and a new customer's ID is a value
  it has never seen;
- dates (`signup_date`, '2023-03-19'): as a category each day is its own
  value, and every day after the train data is unknown;
- numbers written as text (`monthly_price`, '$19.99', '1,299'; told by
  `heads.regression.numbers_as_text`, which the label checks use): each
  amount is a category, unordered, and a new amount is unknown.

Both are found in what the columns learnt (`data_summary.FeatureSummary`:
the vocabulary and how many values it was counted from), so nothing is
read twice.
"""

import datetime
import re
from typing import Dict, List, Optional, Tuple

from generic_trainer.canned import columns as columns_lib
from generic_trainer.heads import regression

# A vocabulary of at least this share of the values counted (and of at
# least `ID_MIN_VALUES` values): one value per row, or nearly.
ID_SHARE = 0.9
ID_MIN_VALUES = 20
# Date spellings tried on a category's values: ISO (with a time or not),
# 03/19/2023, 19.03.2023, and 2023/03/19.
_DATE = re.compile(r'^\s*(\d{4}-\d{1,2}-\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2})?.*)?'
                   r'|\d{1,2}/\d{1,2}/\d{4}|\d{1,2}\.\d{1,2}\.\d{4}'
                   r'|\d{4}/\d{1,2}/\d{1,2})\s*$')
_DATE_FORMATS = ('%Y-%m-%d', '%m/%d/%Y', '%d/%m/%Y', '%d.%m.%Y', '%Y/%m/%d')
# Share of the distinct values that must read as dates.
DATE_SHARE = 0.9
# How many distinct values are tried as dates.
_DATE_TRIES = 200


def report(spec_name: str, chosen: Dict[str, object],
           summaries: Dict[str, object]) -> Tuple[str, List[str]]:
  """(the block of lines that lists each feature's column, [a warning per
  feature that looks like an ID or dates]).

  Args:
    spec_name: The spec's class name, as the block names it.
    chosen: {feature: column} of the features the model reads.
    summaries: {feature: `data_summary.FeatureSummary`} of the same.
  """
  width = max((len(k) for k in chosen), default=0)
  lines = [f'{spec_name} reads {len(chosen)} feature'
           f'{"s" if len(chosen) != 1 else ""} (columns={{name: ...}} '
           'changes one, columns={name: None} leaves it out):']
  warnings = []
  for key in sorted(chosen):
    column, summary = chosen[key], summaries.get(key)
    lines.append(f'  {key.ljust(width)}  {describe(column, summary)}')
    warning = flag(key, column, summary)
    if warning:
      warnings.append(warning)
  return '\n'.join(lines), warnings


def describe(column, summary) -> str:
  """One feature's column and what it learnt, in a few words."""
  learnt = (f' from the {summary.source}' if summary is not None and
            summary.source in ('statistics', 'sample') else '')
  if isinstance(column, columns_lib.Numeric):
    return ('Numeric, normalised' + learnt if column.normalize else
            'Numeric, as it is')
  if isinstance(column, columns_lib.Bucketized):
    if column.boundaries:
      return f'Bucketized at {list(column.boundaries)}'
    return f'Bucketized, {column.num_buckets} buckets{learnt}'
  if column.num_buckets is not None:
    return f'Categorical, ids 0..{column.num_buckets - 1}'
  if column.vocabulary is not None:
    return f'Categorical, {len(column.vocabulary)} given values'
  size = len(summary.vocabulary) if summary is not None else 0
  kept = min(size, column.top_k)
  return (f'Categorical, {kept} value{"s" if kept != 1 else ""}'
          f'{f" (the {kept} most frequent of {size})" if kept < size else ""}'
          f'{learnt}')


def flag(key: str, column, summary) -> Optional[str]:
  """The warning for a category learnt from the data that looks like an
  ID or dates, or None."""
  if (not isinstance(column, columns_lib.Categorical) or summary is None or
      column.vocabulary is not None or column.num_buckets is not None):
    return None
  texts = [str(v) for v in summary.vocabulary[:_DATE_TRIES]]
  marks = regression.numbers_as_text(texts)
  if marks:
    shown = ', '.join(repr(t) for t in texts[:3])
    signs = ''.join(sorted(marks))
    return (
        f'{key!r} holds numbers written as text ({shown}; '
        f'{", ".join(repr(m) for m in sorted(marks))} in them): as a '
        'category each amount is a value of its own, unordered, and an '
        'amount the train data lacks is one the model has never seen. '
        f'Expected numbers in {key!r}, which it would normalise. Received: '
        f'{key!r} read as Categorical. Write the column as plain numbers in '
        f'the data: with pandas, df[{key!r}] = df[{key!r}].str.replace('
        f"r'[{signs}]', '', regex=True).astype(float); "
        "df.to_csv('clean.csv', index=False).")
  example = date_like(summary.vocabulary)
  if example is not None:
    return (
        f'{key!r} looks like dates ({example!r}; '
        f'{len(summary.vocabulary)} distinct values): as a category each '
        'date is a value of its own, and every date after the train data '
        'is one the model has never seen. Expected features that hold for '
        f'new rows. Received: {key!r} read as Categorical. Leave it out '
        f"(columns={{{key!r}: None}}), or write numbers from it into the "
        'data (days since it, its month or weekday) and train on those.')
  if id_like(summary):
    return (
        f'{key!r} looks like an ID: {len(summary.vocabulary)} distinct '
        f'values in {summary.count} rows of the {summary.source}, one per '
        'row or nearly; the model learns each row apart, and a new row\'s '
        f'{key} is a value it has never seen. Expected features that hold '
        f'for new rows. Received: {key!r} read as Categorical. Leave it out: '
        f'columns={{{key!r}: None}}.')
  return None


def id_like(summary) -> bool:
  """Whether a category has (nearly) one value per row."""
  count = summary.count or 0
  return (count >= ID_MIN_VALUES and
          len(summary.vocabulary) >= ID_SHARE * count)


def date_like(values) -> Optional[str]:
  """A value of `values` that reads as a date when (nearly) all do, else
  None."""
  tried = [str(v) for v in values[:_DATE_TRIES] if str(v).strip()]
  if not tried:
    return None
  dates = [v for v in tried if _is_date(v)]
  return dates[0] if len(dates) >= DATE_SHARE * len(tried) else None


def _is_date(text: str) -> bool:
  if not _DATE.match(text):
    return False
  day = text.strip().split()[0].split('T')[0]
  for form in _DATE_FORMATS:
    try:
      datetime.datetime.strptime(day, form)
      return True
    except ValueError:
      continue
  return False
