"""Linear specs: one weight per feature value, as tf.estimator's
LinearClassifier and LinearRegressor.

The body is the features' linear-part encodings side by side (numbers
normalised, categories and buckets one-hot, feature crosses hashed
one-hot); the head's output layer makes it a linear model.
"""

from typing import List, Sequence

from generic_trainer.canned.base import CannedSpec
from generic_trainer.canned.base import concatenate
from generic_trainer.canned.heads_from_data import ClassifierHead
from generic_trainer.canned.heads_from_data import RegressorHead
from generic_trainer.canned.columns import Crossed
from generic_trainer.errors import SpecError


class LinearSpec(CannedSpec):
  """A linear model with the head you give (`head = ...`).

  Attributes:
    crosses: Feature crosses (`Crossed(('a', 'b'), num_bins=...)`) added to
      the features.
  """

  crosses: Sequence = ()

  def build_body(self, encoded):
    return concatenate(self.parts(encoded, None, 'wide') +
                       cross_parts(self, encoded), 'linear_inputs')


class LinearClassifierSpec(ClassifierHead, LinearSpec):
  """Linear classifier; the classes from n_classes, label_vocabulary or the
  data."""


class LinearRegressorSpec(RegressorHead, LinearSpec):
  """Linear regressor."""


def cross_parts(spec, encoded) -> List:
  """The one-hot feature crosses of `spec.crosses`."""
  parts = []
  for cross in spec.crosses:
    if not isinstance(cross, Crossed):
      raise SpecError(
          f'{type(spec).__name__}.crosses holds Crossed((key, key, ...), '
          f'num_bins=...) values. Expected Crossed(...) items. Received: '
          f'{cross!r}. Wrap each cross in Crossed((key, key), num_bins=...).')
    spec._check_known('crosses', list(cross.keys), list(encoded))  # pylint: disable=protected-access
    parts.append(cross.encode(encoded))
  return parts
