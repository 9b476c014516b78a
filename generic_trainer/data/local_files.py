"""Local CSV or TFRecord files as split folders, an Examples artifact, a schema.

Used by the Estimator and the local command so that a TrainSpec or a
`run_fn` trained outside a pipeline reads its data as a pipeline does. Each
split gets a folder as ExampleGen writes it: CSV files are converted once to
gzip TFRecords of tf.Example (`csv_data`: every mistake named by file and
line), TFRecord files are linked after a check. A schema is inferred (int,
float or bytes per column; one value per example) unless one is given; the
data converted or linked after it (the eval data, or all of it with a given
schema) is checked against it.
"""

import os
import json
from typing import Dict, List, Optional

from generic_trainer.system import atomic_files
from generic_trainer.system import journal
from generic_trainer.system import paths
from generic_trainer.data import tfrecords
from generic_trainer.errors import InputArtifactError
from generic_trainer.data import csv_data
from generic_trainer.system import progress
from generic_trainer.data import csv_dialect
from generic_trainer.data import statistics
from generic_trainer.errors import summarize
from generic_trainer.trainspec import outputs
from generic_trainer.system.lazy import artifact_utils
from generic_trainer.system.lazy import schema_pb2
from generic_trainer.system.lazy import standard_artifacts
from generic_trainer.system.lazy import tf
from generic_trainer.keys import SPLIT_DATA_FILE


def resolve_files(data) -> List[str]:
  """Files matching a path, a glob, or a list of them (each globbed once,
  here: a path that names an existing file is that file; see `paths`)."""
  patterns = [data] if isinstance(data, str) else list(data)
  files = sorted({f for p in patterns for f in paths.user_files(p)})
  if not files:
    raise InputArtifactError(
        f'No data files found for {data!r}. Expected CSV files (*.csv) or '
        'TFRecord files of tf.Example (*.tfrecord, *.gz). Received: a path '
        'or glob that matches no file. Check the path.')
  return files


def to_split(data, split_dir: str, schema=None,
             schema_source: str = 'the schema',
             delimiter: Optional[str] = None,
             required: Optional[Dict[str, str]] = None,
             kept_rows: Optional[str] = None) -> List[str]:
  """Makes `split_dir` a split folder of the data; returns its TFRecord files.

  CSV files become one gzip TFRecord file, `data.gz`; TFRecord files are
  linked. What the folder held before is removed. With `schema` (described
  by `schema_source` in messages), the data must follow it: CSV columns and
  kinds, tf.Example features. CSV files are separated by `delimiter` (None:
  commas; another delimiter found is refused). Their missing values (see
  `csv_dialect.MISSING`) are counted per column, logged, and kept in
  `missing_values.json` beside the split folders (`missing_values` reads
  it); in a column of `required` ({column: why it cannot be missing}), or
  one the schema requires, they are refused. TFRecord files are checked
  first (`check_tfrecords`, with `kept_rows`).

  Raises:
    InputArtifactError: the data is unreadable or does not follow the
      schema; the message names the file (and line or record).
  """
  files = resolve_files(data)
  if any(f.endswith('.csv') for f in files) and not all(
      f.endswith('.csv') for f in files):
    raise InputArtifactError(
        f'Mixed CSV and non-CSV files in {files}; pass one kind at a time. '
        'Expected CSV files only, or TFRecord files only. Received: '
        f'{sum(f.endswith(".csv") for f in files)} CSV and '
        f'{sum(not f.endswith(".csv") for f in files)} other file(s). Pass '
        'one kind of file per split.')
  inside = [f for f in files if _is_within(f, split_dir)]
  if inside:
    raise InputArtifactError(
        f'The data files {inside} lie in {split_dir}, the folder they would '
        'be written to. Expected data outside it. Received: the files above. '
        'Move them elsewhere first.')
  if files[0].endswith('.csv'):
    tables = [csv_data.read(f, delimiter) for f in files]
    required = dict(required or {})
    if schema is not None:
      kinds = csv_data.kinds_from_schema(schema)
      for table in tables:
        csv_data.check_against(table, kinds, schema_source)
      required.update(csv_data.required_by_schema(schema, schema_source))
    else:
      kinds = csv_data.infer_kinds(tables)
    csv_data.check_required(tables, required)
    _clear(split_dir)
    _record_missing(tables, split_dir)
    out = os.path.join(split_dir, SPLIT_DATA_FILE)
    # The rows keep the CSV files' permissions: a private file stays so.
    csv_data.write(tables, kinds, out, common_mode(files),
                   schema_source if schema is not None else None)
    stamp_like([out], files)
    return [out]
  check_tfrecords(files, kept_rows)
  if schema is not None:
    # Inside: both modules import TensorFlow at their top, and the
    # command's checks of its flags import this module before TensorFlow.
    from generic_trainer.data import tf_example_dataset  # pylint: disable=g-import-not-at-top
    from generic_trainer.data import schema_check  # pylint: disable=g-import-not-at-top
    config, _ = tf_example_dataset.parser_config(schema)
    schema_check.check_examples(files, config, os.path.basename(split_dir),
                              schema_source)
  return link_split(files, split_dir)


