"""Wide-and-deep specs: a linear model and a DNN summed, as tf.estimator's
DNNLinearCombinedClassifier and DNNLinearCombinedRegressor.

The wide (linear) part reads `linear_feature_keys` one-hot and the feature
crosses; the deep part, a DNN on `dnn_feature_keys`. The head's output
layer reads both side by side, so its logits are the linear part's plus
the DNN's. One optimizer trains both (tf.estimator used FTRL for the
linear part and Adagrad for the DNN).
"""

from typing import List, Optional, Sequence

from generic_trainer.canned.base import CannedSpec
from generic_trainer.canned.base import concatenate
from generic_trainer.canned.columns import Categorical
from generic_trainer.canned.columns import Bucketized
from generic_trainer.canned.heads_from_data import ClassifierHead
from generic_trainer.canned.heads_from_data import RegressorHead
from generic_trainer.canned.linear import cross_parts


class DNNLinearCombinedSpec(CannedSpec):
  """Wide and deep with the head you give (`head = ...`).

  Attributes:
    linear_feature_keys: Features of the linear part; None for every
      categorical and bucketized feature.
    dnn_feature_keys: Features of the DNN; None for every feature.
    crosses: Feature crosses (`Crossed`) of the linear part.
    dnn_hidden_units, dnn_activation, dnn_dropout, dnn_batch_norm: The
      DNN's layers, as DNNSpec's hidden_units, activation, dropout and
      batch_norm.
  """

  linear_feature_keys: Optional[List[str]] = None
  dnn_feature_keys: Optional[List[str]] = None
  crosses: Sequence = ()
  dnn_hidden_units: Sequence[int] = (64, 32)
  dnn_activation: str = 'relu'
  dnn_dropout: Optional[float] = None
  dnn_batch_norm: bool = False

  def build_body(self, encoded):
    linear_keys = self.linear_feature_keys
    if linear_keys is None:
      linear_keys = [k for k, c in self.feature_columns.items()
                     if isinstance(c, (Categorical, Bucketized))]
    wide = self.parts(encoded, linear_keys, 'wide',
                      'linear_feature_keys') + cross_parts(self, encoded)
    deep = self.tower(self.parts(encoded, self.dnn_feature_keys, 'deep',
                                 'dnn_feature_keys'),
                      list(self.dnn_hidden_units), self.dnn_activation,
                      self.dnn_dropout, self.dnn_batch_norm, 'dnn')
    if not wide:
      return deep
    return concatenate([concatenate(wide, 'linear_inputs'), deep],
                       'wide_and_deep')


class DNNLinearCombinedClassifierSpec(ClassifierHead, DNNLinearCombinedSpec):
  """Wide-and-deep classifier; the classes from n_classes,
  label_vocabulary or the data."""


class DNNLinearCombinedRegressorSpec(RegressorHead, DNNLinearCombinedSpec):
  """Wide-and-deep regressor."""
