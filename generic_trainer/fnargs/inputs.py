"""Checks and readers of the trainer's input artifacts, before training.

Each check names the artifact it is about (its URI, and span and version
when it has them): with a rolling window of spans, `examples` holds several
Examples artifacts, and every one is checked on its own.
"""

import json
import os
from typing import Dict, List, Optional

from tfx import types
from tfx.types import artifact_utils
from tfx.utils import io_utils

from generic_trainer.system import progress
from generic_trainer.data.kept import read_before
from generic_trainer.data import statistics
from generic_trainer.errors import InputArtifactError
from generic_trainer.data import tfrecords
from generic_trainer.data import schema_check
from generic_trainer.errors import summarize
from generic_trainer.data import spelled_missing
from generic_trainer.data import glued_columns
from generic_trainer.keys import SAVED_MODEL_FILE
from tfx.utils import path_utils
from tfx.dsl.io import fileio


def describe(artifact: types.Artifact) -> str:
  """'<type> artifact <uri> (span 3, version 0)', span and version when it
  has them."""
  details = [artifact.uri]
  for name in ('span', 'version'):
    if artifact.has_property(name) and getattr(artifact, name) is not None:
      details.append(f'{name} {getattr(artifact, name)}')
  return f'{artifact.type_name} artifact ' + ', '.join(details)


def check_splits(examples: types.Artifact, train_args, eval_args,
                 kept_rows: Optional[str] = None) -> None:
  """Raises if a split named in train/eval args is not in `examples`, is
  empty, or holds a file that is not readable tf.Example TFRecords. A file
  that an earlier check read whole, and whose rows are kept in `kept_rows`
  (the `parsed_rows` input's folder), unchanged since, is read by its first
  record only (`data.kept.read_before`)."""
  available = artifact_utils.decode_split_names(examples.split_names)
  for name, split_args, default in (('train_args', train_args, 'train'),
                                    ('eval_args', eval_args, 'eval')):
    for split in list(split_args.splits) or [default]:
      if split not in available:
        raise InputArtifactError(
            f"The examples have no split {split!r} (asked for by {name}"
            f"{'' if split_args.splits else ' by default'}). The examples "
            f'({describe(examples)}) have the splits {available}. Set '
            f'{name}.splits to some of those, or leave these examples out. '
            f'Expected a split of {available}. Received: {split!r}.')
      uri = artifact_utils.get_split_uri([examples], split)
      files = sorted(f for f in _list_files(uri)
                     if not os.path.basename(f).startswith('.'))
      if not files:
        raise InputArtifactError(
            f'The {split!r} split of the examples is empty: no files in '
            f'{uri} ({describe(examples)}). Check the component that '
            'produced the examples. Expected TFRecord files. Received: an '
            'empty folder.')
      payload = examples.get_string_custom_property('payload_format')
      if payload in ('', 'FORMAT_TF_EXAMPLE', 'FORMAT_TF_SEQUENCE_EXAMPLE'):
        for filename in files:
          _check_tfrecord(os.path.join(uri, filename), split, examples,
                          tf_example=payload != 'FORMAT_TF_SEQUENCE_EXAMPLE',
                          kept_rows=kept_rows)
        if payload != 'FORMAT_TF_SEQUENCE_EXAMPLE':
          _check_spelled_missing(os.path.join(uri, files[0]), split, examples)


def _check_tfrecord(path: str, split: str, examples: types.Artifact,
                    tf_example: bool, kept_rows: Optional[str]) -> None:
  """Reads a TFRecord file (all of it when small and not read whole before,
  else its first record), so corruption fails early; with `tf_example`, its
  first record must be a tf.Example."""
  error = read_before.check_error(path, kept_rows)
  if error is not None:
    raise InputArtifactError(
        f'The {split!r} split file {path} is not a readable '
        f'{tfrecords.describe(path)} file: {summarize(error)}. It is corrupt '
        'or truncated: re-run the component that produced the examples '
        f'({describe(examples)}). Expected a readable TFRecord file. '
        f'Received: {type(error).__name__}.') from error
  record = tfrecords.first_record(path) if tf_example else None
  problem = schema_check.record_problem(record, {}) if record else ''
  if record and not problem:
    problem = glued_columns.problem(record) or ''
  if problem:
    raise InputArtifactError(
        f'The {split!r} split file {path} ({describe(examples)}), record 0: '
        f'{problem}')


def _check_spelled_missing(path: str, split: str,
                           examples: types.Artifact) -> None:
  """Refuses string columns of numbers whose missing values the CSV spelled
  out (see `data.spelled_missing`), read from the split's first file."""
  problem = spelled_missing.problem(path)
  if problem:
    raise InputArtifactError(
        f'The {split!r} split file {path} ({describe(examples)}): {problem}')