MISSING_FILE = 'missing_values.json'


def _record_missing(tables, split_dir: str) -> None:
  """Logs the missing values of `tables` per column and adds them to
  MISSING_FILE beside `split_dir` ({split: {column: {spelling: count}}})."""
  counts: Dict[str, Dict[str, int]] = {}
  for table in tables:
    for column, spelled in table.missing.items():
      for spelling, n in spelled.items():
        into = counts.setdefault(column, {})
        into[spelling] = into.get(spelling, 0) + n
  split = statistics.split_of(os.path.join(split_dir, 'data')) or (
      os.path.basename(split_dir))
  root = os.path.dirname(split_dir)
  if os.path.basename(root).startswith('.'):  # A staging folder ('.whole').
    root = os.path.dirname(root)
  path = os.path.join(root, MISSING_FILE)
  recorded = missing_values(root) or {}
  recorded.pop(split, None)
  if counts:
    progress.log().warning(
        'missing values: %s data read %s as missing (no value in the '
        'tf.Example); counts per column (spelling count): %s',
        split, '/'.join(sorted({repr(s) for c in counts.values()
                                for s in c})),
        csv_dialect.describe_missing(counts))
    recorded[split] = counts
  if recorded:
    atomic_files.write_json(path, recorded, indent=1, sort_keys=True)
  elif os.path.exists(path):
    os.remove(path)


ALL_COLUMNS = '*'  # A key of `required`: every column not named otherwise.


def required_columns(spec_class) -> Dict[str, str]:
  """{column: why} of the columns a TrainSpec cannot train on with a value
  missing (`required_of` its labels and `feature_keys`). A run_fn module
  (None): none known, every missing value is read as missing."""
  if spec_class is None:
    return {}
  try:
    keys = outputs.label_keys(outputs.outputs_of(spec_class))
  except Exception:  # pylint: disable=broad-except
    keys = []  # The spec's own checks say what is wrong with its labels.
  features = getattr(spec_class, 'feature_keys', None)
  return required_of(spec_class.__name__, keys,
                     features if isinstance(features, (list, tuple)) else None,
                     fills_missing=getattr(spec_class, FILLS_MISSING, False))


FILLS_MISSING = 'fills_missing_features'  # A TrainSpec's class attribute.


def required_of(name: str, labels, features: Optional[List[str]],
                fills_missing: bool) -> Dict[str, str]:
  """{column: why} of the columns the TrainSpec `name` cannot train on
  with a value missing: the one rule of blanks in CSV data, for the
  command's first look at the data (`data.first_look`, from the module's
  source) and its conversion (`required_columns`, from the class).

  Its `labels`, always. Its features (`features`, its `feature_keys`;
  None: every column, `ALL_COLUMNS`), which the model takes as one value
  per example, unless the spec fills a missing feature itself
  (`fills_missing`: a canned spec fills it with 0 or '', in a pipeline and
  on the command alike), when blanks are trained on as missing and said
  (`filled_line`)."""
  required = {k: f'it is the label of TrainSpec {name}' for k in labels}
  if fills_missing:
    return required
  why = (f'TrainSpec {name} feeds it to the model, which takes one value '
         'per example (leave it out of feature_keys, or use a run_fn that '
         'handles missing values, to train without it)')
  if features is not None:
    required.update({k: why for k in features if k not in required})
  else:
    required[ALL_COLUMNS] = why
  return required


