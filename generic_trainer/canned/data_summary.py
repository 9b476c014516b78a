"""What a canned spec learns from the data before training.

Means and variances to normalise, vocabularies, bucket boundaries, and the
label's classes: from the `statistics` input when it is connected and
holds them (StatisticsGen's FeatureStats.pb of the train split), otherwise
from a sample of the train data (the first `sample_rows` rows, read once
for every feature that needs it). With Transform, the features are the
transformed ones, which the raw statistics do not describe, so they come
from the sample.
"""

import collections
from typing import Any, Dict, List, Optional

import attr

from generic_trainer.errors import SpecError
from generic_trainer.data import statistics
from generic_trainer.system.lazy import dataset_options
from generic_trainer.system.lazy import np
from generic_trainer.system.lazy import schema_pb2
from generic_trainer.system.lazy import tf

MOMENTS = 'moments'
QUANTILES = 'quantiles'
VOCABULARY = 'vocabulary'
CLASSES = 'classes'
NOTHING = 'nothing'


@attr.s
class FeatureSummary:
  """One feature, summarised.

  Attributes:
    name: The feature.
    dtype: 'float', 'int' or 'string'.
    source: 'statistics' or 'sample'.
    mean, variance: Of the values (numbers).
    vocabulary: The distinct values, most frequent first.
    cuts: Sorted values (a sample) or quantile boundaries, for buckets.
    max_value: The largest value (ints).
    count: How many values the vocabulary was counted from (None when not
      known), for telling a column of one value per row (an ID).
  """
  name = attr.ib(type=str)
  dtype = attr.ib(type=str)
  source = attr.ib(type=str, default='sample')
  mean = attr.ib(type=Optional[float], default=None)
  variance = attr.ib(type=Optional[float], default=None)
  vocabulary = attr.ib(type=List[Any], factory=list)
  cuts = attr.ib(type=List[float], factory=list)
  max_value = attr.ib(type=Optional[float], default=None)
  count = attr.ib(type=Optional[int], default=None)

  def quantiles(self, num_buckets: int) -> List[float]:
    """Boundaries cutting the values into `num_buckets` of equal count."""
    if not self.cuts:
      raise SpecError(
          f'The feature {self.name!r} has no values to cut into buckets. '
          'Expected values in the statistics or a sample of rows. Received: '
          'none. Give Bucketized(boundaries=[...]).')
    points = np.quantile(np.asarray(self.cuts, dtype=np.float64),
                         np.arange(1, num_buckets) / num_buckets)
    return sorted({float(p) for p in points})


def dtype_of(feature) -> str:
  return {schema_pb2.BYTES: 'string', schema_pb2.INT: 'int'}.get(
      feature.type, 'float')


def from_statistics(name: str, dtype: str, stats, need: str
                    ) -> Optional[FeatureSummary]:
  """The summary StatisticsGen's statistics give, or None when they lack
  what `need` asks for."""
  if stats is None or need == NOTHING:
    return None
  summary = FeatureSummary(name, dtype, source='statistics')
  if stats.HasField('num_stats') and need in (MOMENTS, QUANTILES, CLASSES):
    num = stats.num_stats
    summary.mean, summary.variance = num.mean, num.std_dev ** 2
    summary.max_value = num.max
    quantiles = [h for h in num.histograms if h.type == h.QUANTILES]
    if quantiles and quantiles[0].buckets:
      buckets = quantiles[0].buckets
      summary.cuts = [buckets[0].low_value] + [b.high_value for b in buckets]
    if need != QUANTILES or summary.cuts:
      return summary
  if stats.HasField('string_stats') and need in (VOCABULARY, CLASSES):
    strings = stats.string_stats
    ranked = [(b.label, b.sample_count) for b in strings.rank_histogram.buckets]
    if len(ranked) < len(strings.top_values):
      ranked = [(v.value, v.frequency) for v in strings.top_values]
    if ranked and len(ranked) >= strings.unique:
      ranked.sort(key=lambda p: (-p[1], p[0]))
      summary.vocabulary = [_typed(v, dtype) for v, _ in ranked]
      summary.count = int(sum(n for _, n in ranked))
      return summary
  return None


def from_sample(name: str, dtype: str, values) -> FeatureSummary:
  """The summary of a sample of the feature's values (a numpy array)."""
  summary = FeatureSummary(name, dtype, source='sample')
  values = np.asarray(values).ravel()
  if dtype == 'string':
    values = [v.decode() if isinstance(v, bytes) else str(v) for v in values]
  else:
    values = values[~np.isnan(values.astype(np.float64))]
    if values.size:
      summary.mean = float(np.mean(values))
      summary.variance = float(np.var(values))
      summary.max_value = float(np.max(values))
      summary.cuts = np.sort(values.astype(np.float64))[
          ::max(1, values.size // 10000)].tolist()
    values = values.tolist()
  counts = collections.Counter(values)
  summary.count = len(values)
  summary.vocabulary = [v for v, _ in sorted(counts.items(),
                                             key=lambda p: (-p[1], p[0]))]
  if dtype == 'int':
    summary.vocabulary = [int(v) for v in summary.vocabulary]
  return summary


def read_sample(fn_args, schema, keys: List[str], rows: int
                ) -> Dict[str, Any]:
  """{feature: numpy array of its values} in the first `rows` rows of the
  train data (present values only, for optional features)."""
  options = dataset_options.TensorFlowDatasetOptions(
      batch_size=min(rows, 1024), num_epochs=1, shuffle=False,
      prefetch_buffer_size=1)
  dataset = fn_args.data_accessor.tf_dataset_factory(
      fn_args.train_files, options, schema)
  parts = {k: [] for k in keys}
  seen = 0
  for batch in dataset:
    for key in keys:
      value = batch[key]
      if isinstance(value, tf.sparse.SparseTensor):
        value = value.values
      elif isinstance(value, tf.RaggedTensor):
        value = value.flat_values
      parts[key].append(np.asarray(value).ravel())
    seen += int(tf.shape(tf.nest.flatten(batch)[0])[0])
    if seen >= rows:
      break
  return {k: np.concatenate(v) if v else np.array([]) for k, v in parts.items()}


def summarize(fn_args, schema, needs: Dict[str, str], sample_rows: int
              ) -> Dict[str, FeatureSummary]:
  """{feature: summary} of the features in `needs` ({feature: what its
  column needs: MOMENTS, QUANTILES, VOCABULARY, CLASSES or NOTHING}).

  From the statistics where they have it; the rest from one sample.
  """
  features = {f.name: f for f in schema.feature}
  stats = statistics.read_features(
      getattr(fn_args, 'statistics_path', None),
      statistics.split_names(fn_args.train_files))
  summaries = {}
  for key, need in needs.items():
    summary = from_statistics(key, dtype_of(features[key]), stats.get(key),
                              need)
    if summary is not None:
      summaries[key] = summary
  rest = [k for k, need in needs.items()
          if k not in summaries and need != NOTHING]
  if rest:
    sample = read_sample(fn_args, schema, rest, sample_rows)
    for key in rest:
      summaries[key] = from_sample(key, dtype_of(features[key]), sample[key])
  for key in needs:
    summaries.setdefault(key, FeatureSummary(key, dtype_of(features[key]),
                                             source='none'))
  return summaries


def _typed(value: str, dtype: str):
  if dtype == 'int':
    try:
      return int(value)
    except ValueError:
      return value
  return value
