"""Feature statistics of a split, as StatisticsGen writes them.

An ExampleStatistics artifact holds `Split-<name>/FeatureStats.pb`, a
`tensorflow_metadata` DatasetFeatureStatisticsList. The canned specs read
means, standard deviations, vocabularies (top values) and quantiles from
it instead of reading the data.
"""

import os
from typing import Dict, List, Optional

from generic_trainer.errors import InputArtifactError

STATS_FILE = 'FeatureStats.pb'


def split_names(files: List[str]) -> List[str]:
  """The split names of data files laid out as ExampleGen lays them out
  (`.../Split-train/data.gz` -> 'train')."""
  names = []
  for path in files:
    folder = os.path.basename(os.path.dirname(path))
    if folder.startswith('Split-') and folder[6:] not in names:
      names.append(folder[6:])
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
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=g-import-not-at-top
  for split in splits:
    path = os.path.join(statistics_path, f'Split-{split}', STATS_FILE)
    if not os.path.isfile(path):
      continue
    proto = statistics_pb2.DatasetFeatureStatisticsList()
    try:
      with open(path, 'rb') as f:
        proto.ParseFromString(f.read())
    except Exception as e:  # pylint: disable=broad-except
      raise InputArtifactError(
          f'Cannot read the statistics of split {split!r} from {path}: {e}. '
          'Expected the FeatureStats.pb that StatisticsGen writes.') from e
    found = {}
    for dataset in proto.datasets:
      for feature in dataset.features:
        name = feature.name or '.'.join(feature.path.step)
        found[name] = feature
    return found
  return {}
