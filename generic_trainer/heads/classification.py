"""Heads for one label that is one class: binary and multi-class.

Labels are class ids (ints in [0, n_classes)) or, with `label_vocabulary`,
class names ('Adelie', 'Chinstrap', ...), which the input pipeline maps to
their index in the vocabulary. Exported class names are the vocabulary, or
the ids as strings ('0', '1', ...), as tf.estimator exported them.
"""

from typing import Any, Dict, List, Optional, Sequence

from generic_trainer.errors import SpecError
from generic_trainer.heads.head import CLASSIFICATION
from generic_trainer.heads.head import CLASSIFY_CLASSES
from generic_trainer.heads.head import CLASSIFY_SCORES
from generic_trainer.heads.head import Head
from generic_trainer.heads.head import REGRESS_OUTPUTS
from generic_trainer.heads.head import REGRESSION
from generic_trainer.heads.head import check_unknown_labels
from generic_trainer.heads.head import check_vocabulary
from generic_trainer.heads.head import dense_labels
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import np
from generic_trainer.system.lazy import tf


class _ClassHead(Head):
  """What binary and multi-class heads share: classes and their names."""

  kind = 'classification'

  def __init__(self, n_classes: Optional[int],
               label_vocabulary: Optional[Sequence[str]],
               weight_key: Optional[str]):
    super().__init__(weight_key)
    name = type(self).__name__
    self.label_vocabulary = check_vocabulary(label_vocabulary,
                                             f'{name} label_vocabulary')
    if n_classes is None and self.label_vocabulary is not None:
      n_classes = len(self.label_vocabulary)
    if (not isinstance(n_classes, int) or isinstance(n_classes, bool) or
        n_classes < 2):
      raise SpecError(
          f'{name} needs n_classes, an int of at least 2, or a '
          'label_vocabulary of the class names. Received: '
          f'n_classes={n_classes!r}, label_vocabulary={label_vocabulary!r}. '
          'Pass n_classes=N (N >= 2), or label_vocabulary=[...].')
    if (self.label_vocabulary is not None and
        len(self.label_vocabulary) != n_classes):
      raise SpecError(
          f'{name} has n_classes={n_classes} but a label_vocabulary of '
          f'{len(self.label_vocabulary)} names: {self.label_vocabulary}. '
          'Give one name per class, or leave n_classes unset. Expected '
          f'{n_classes} names. Received: {len(self.label_vocabulary)}.')
    self.n_classes = n_classes

  def _describe(self) -> str:
    parts = [f'n_classes={self.n_classes}']
    if self.label_vocabulary:
      parts.append(f'label_vocabulary={self.label_vocabulary!r}')
    if self.weight_key:
      parts.append(f'weight_key={self.weight_key!r}')
    return ', '.join(parts)

  @property
  def class_names(self) -> List[str]:
    """The exported name of each class id."""
    return self.label_vocabulary or [str(i) for i in range(self.n_classes)]

  def encode_labels(self, labels):
    """Class ids, [batch, 1] int64; names looked up in the vocabulary (an
    unknown name stops the input pipeline with a message naming it)."""
    labels = dense_labels(labels)
    if self.label_vocabulary is None:
      return tf.cast(labels, tf.int64)
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(self.label_vocabulary),
            tf.range(len(self.label_vocabulary), dtype=tf.int64)), -1)
    ids = table.lookup(labels)
    with tf.control_dependencies([tf.debugging.assert_non_negative(
        ids, message=f'A label value is not in the label vocabulary '
        f'{self.label_vocabulary} of the {type(self).__name__}; add it to '
        'label_vocabulary.')]):
      return tf.identity(ids)

  def check_labels(self, labels, label_key: str) -> None:
    values = np.asarray(labels)
    head = type(self).__name__
    if self.label_vocabulary is not None:
      if values.dtype.kind not in ('S', 'U', 'O'):
        raise SpecError(
            f'The label {label_key!r} holds numbers ({values.dtype}) but the '
            f'{head} has a label_vocabulary of names. Leave label_vocabulary '
            f'unset for class ids 0..{self.n_classes - 1}. Expected class '
            f'names. Received: numbers such as {_first(values)!r}.')
      check_unknown_labels(values, self.label_vocabulary, label_key, head)
      return
    if values.dtype.kind in ('S', 'U', 'O'):
      raise SpecError(
          f'The label {label_key!r} holds strings (e.g. '
          f'{_first(values)!r}), which the {head} reads only with a '
          'label_vocabulary: label_vocabulary=[...] lists the class names, '
          'in class id order. Expected class ids 0..n_classes-1, or a '
          f'label_vocabulary. Received: strings such as {_first(values)!r}. '
          'Give label_vocabulary=[...] to the head.')
    outside = sorted({int(v) for v in values.ravel()
                      if not 0 <= v < self.n_classes})
    if outside:
      raise SpecError(
          f'The label {label_key!r} has the value(s) {outside[:10]}, outside '
          f'the class ids 0..{self.n_classes - 1} of the {head} '
          f'(n_classes={self.n_classes}). Raise n_classes, or map the labels '
          f'to 0..n_classes-1. Expected ids 0..{self.n_classes - 1}. '
          f'Received: {outside[:10]}.')

  def predictions(self, logits, outputs) -> Dict[str, Any]:
    probabilities, class_ids, extra = self._probabilities_and_ids(outputs)
    return {**self._class_predictions(logits, probabilities, class_ids),
            **extra}

  def _probabilities_and_ids(self, outputs):
    """(probabilities, class ids, other predictions) of `outputs`."""
    raise NotImplementedError

  def _class_predictions(self, logits, probabilities, class_ids):
    names = tf.constant(self.class_names)
    batch = tf.shape(probabilities)[0]
    return {
        'logits': logits,
        'probabilities': probabilities,
        'class_ids': class_ids,
        'classes': tf.gather(names, class_ids),
        'all_class_ids': tf.tile(tf.range(self.n_classes)[None], [batch, 1]),
        'all_classes': tf.tile(names[None], [batch, 1]),
    }


