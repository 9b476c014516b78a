"""`Head`: what follows a model's last hidden layer, written once.

The idea is the Estimators paper's (TensorFlow Estimators, KDD 2017, section
3.2: "Head API"): the output layer, the loss, the metrics, the predictions
and the export signatures of a kind of problem belong together, so a model
is its body plus a head. A TrainSpec declares `head = MultiClassHead(...)`
and its `build_model()` returns the body (the last hidden layer); the spec
gets the head's output layer, loss and metrics, and the export gets the
head's predictions and signatures (`classification` or `regression` in TF
Serving's Classify and Regress shapes, and `predict`).

Subclasses say what differs: the logits' width, the activation, the loss,
the metrics, how labels become what the loss takes, and the predictions.
Nothing here imports TensorFlow or Keras at import time.
"""

from typing import Any, Dict, List, Optional

from generic_trainer.errors import SpecError
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import np
from generic_trainer.system.lazy import tf

# TF Serving's Classify and Regress signatures: their names and tensor keys
# (`tf.saved_model.CLASSIFY_*`, `REGRESS_*`), written out so that importing
# this module stays cheap.
CLASSIFICATION = 'classification'
REGRESSION = 'regression'
PREDICT = 'predict'
CLASSIFY_INPUTS = 'inputs'
CLASSIFY_CLASSES = 'classes'
CLASSIFY_SCORES = 'scores'
REGRESS_INPUTS = 'inputs'
REGRESS_OUTPUTS = 'outputs'


def logits_layer_name(output_name: str) -> str:
  """The name of the Dense layer whose output is an output's logits."""
  return f'{output_name}_logits'


class Head:
  """Base class of the heads; see the module docstring.

  Attributes:
    weight_key: A feature holding each example's weight in the loss (and
      None for equal weights).
  """

  activation: str = 'linear'
  kind: str = 'head'

  def __init__(self, weight_key: Optional[str] = None):
    self.weight_key = weight_key

  @property
  def logits_dimension(self) -> int:
    """The width of the logits (output units)."""
    raise NotImplementedError

  def __repr__(self) -> str:
    return f'{type(self).__name__}({self._describe()})'

  def _describe(self) -> str:
    return f'weight_key={self.weight_key!r}' if self.weight_key else ''

  # The model.
  def output(self, hidden, name: str):
    """The output layer on `hidden` (a Keras tensor): a Dense layer of
    `logits_dimension` units named `<name>_logits`, then the activation,
    named `name`. Returns the output tensor (probabilities for classifiers)."""
    logits = keras.layers.Dense(self.logits_dimension,
                                name=logits_layer_name(name))(hidden)
    return keras.layers.Activation(self.activation, name=name)(logits)

  def build_loss(self):
    """The Keras loss, on the outputs (not the logits)."""
    raise NotImplementedError

  def build_metrics(self) -> List[Any]:
    """The Keras metrics (new objects at each call)."""
    raise NotImplementedError

  # The labels.
  def encode_labels(self, labels):
    """Labels as the loss takes them (a TensorFlow function, run in the
    input pipeline); the default makes them a dense [batch, 1] tensor."""
    return dense_labels(labels)

  def check_labels(self, labels, label_key: str) -> None:
    """Raises SpecError if the raw labels of a batch (numpy) cannot be
    learned by this head; the default accepts any."""

  # Serving.
  def predictions(self, logits, outputs) -> Dict[str, Any]:
    """The prediction dict of a batch (TensorFlow tensors), named as
    tf.estimator named them (`logits`, `probabilities`, `class_ids`...)."""
    raise NotImplementedError

  def signature_outputs(self, predictions: Dict[str, Any]
                        ) -> Dict[str, Dict[str, Any]]:
    """{signature kind: its outputs}, kinds among `classification` and
    `regression`, in TF Serving's shapes."""
    raise NotImplementedError


def dense_labels(labels):
  """A label tensor as [batch, 1]: a sparse one (an optional feature) with
  0 or '' where it is missing, a [batch] one expanded."""
  if isinstance(labels, tf.sparse.SparseTensor):
    default = '' if labels.dtype == tf.string else tf.cast(0, labels.dtype)
    labels = tf.sparse.to_dense(tf.sparse.reset_shape(
        labels, [labels.dense_shape[0], 1]), default)
  elif isinstance(labels, tf.RaggedTensor):
    labels = labels.to_tensor(shape=[None, 1])
  if labels.shape.rank == 1:
    labels = tf.expand_dims(labels, -1)
  return labels


def check_vocabulary(vocabulary, what: str) -> List[str]:
  """`vocabulary` as a list of distinct strings, or SpecError."""
  if vocabulary is None:
    return None
  if isinstance(vocabulary, (str, bytes)) or not all(
      isinstance(v, str) for v in vocabulary):
    raise SpecError(
        f'{what} must be a list of strings, the class names in class id '
        f'order. Received: label_vocabulary={vocabulary!r}. Pass e.g. '
        "label_vocabulary=['Adelie', 'Chinstrap', 'Gentoo'].")
  vocabulary = list(vocabulary)
  repeated = sorted({v for v in vocabulary if vocabulary.count(v) > 1})
  if repeated:
    raise SpecError(
        f'{what} names {repeated} more than once; each class needs one name. '
        f'Received: label_vocabulary={vocabulary!r}. Remove the repeats.')
  return vocabulary


def check_unknown_labels(values, vocabulary: List[str], label_key: str,
                         head_name: str) -> None:
  """Raises SpecError naming the label values not in `vocabulary`."""
  seen = {v.decode() if isinstance(v, bytes) else str(v)
          for v in np.asarray(values).ravel()}
  unknown = sorted(seen - set(vocabulary))
  if unknown:
    raise SpecError(
        f'The label {label_key!r} has the value(s) {unknown[:10]}, which '
        f'are not in the label vocabulary {vocabulary} of the '
        f'{head_name}. Add them to label_vocabulary (in class id order), or '
        'leave label_vocabulary unset in a canned spec to read the classes '
        f'from the data. Expected values of {vocabulary}. Received: '
        f'{unknown[:10]}.')
