"""Split folders and their feature statistics, as ExampleGen and
StatisticsGen lay them out: the one owner of both facts.

An Examples artifact holds `Split-<name>/` folders of data files; an
ExampleStatistics artifact holds `Split-<name>/FeatureStats.pb`, a
`tensorflow_metadata` DatasetFeatureStatisticsList (`read_split`). The
canned specs read means, standard deviations, vocabularies (top values)
and quantiles from it instead of reading the data (`read_features`);
`fn_args.num_examples` comes from its counts.
"""

import os
from typing import Dict, List, Optional

from generic_trainer.errors import InputArtifactError
from generic_trainer.system.lazy import statistics_pb2
from generic_trainer.system.lazy import tf

STATS_FILE = 'FeatureStats.pb'
# TFX's split folder prefix (tfx.types.artifact_utils); kept here so that
# reading data does not import TFX.
_SPLIT_PREFIX = 'Split-'


def split_folder(split: str) -> str:
  """'Split-train' for 'train'."""
  return _SPLIT_PREFIX + split


def is_split_folder(name: str) -> bool:
  """Whether a folder's name is a split's ('Split-train')."""
  return name.startswith(_SPLIT_PREFIX)


def split_of(path: str) -> Optional[str]:
  """The split a data file belongs to (`.../Split-train/data.gz` ->
  'train'), or None when its folder is not a split folder."""
  folder = os.path.basename(os.path.dirname(path.rstrip('/')))
  return folder[len(_SPLIT_PREFIX):] if folder.startswith(
      _SPLIT_PREFIX) else None


def split_names(files: List[str]) -> List[str]:
  """The split names of data files laid out as ExampleGen lays them out
  (`.../Split-train/data.gz` -> 'train')."""
  names = []
  for path in files:
    split = split_of(path)
    if split is not None and split not in names:
      names.append(split)
  return names


def read_features(statistics_path: Optional[str], splits: List[str]
                  ) -> Dict[str, object]:
  """{feature name: FeatureNameStatistics} of the first of `splits` whose
  statistics the artifact at `statistics_path` holds; {} without one.

  Raises:
    InputArtifactError: the statistics file is there but unreadable.
  """
  if not statistics_path:
    return {}
  for split in splits:
    proto = read_split(statistics_path, split)
    if proto is None:
      continue
    found = {}
    for dataset in proto.datasets:
      for feature in dataset.features:
        name = feature.name or '.'.join(feature.path.step)
        found[name] = feature
    return found
  return {}


def read_split(statistics_path: str, split: str):
  """The DatasetFeatureStatisticsList of `split` in the ExampleStatistics
  artifact at `statistics_path` (local or remote), or None when it has no
  such split.

  Raises:
    InputArtifactError: the file is there but unreadable.
  """
  path = os.path.join(statistics_path, split_folder(split), STATS_FILE)
  if not tf.io.gfile.exists(path):
    return None
  proto = statistics_pb2.DatasetFeatureStatisticsList()
  try:
    with tf.io.gfile.GFile(path, 'rb') as f:
      proto.ParseFromString(f.read())
  except Exception as e:  # pylint: disable=broad-except
    raise InputArtifactError(
        f'Cannot read the statistics of split {split!r} from {path}: {e}. '
        'Expected the FeatureStats.pb that StatisticsGen writes. Received: '
        'a file that does not read as one. Re-run '
        'StatisticsGen, or leave the statistics input out.') from e
  return proto