class BinaryClassHead(_ClassHead):
  """Two classes: one logit, a sigmoid, binary cross-entropy.

  Args:
    label_vocabulary: The two class names, negative first (labels are then
      strings); None for 0/1 labels.
    weight_key: A feature weighting each example in the loss.
    threshold: The probability above which an example is class 1.

  Metrics: accuracy, auc, auc_precision_recall, precision, recall.
  Predictions: logits, logistic, probabilities, class_ids, classes,
  all_class_ids, all_classes. Signatures: `classification` (classes and
  scores of both classes) and `regression` (the probability of class 1).
  """

  activation = 'sigmoid'

  def __init__(self, label_vocabulary: Optional[Sequence[str]] = None,
               weight_key: Optional[str] = None, threshold: float = 0.5):
    super().__init__(2, label_vocabulary, weight_key)
    if not 0 < threshold < 1:
      raise SpecError('BinaryClassHead threshold must be between 0 and 1. '
                      f'Received: threshold={threshold!r}. Pass a '
                      'threshold such as 0.5.')
    self.threshold = threshold

  @property
  def logits_dimension(self) -> int:
    return 1

  def build_loss(self):
    return keras.losses.BinaryCrossentropy()

  def build_metrics(self) -> List[Any]:
    return [keras.metrics.BinaryAccuracy(name='accuracy',
                                         threshold=self.threshold),
            keras.metrics.AUC(name='auc'),
            keras.metrics.AUC(curve='PR', name='auc_precision_recall'),
            keras.metrics.Precision(name='precision',
                                    thresholds=self.threshold),
            keras.metrics.Recall(name='recall', thresholds=self.threshold)]

  def _probabilities_and_ids(self, outputs):
    return (tf.concat([1 - outputs, outputs], axis=1),
            tf.cast(outputs > self.threshold, tf.int64),
            {'logistic': outputs})

  def signature_outputs(self, predictions):
    return {CLASSIFICATION: {CLASSIFY_CLASSES: predictions['all_classes'],
                             CLASSIFY_SCORES: predictions['probabilities']},
            REGRESSION: {REGRESS_OUTPUTS: predictions['logistic']}}


class MultiClassHead(_ClassHead):
  """One of n classes: n logits, a softmax, sparse categorical cross-entropy.

  Args:
    n_classes: The number of classes; may be left out with a
      label_vocabulary.
    label_vocabulary: The class names, in class id order (labels are then
      strings); None for labels 0..n_classes-1.
    weight_key: A feature weighting each example in the loss.

  Metrics: accuracy. Predictions: logits, probabilities, class_ids,
  classes, all_class_ids, all_classes. Signature: `classification`.
  """

  activation = 'softmax'

  def __init__(self, n_classes: Optional[int] = None,
               label_vocabulary: Optional[Sequence[str]] = None,
               weight_key: Optional[str] = None):
    super().__init__(n_classes, label_vocabulary, weight_key)

  @property
  def logits_dimension(self) -> int:
    return self.n_classes

  def build_loss(self):
    return keras.losses.SparseCategoricalCrossentropy()

  def build_metrics(self) -> List[Any]:
    return [keras.metrics.SparseCategoricalAccuracy(name='accuracy')]

  def _probabilities_and_ids(self, outputs):
    return (outputs, tf.argmax(outputs, axis=1, output_type=tf.int64)[:, None],
            {})

  def signature_outputs(self, predictions):
    return {CLASSIFICATION: {CLASSIFY_CLASSES: predictions['all_classes'],
                             CLASSIFY_SCORES: predictions['probabilities']}}


def _first(values):
  value = values.ravel()[0]
  return value.decode() if isinstance(value, bytes) else value
