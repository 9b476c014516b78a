"""DNN specs: a feed-forward network, as tf.estimator's DNNClassifier and
DNNRegressor.

The body is Dense layers of `hidden_units` on the features' DNN-part
encodings (numbers normalised, categories embedded, buckets one-hot).
"""

from typing import Optional, Sequence

from generic_trainer.canned.base import CannedSpec
from generic_trainer.canned.heads_from_data import ClassifierHead
from generic_trainer.canned.heads_from_data import RegressorHead


class DNNSpec(CannedSpec):
  """A DNN with the head you give (`head = ...`).

  Attributes:
    hidden_units: Units of each hidden layer, first to last.
    activation: Their activation.
    dropout: The dropout rate after each hidden layer (None: none).
    batch_norm: Batch normalisation after each hidden layer.
  """

  hidden_units: Sequence[int] = (64, 32)
  activation: str = 'relu'
  dropout: Optional[float] = None
  batch_norm: bool = False

  def build_body(self, encoded):
    return self.tower(self.parts(encoded, None, 'deep'),
                      list(self.hidden_units), self.activation, self.dropout,
                      self.batch_norm, 'dnn')


class DNNClassifierSpec(ClassifierHead, DNNSpec):
  """DNN classifier; the classes from n_classes, label_vocabulary or the
  data. A whole module can be:

      class Spec(DNNClassifierSpec):
        label_key = 'species'
        hidden_units = [16, 8]
  """


class DNNRegressorSpec(RegressorHead, DNNSpec):
  """DNN regressor."""
