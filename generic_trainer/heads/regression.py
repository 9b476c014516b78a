"""`RegressionHead`: one or more real numbers per example."""

from typing import Any, Dict, List, Optional

from generic_trainer.errors import SpecError
from generic_trainer.heads.head import Head
from generic_trainer.heads.head import REGRESS_OUTPUTS
from generic_trainer.heads.head import REGRESSION
from generic_trainer.heads.head import dense_labels
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import np
from generic_trainer.system.lazy import tf


class RegressionHead(Head):
  """`label_dimension` numbers: linear outputs, mean squared error.

  Args:
    label_dimension: How many numbers the label holds (its width).
    weight_key: A feature weighting each example in the loss.

  Metrics: mean_absolute_error, root_mean_squared_error. Predictions:
  predictions. Signature: `regression` (when label_dimension is 1, as TF
  Serving's Regress takes one number per example).
  """

  kind = 'regression'

  def __init__(self, label_dimension: int = 1,
               weight_key: Optional[str] = None):
    super().__init__(weight_key)
    if (not isinstance(label_dimension, int) or
        isinstance(label_dimension, bool) or label_dimension < 1):
      raise SpecError('RegressionHead label_dimension must be a positive '
                      f'int. Received: label_dimension={label_dimension!r}. '
                      'Set the number of values per label (1 for one).')
    self.label_dimension = label_dimension

  def _describe(self) -> str:
    return f'label_dimension={self.label_dimension}' + (
        f', weight_key={self.weight_key!r}' if self.weight_key else '')

  @property
  def logits_dimension(self) -> int:
    return self.label_dimension

  def build_loss(self):
    return keras.losses.MeanSquaredError()

  def build_metrics(self) -> List[Any]:
    return [keras.metrics.MeanAbsoluteError(name='mean_absolute_error'),
            keras.metrics.RootMeanSquaredError(name='root_mean_squared_error')]

  def encode_labels(self, labels):
    return tf.cast(dense_labels(labels), tf.float32)

  def check_labels(self, labels, label_key: str) -> None:
    values = np.asarray(labels)
    if values.dtype.kind not in ('i', 'u', 'f'):
      raise SpecError(
          f'The label {label_key!r} holds {values.dtype} values, which a '
          'RegressionHead cannot learn: it needs numbers. Received: '
          f'{values.dtype} values. Use BinaryClassHead or MultiClassHead for '
          'classes, or cast the label to a number.')
    width = values.shape[-1] if values.ndim > 1 else 1
    if width != self.label_dimension:
      raise SpecError(
          f'The label {label_key!r} holds {width} number(s) per example but '
          f'the RegressionHead has label_dimension={self.label_dimension}. '
          f'Set label_dimension={width}. Expected {self.label_dimension}. '
          f'Received: {width}.')

  def predictions(self, logits, outputs) -> Dict[str, Any]:
    return {'predictions': outputs}

  def signature_outputs(self, predictions):
    if self.label_dimension != 1:
      return {}
    return {REGRESSION: {REGRESS_OUTPUTS: predictions['predictions']}}