def base_model_path(artifacts: List[types.Artifact]) -> Optional[str]:
  """The serving SavedModel folder of the base_model input, or None."""
  if not artifacts:
    return None
  model = artifact_utils.get_single_instance(artifacts)
  return path_utils.serving_model_path(
      model.uri, path_utils.is_old_model_artifact(model))


def check_base_model(artifacts: List[types.Artifact]) -> None:
  """Raises unless the base_model artifact holds a serving SavedModel."""
  path = base_model_path(artifacts)
  if path is None:
    return
  if not os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)) and (
      '://' not in path):
    raise InputArtifactError(
        f'The base_model artifact ({artifacts[0].uri}) holds no SavedModel: '
        f'{path}/{SAVED_MODEL_FILE} does not exist. Expected the `model` output '
        'of a trainer that finished; connect that channel, or drop '
        'base_model. Received: a Model artifact without a SavedModel.')


def _list_files(uri: str) -> List[str]:
  return fileio.listdir(uri) if fileio.isdir(uri) else []


def read_hyperparameters(artifacts: List[types.Artifact]) -> Optional[dict]:
  """The HyperParameters artifact's JSON as a dict, or None."""
  if not artifacts:
    return None
  uri = artifact_utils.get_single_uri(artifacts)
  try:
    path = io_utils.get_only_uri_in_dir(uri)
  except Exception as e:  # pylint: disable=broad-except
    raise InputArtifactError(
        f'The hyperparameters artifact ({uri}) must hold exactly one JSON '
        f'file (as Tuner writes it). {e}. Expected one JSON file. Received: '
        f'the folder {uri}. Connect tuner.outputs[\'best_hyperparameters\'].'
        ) from e
  try:
    value = json.loads(io_utils.read_string_file(path))
  except ValueError as e:
    raise InputArtifactError(
        f'The hyperparameters file {path} is not valid JSON: {e}. Expected '
        'the `keras_tuner.HyperParameters.get_config()` JSON that Tuner '
        f'writes. Received: {type(e).__name__}. Fix the file, or re-run the '
        'Tuner.') from e
  if not isinstance(value, dict):
    raise InputArtifactError(
        f'The hyperparameters file {path} must hold a JSON object. Received: '
        f'a {type(value).__name__}. Write an object ({{"learning_rate": '
        '0.01}), as Tuner does.')
  return value


def read_num_examples(statistics: List[types.Artifact],
                      examples: List[types.Artifact]
                      ) -> Optional[Dict[str, int]]:
  """Examples per split, summed over the Examples artifacts, from their
  statistics; None without statistics, or when some Examples artifact has
  none (matched by span and version; one of each is matched as it is)."""
  if not statistics:
    return None
  if len(statistics) == 1 and len(examples) == 1:
    return _count(statistics[0])
  matched = []
  for artifact in examples:
    same = [s for s in statistics if _same_data(s, artifact)]
    if not same:
      progress.log().info(
          'fn_args.num_examples is None: no statistics artifact of the span '
          'and version of the examples %s (statistics of %s).',
          describe(artifact), ', '.join(describe(s) for s in statistics))
      return None
    matched.append(same[0])
  counts = {}
  for stats in matched:
    for split, count in _count(stats).items():
      counts[split] = counts.get(split, 0) + count
  return counts


def statistics_path(statistics: List[types.Artifact]) -> Optional[str]:
  """The URI of the statistics artifact (of the newest span, when there are
  several), or None."""
  if not statistics:
    return None
  newest = max(statistics, key=lambda s: (
      (s.span if s.has_property('span') and s.span is not None else -1),
      s.id))
  return newest.uri


def _same_data(stats: types.Artifact, examples: types.Artifact) -> bool:
  """Same span, and same version where both say one."""
  for name in ('span', 'version'):
    values = [getattr(a, name) if a.has_property(name) else None
              for a in (stats, examples)]
    if None not in values and values[0] != values[1]:
      return False
    if name == 'span' and values[0] != values[1]:
      return False
  return True


def _count(stats: types.Artifact) -> Dict[str, int]:
  """Examples per split of one ExampleStatistics artifact."""
  counts = {}
  for split in artifact_utils.decode_split_names(stats.split_names):
    proto = statistics.read_split(stats.uri, split)
    if proto is None:
      raise InputArtifactError(
          f'The statistics artifact {stats.uri} lists split {split!r} but '
          'holds no statistics for it. Expected the '
          f'{statistics.STATS_FILE} that StatisticsGen writes for each split. '
          'Received: none for it. Re-run StatisticsGen, or leave the '
          'statistics input out.')
    counts[split] = sum(d.num_examples for d in proto.datasets)
  return counts
