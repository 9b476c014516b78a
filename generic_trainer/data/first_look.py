"""What a CSV's header and first rows show, told before TensorFlow loads.

The command reads the header and a sample of rows of its CSV data here,
with Python's `csv` alone, before it imports TensorFlow or TFX (seconds to
a minute): a mistake those lines show is told in about a second, not after
the imports. Every mistake found is told in one message, so that a file
with blanks in its label and `$`-formatted amounts needs one run to learn
both:

- the delimiter (a `;`-separated file read at commas) and rows of the
  wrong length (`csv_data.read`);
- decimal commas and words in a column of numbers (`csv_data.infer_kinds`);
- the TrainSpec's label and `feature_keys` against the header, with the
  nearest name (`feature_names`), when its source says them plainly
  (`usercode.static_spec.declared`, which the command passes here);
- blanks where the TrainSpec cannot train on them, by the one rule of
  blanks (`local_files.required_of`);
- a label of amounts written with `$`, `%` or thousands separators for a
  spec that is not a classifier (`heads.regression.numbers_as_text`), and
  a label of words ('yes', 'no') for a canned regressor.

The conversion (`local_files.to_split`) reads every row again and says
what the sample could not show; the sample only says it sooner.
"""

from typing import Dict, List, Optional

from generic_trainer.data import csv_data
from generic_trainer.data import csv_dialect
from generic_trainer.data import feature_names
from generic_trainer.data import local_files
from generic_trainer.errors import GenericTrainerError
from generic_trainer.errors import InputArtifactError
from generic_trainer.heads import regression

SAMPLE_ROWS = 2000
_SHOWN = 3


def check(splits: List[List[str]], delimiter: Optional[str] = None,
          declared=None, required: Optional[Dict[str, str]] = None) -> None:
  """Looks at the header and first `SAMPLE_ROWS` rows of each CSV file of
  `splits` (other files: nothing to look at here).

  Args:
    splits: The data files of each split (the train files, the eval files).
    delimiter: `--csv-delimiter` (None: commas, another found refused).
    declared: What the module's TrainSpec declares
      (`usercode.static_spec.Declared`), or None (a run_fn, or a spec whose
      source does not say its columns).
    required: Without `declared`: {column: why} of the columns that cannot
      be missing (a run_fn's, `local_files.run_fn_required`), or None.

  Raises:
    InputArtifactError: every mistake found, each said with its four parts,
      numbered when there are several; one alone is raised as it is (a
      `$` label is the `SpecError` the label checks would raise).
  """
  problems = [p for files in splits for p in _problems(
      [f for f in files if f.endswith('.csv')], delimiter, declared,
      required)]
  if len(problems) == 1:
    raise problems[0]
  if problems:
    raise InputArtifactError(
        f'{len(problems)} mistakes in the CSV data, all found in its header '
        'and first rows before training: ' + ' '.join(
            f'({n}) {p}' for n, p in enumerate(problems, start=1)))


def filled(files: List[str], delimiter: Optional[str],
           declared) -> Optional[str]:
  """The line that says which blanks a canned spec fills
  (`local_files.filled_line`), from the sample; None when it fills none."""
  if declared is None or not declared.canned:
    return None
  tables = []
  for path in files:
    if path.endswith('.csv'):
      try:
        tables.append(csv_data.read(path, delimiter, limit=SAMPLE_ROWS))
      except InputArtifactError:
        return None
  counts = {}
  for table in tables:
    for column, spelled in table.missing.items():
      if column in declared.labels:
        continue
      into = counts.setdefault(column, {})
      for spelling, n in spelled.items():
        into[spelling] = into.get(spelling, 0) + n
  return local_files.filled_line(declared.name, counts) if counts else None


def _problems(files: List[str], delimiter: Optional[str], declared,
              required: Optional[Dict[str, str]]
              ) -> List[GenericTrainerError]:
  problems, tables = [], []
  for path in files:
    try:
      tables.append(csv_data.read(path, delimiter, limit=SAMPLE_ROWS))
    except InputArtifactError as e:
      problems.append(e)
  if not tables:
    return problems
  header = tables[0].header
  if declared is not None:
    problems += _names(declared, header, tables[0].path)
  try:
    csv_data.infer_kinds(tables)
  except InputArtifactError as e:
    problems.append(e)
  known = [t for t in tables if t.header == header]
  if declared is not None:
    required = local_files.required_of(
        declared.name, declared.labels,
        declared.features if declared.features_said else [],  # Labels alone.
        fills_missing=bool(declared.canned))
  required = {k: why for k, why in (required or {}).items()
              if k in header or k == local_files.ALL_COLUMNS}
  try:
    csv_data.check_required(known, required)
  except InputArtifactError as e:
    problems.append(e)
  if declared is not None and not declared.classifier:
    problems += _label_kinds(declared, known)
  return problems


def _names(declared, header: List[str],
           path: str) -> List[InputArtifactError]:
  """The label and `feature_keys` of the spec the header lacks."""
  problems = []
  for member, names in (('label_key', declared.labels),
                        ('feature_keys', declared.features
                         if isinstance(declared.features, list) else [])):
    missing = feature_names.lacking(names, header)
    if missing:
      problems.append(InputArtifactError(
          f'{feature_names.lacks(f"{declared.name}.{member} names", missing, header, has=f"The header of {path} has")}'
          f' Expected names among the CSV columns. Received: {member}='
          f'{names[0] if member == "label_key" and len(names) == 1 else names!r}. '
          'Fix the spelling in the module, or rename the column in the '
          'header.'))
  return problems


def _label_kinds(declared, tables) -> List[GenericTrainerError]:
  """A label of numbers written with signs ('$647.5'), for a spec that
  takes it as a number; a label of words for a canned regressor."""
  problems = []
  for label in declared.labels:
    if label not in tables[0].header:
      continue
    index = tables[0].header.index(label)
    texts = [row[index] for t in tables for _, row in t.rows]
    marks = regression.numbers_as_text(texts)
    if marks:  # Signs: a plain number in a CSV is read as one.
      problems.append(regression.numbers_as_text_error(
          label, texts, marks, f'TrainSpec {declared.name}'))
    elif marks is None and 'Regressor' in (declared.canned or '') and _words(
        texts):
      words = sorted(_words(texts))
      shown = ', '.join(repr(w) for w in words[:_SHOWN]) + (
          ', ...' if len(words) > _SHOWN else '')
      problems.append(InputArtifactError(
          f'The label column {label!r} holds words ({shown}), but '
          f'{declared.name} is a {declared.canned}, which predicts a number. '
          f'Expected numbers in {label!r}. Received: {len(words)} distinct '
          'word(s) in the first rows. Use '
          f'{declared.canned.replace("Regressor", "Classifier")} as the base '
          f'of {declared.name} instead of {declared.canned} to learn classes '
          '(it reads them from the data), or write the label as plain '
          'numbers to predict an amount.'))
  return problems


def _words(texts: List[str]) -> set:
  """The values of `texts` that are neither numbers nor missing."""
  found = set()
  for text in texts:
    if csv_dialect.is_missing(text):
      continue
    try:
      float(text)
    except ValueError:
      found.add(text.strip())
  return found
