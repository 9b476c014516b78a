"""How a canned spec turns one feature into model inputs: its column.

Each feature gets a column, chosen from the schema (`default_column`) or
given in the spec's `columns = {'feature': Column(...)}`:

- `Numeric`: a number, normalised (mean and variance from the statistics or
  the data); the same value in the linear and the DNN part.
- `Bucketized`: a number cut into buckets (boundaries given, or quantiles
  of the data); one-hot in both parts.
- `Categorical`: a string or integer category: through a vocabulary (given,
  or the most frequent values of the data; StringLookup/IntegerLookup), or
  ids 0..num_buckets-1 as they are (e.g. Transform's vocabulary ids);
  one-hot in the linear part, an embedding in the DNN part.
- `Crossed`: the cross of categorical or bucketized features, hashed into
  `num_bins` (HashedCrossing); linear part only.

Columns are declarations: what they learn from the data comes in a
`data_summary.FeatureSummary` when the model is built. Keras is imported
when a layer is built, not before.
"""

import math
from typing import Any, Optional, Sequence, Tuple

import attr

from generic_trainer.errors import SpecError
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import schema_pb2

DEFAULT_TOP_K = 1000


@attr.s(frozen=True)
class Encoded:
  """What a column makes of its feature (Keras tensors).

  Attributes:
    wide: The linear part's input, [batch, k] float.
    deep: The DNN part's input, [batch, k] float.
    ids: Integer ids [batch, n] for crosses, or None (a Numeric column).
  """
  wide = attr.ib()
  deep = attr.ib()
  ids = attr.ib(default=None)


@attr.s(frozen=True)
class Numeric:
  """A number (or fixed-length vector), normalised unless `normalize` is
  False."""
  normalize = attr.ib(type=bool, default=True)

  def encode(self, key: str, value, summary) -> Encoded:
    value = keras.ops.cast(value, 'float32')
    if self.normalize:
      if summary.mean is None:
        raise SpecError(
            f'The feature {key!r} has no values to normalise with. Expected '
            'its mean and variance from the statistics or a sample of rows. '
            'Received: no statistics and no rows in the sample. Pass '
            "statistics (StatisticsGen's output), or give "
            f'columns={{{key!r}: Numeric(normalize=False)}}.')
      value = keras.layers.Normalization(
          mean=summary.mean, variance=max(summary.variance, 1e-12),
          name=f'{key}_normalized')(value)
    return Encoded(wide=value, deep=value)


@attr.s(frozen=True)
class Bucketized:
  """A number cut at `boundaries`, or into `num_buckets` of equal count."""
  boundaries = attr.ib(type=Optional[Sequence[float]], default=None)
  num_buckets = attr.ib(type=int, default=10)

  def encode(self, key: str, value, summary) -> Encoded:
    boundaries = list(self.boundaries or summary.quantiles(self.num_buckets))
    ids = keras.layers.Discretization(bin_boundaries=boundaries,
                                      name=f'{key}_bucket')(
                                          keras.ops.cast(value, 'float32'))
    one_hot = keras.layers.CategoryEncoding(
        num_tokens=len(boundaries) + 1, output_mode='multi_hot',
        name=f'{key}_buckets')(ids)
    return Encoded(wide=one_hot, deep=one_hot, ids=ids)