def filled_line(name: str, counts: Dict[str, Dict[str, int]]) -> str:
  """The line that says a canned spec fills the features `counts`
  ({column: {spelling: count}}) has blanks in."""
  return (f'missing values: TrainSpec {name} fills them with 0 (numbers) '
          f"or '' (words) while it trains, as in a pipeline: "
          f'{csv_dialect.describe_missing(counts)}')


def run_fn_required() -> Dict[str, str]:
  """{ALL_COLUMNS: why} for a run_fn module trained on CSV data with an
  inferred schema: a column with blanks would be inferred optional, a
  VarLenFeature (sparse) that a run_fn written for dense columns fails on
  deep in its own code ('VarLenFeature' object has no attribute
  'default_value'), so blanks are named before its code runs."""
  return {ALL_COLUMNS: (
      'with the schema inferred, a column with blanks is read as optional '
      '(a tf.io.VarLenFeature, sparse), which a run_fn written for dense '
      'columns fails on; to keep the blanks, pass --schema with the schema '
      'your run_fn reads and give those columns a default in the run_fn '
      "(as TFX's templates' _fill_in_missing does)")}


def missing_values(data_dir: str) -> Optional[Dict[str, Dict]]:
  """{split: {column: {spelling: count}}} of the CSV data converted into
  `data_dir`, or None when no value was missing."""
  path = os.path.join(data_dir, MISSING_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def check_tfrecords(files: List[str], kept_rows: Optional[str] = None
                    ) -> None:
  """Reads each file (all of it when at most 16 MiB, else its first
  record), so a wrong, damaged or truncated file fails before training;
  only its first record when an earlier check read it whole and its rows
  are kept in `kept_rows` (the cache folder), unchanged since
  (`data.kept.read_before`)."""
  # Inside: `read_before` imports TensorFlow at its top; this module must
  # import light (the command's checks of its flags).
  from generic_trainer.data.kept import read_before  # pylint: disable=g-import-not-at-top
  for path in files:
    error = read_before.check_error(path, kept_rows)
    if error is not None:
      raise InputArtifactError(
          f'{path} is not a readable {tfrecords.describe(path)} file: '
          f'{summarize(error)} (Received: {type(error).__name__}). Expected '
          'TFRecord files of tf.Example (gzip when the name ends in .gz) or '
          'CSV files (named *.csv). Check the file, or convert it.'
      ) from error


def link_split(files: List[str], split_dir: str) -> List[str]:
  """Links `files` into `split_dir` (which it clears); returns the links.

  Names are kept (the `.gz` suffix says the files are gzip), prefixed with a
  number when two files share a name.
  """
  _clear(split_dir)
  names = [os.path.basename(f) for f in files]
  if len(set(names)) < len(names):
    names = [f'{i:05d}-{name}' for i, name in enumerate(names)]
  links = [os.path.join(split_dir, name) for name in names]
  for source, link in zip(files, links):
    os.symlink(os.path.realpath(source), link)
  return links


def _clear(folder: str) -> None:
  """Empties the split folder `folder` of what a run writes there (its
  data.gz, links to the data); creates it when missing.

  Raises:
    InputArtifactError: the folder holds other files, which would be read
      as data and which only their owner may delete.
  """
  if os.path.islink(folder):
    raise InputArtifactError(
        f'{folder} is a link to {os.readlink(folder)!r}, which no run made. '
        'A run writes the split\'s data there. Expected a folder a run made, '
        'or nothing. Received: a link. Remove the link.')
  atomic_files.make_folders(folder)
  others = []
  for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    if os.path.islink(path) or (name == SPLIT_DATA_FILE and os.path.isfile(path)) \
        or name.startswith(atomic_files.TEMP_PREFIX):
      os.unlink(path)
    else:
      others.append(name)
  if others:
    raise InputArtifactError(
        f'{folder} holds {others}, which no run wrote. A run writes the '
        'split\'s data there and reads every file in it as data, and it '
        'deletes only what it wrote. Expected a folder holding only what a '
        f'run wrote. Received: {len(others)} other file(s). Move them '
        'elsewhere.')


def common_mode(files: List[str]) -> int:
  """The permission bits every one of `files` has (read and write only)."""
  mode = 0o666
  for path in files:
    mode &= os.stat(path).st_mode
  return mode & 0o666


def stamp_like(outs: List[str], sources: List[str]) -> None:
  """Gives the files `outs`, converted from `sources`, the newest
  modification time of the sources. The conversion writes the same bytes
  for the same rows, so a retrain on unchanged data leaves its converted
  files as they were (path, size, time and content): the kept parsed rows
  of the last run are a hit (`data.kept.key`), as for ExampleGen's files.
  """
  newest = max(os.stat(path).st_mtime_ns for path in sources)
  for out in outs:
    os.utime(out, ns=(newest, newest))
    # Its identity changed with its time: noted again, or the next run
    # would find it changed since it was written and keep it as no run's.
    journal.note(out, os.lstat(out))


def _is_within(path: str, folder: str) -> bool:
  path, folder = os.path.realpath(path), os.path.realpath(folder)
  return os.path.commonpath([path, folder]) == folder


def infer_schema(files: List[str], limit: int = 1000):
  """A Schema from the first `limit` tf.Examples of `files`."""
  kinds, counts, present, seen = {}, {}, {}, 0
  for path in files:
    read = 0  # Records of this file read so far.
    shown = os.path.realpath(path)  # The user's file, not the link to it.
    try:
      for record in tfrecords.records(path):
        if read >= limit - seen:
          break
        example = tf.train.Example.FromString(record)
        _count_features(example, kinds, counts, present)
        read += 1
    except tf.errors.OpError as e:
      raise InputArtifactError(
          f'{shown} is not a readable {tfrecords.describe(path)} file: '
          f'{summarize(e)} (after {read} records). It is damaged or cut '
          'short; re-write it. Expected a whole TFRecord file. Received: '
          f'{type(e).__name__} after {read} records. Re-write the file.'
          ) from e
    except Exception as e:  # pylint: disable=broad-except
      raise InputArtifactError(
          f'{shown}, record {read}, is not a tf.Example ({type(e).__name__}'
          f': {e}). Expected TFRecord files of serialized tf.Example, as '
          'ExampleGen writes them, or CSV files. Received: a record that does '
          'not parse. Convert the data, or pass CSV files.') from e
    seen += read
    if seen >= limit:
      break
  if not seen:
    raise InputArtifactError(
        f'No tf.Example records in {files}. Expected at least one record. '
        'Received: empty files. Write the data again, or pass other files.')
  types = {'int64_list': schema_pb2.INT, 'float_list': schema_pb2.FLOAT,
           'bytes_list': schema_pb2.BYTES}
  schema = schema_pb2.Schema()
  for name in sorted(kinds):
    feature = schema.feature.add(name=name, type=types[kinds[name]])
    if counts[name] == {1} and present[name] == seen:
      feature.shape.dim.add(size=1)
      feature.presence.min_fraction = 1.0
  return schema


def _count_features(example, kinds, counts, present) -> None:
  for name, feature in example.features.feature.items():
    kind = feature.WhichOneof('kind')
    if kind is None:
      continue
    kinds[name] = kind
    counts.setdefault(name, set()).add(len(getattr(feature, kind).value))
    present[name] = present.get(name, 0) + 1


def examples_artifact(root: str, splits: dict):
  """An Examples artifact over the split folders written by `to_split`."""
  artifact = standard_artifacts.Examples()
  artifact.uri = root
  artifact.split_names = artifact_utils.encode_split_names(list(splits))
  artifact.set_string_custom_property('payload_format', 'FORMAT_TF_EXAMPLE')
  return artifact


def write_schema(schema, path: str, given: Optional[str] = None) -> str:
  """`given` if there is one, else `schema` written to `path`; the path."""
  if given:
    return given
  # Inside: `schema_file` imports TensorFlow at its top; this module is
  # read by the command's checks of its flags, before TensorFlow.
  from generic_trainer.data import schema_file  # pylint: disable=g-import-not-at-top
  return schema_file.write(path, schema)