@attr.s(frozen=True)
class Categorical:
  """A category: a string or an int.

  Attributes:
    vocabulary: The known values (others share `num_oov` buckets); None to
      take the `top_k` most frequent values of the data.
    num_buckets: For ints that are already ids 0..num_buckets-1 (such as
      Transform's vocabulary and bucket ids): used as they are, values
      outside sharing one bucket. Exclusive with `vocabulary`.
    top_k: The largest vocabulary taken from the data.
    num_oov: Buckets for values outside the vocabulary.
    embedding_dim: The DNN part's embedding width; None for
      ceil(6 * categories ** 0.25).
  """
  vocabulary = attr.ib(type=Optional[Sequence[Any]], default=None)
  num_buckets = attr.ib(type=Optional[int], default=None)
  top_k = attr.ib(type=int, default=DEFAULT_TOP_K)
  num_oov = attr.ib(type=int, default=1)
  embedding_dim = attr.ib(type=Optional[int], default=None)

  def encode(self, key: str, value, summary) -> Encoded:
    if self.vocabulary is not None and self.num_buckets is not None:
      raise SpecError(
          f'Categorical column of {key!r} has both vocabulary and '
          'num_buckets. Expected one of them. Received: '
          f'vocabulary={self.vocabulary!r}, num_buckets={self.num_buckets!r}. '
          'Remove one (keep num_buckets for ids 0..n-1).')
    if self.num_buckets is not None:
      size = self.num_buckets + 1  # The last: every value outside 0..n-1.
      value = keras.ops.cast(value, 'int64')
      ids = keras.ops.where(
          keras.ops.logical_and(value >= 0, value < self.num_buckets), value,
          self.num_buckets)
    else:
      vocabulary = list(self.vocabulary if self.vocabulary is not None else
                        summary.vocabulary[:self.top_k])
      if not vocabulary:
        raise SpecError(
            f'The feature {key!r} has no values to build a vocabulary from'
            '. Expected values in the statistics or a sample of rows. '
            'Received: no statistics and no rows in the sample. Give '
            f"columns={{{key!r}: Categorical(vocabulary=[...])}}.")
      lookup = (keras.layers.StringLookup if summary.dtype == 'string'
                else keras.layers.IntegerLookup)
      if lookup is keras.layers.IntegerLookup:
        vocabulary = [int(v) for v in vocabulary]
        value = keras.ops.cast(value, 'int64')
      ids = lookup(vocabulary=vocabulary, num_oov_indices=self.num_oov,
                   name=f'{key}_lookup')(value)
      size = len(vocabulary) + self.num_oov
    one_hot = keras.layers.CategoryEncoding(
        num_tokens=size, output_mode='multi_hot', name=f'{key}_one_hot')(ids)
    dim = self.embedding_dim or int(math.ceil(6 * size ** 0.25))
    embedded = keras.layers.Embedding(size, dim, name=f'{key}_embedding')(ids)
    deep = keras.ops.mean(embedded, axis=1)  # [batch, values, dim] -> [batch, dim]
    return Encoded(wide=one_hot, deep=deep, ids=ids)


@attr.s(frozen=True)
class Crossed:
  """The cross of `keys` (categorical or bucketized), hashed into `num_bins`
  one-hot buckets; the linear part's feature crosses."""
  keys = attr.ib(type=Tuple[str, ...], converter=tuple)
  num_bins = attr.ib(type=int, default=1000)

  def encode(self, encoded) -> Any:
    """The one-hot cross, from the crossed features' `Encoded`s."""
    ids = []
    for key in self.keys:
      if encoded[key].ids is None:
        raise SpecError(
            f'Crossed{self.keys} crosses {key!r}, a Numeric column; only '
            'categories and buckets cross. Give '
            f"columns={{{key!r}: Bucketized(num_buckets=10)}}. Expected "
            f'Categorical or Bucketized columns. Received: {key!r} as Numeric.')
      ids.append(encoded[key].ids)
    return keras.layers.HashedCrossing(
        num_bins=self.num_bins, output_mode='one_hot',
        name='_x_'.join(self.keys) + '_cross')(tuple(ids))


COLUMN_TYPES = (Numeric, Bucketized, Categorical)


def default_column(feature) -> Any:
  """The column a schema feature gets by default.

  Strings are categories; ints marked categorical in the schema
  (`int_domain { is_categorical: true }`, as Transform marks its vocabulary
  and bucket ids) are ids 0..max when the domain says max, else a
  vocabulary; other numbers are normalised.
  """
  if feature.type == schema_pb2.BYTES:
    return Categorical()
  if feature.type == schema_pb2.INT and feature.HasField('int_domain') and (
      feature.int_domain.is_categorical):
    domain = feature.int_domain
    if domain.HasField('max') and domain.min >= -1 and domain.max < 1 << 20:
      return Categorical(num_buckets=int(domain.max) + 1)
    return Categorical()
  return Numeric()
