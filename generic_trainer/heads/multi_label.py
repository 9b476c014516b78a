"""`MultiLabelHead`: any number of n classes per example (tags, topics)."""

from typing import Any, Dict, List, Optional, Sequence

from generic_trainer.errors import SpecError
from generic_trainer.heads.head import CLASSIFICATION
from generic_trainer.heads.head import CLASSIFY_CLASSES
from generic_trainer.heads.head import CLASSIFY_SCORES
from generic_trainer.heads.head import Head
from generic_trainer.heads.head import check_unknown_labels
from generic_trainer.heads.head import check_vocabulary
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import np
from generic_trainer.system.lazy import tf


class MultiLabelHead(Head):
  """n independent yes/no classes: n logits, sigmoids, binary cross-entropy.

  Labels are either multi-hot (a dense int feature of n_classes 0/1 values)
  or the list of an example's classes: class ids, or names with a
  `label_vocabulary` (a variable-length feature).

  Args:
    n_classes: The number of classes; may be left out with a
      label_vocabulary.
    label_vocabulary: The class names, in class id order.
    weight_key: A feature weighting each example in the loss.
    threshold: The probability above which a class is predicted.

  Metrics: accuracy (per class, averaged), auc (per class, averaged),
  auc_precision_recall. Predictions: logits, probabilities, all_class_ids,
  all_classes. Signature: `classification`.
  """

  activation = 'sigmoid'
  kind = 'classification'

  def __init__(self, n_classes: Optional[int] = None,
               label_vocabulary: Optional[Sequence[str]] = None,
               weight_key: Optional[str] = None, threshold: float = 0.5):
    super().__init__(weight_key)
    self.label_vocabulary = check_vocabulary(
        label_vocabulary, 'MultiLabelHead label_vocabulary')
    if n_classes is None and self.label_vocabulary is not None:
      n_classes = len(self.label_vocabulary)
    if (not isinstance(n_classes, int) or isinstance(n_classes, bool) or
        n_classes < 2 or (self.label_vocabulary is not None and
                          len(self.label_vocabulary) != n_classes)):
      raise SpecError(
          'MultiLabelHead needs n_classes, an int of at least 2, or a '
          'label_vocabulary of that many class names (or both, agreeing). '
          f'Received: n_classes={n_classes!r}, '
          f'label_vocabulary={label_vocabulary!r}. Pass n_classes=N, or '
          'label_vocabulary=[...].')
    self.n_classes = n_classes
    self.threshold = threshold

  def _describe(self) -> str:
    return f'n_classes={self.n_classes}' + (
        f', label_vocabulary={self.label_vocabulary!r}'
        if self.label_vocabulary else '')

  @property
  def logits_dimension(self) -> int:
    return self.n_classes

  @property
  def class_names(self) -> List[str]:
    return self.label_vocabulary or [str(i) for i in range(self.n_classes)]

  def build_loss(self):
    return keras.losses.BinaryCrossentropy()

  def build_metrics(self) -> List[Any]:
    return [keras.metrics.BinaryAccuracy(name='accuracy',
                                         threshold=self.threshold),
            keras.metrics.AUC(name='auc', multi_label=True,
                              num_labels=self.n_classes),
            keras.metrics.AUC(name='auc_precision_recall', curve='PR',
                              multi_label=True, num_labels=self.n_classes)]

  def _is_multi_hot(self, labels) -> bool:
    return (isinstance(labels, tf.Tensor) and labels.dtype != tf.string and
            labels.shape.rank == 2 and labels.shape[-1] == self.n_classes)

  def encode_labels(self, labels):
    """Multi-hot [batch, n_classes] float32 labels."""
    if self._is_multi_hot(labels):
      return tf.cast(labels, tf.float32)
    if isinstance(labels, tf.RaggedTensor):
      labels = labels.to_sparse()
    if isinstance(labels, tf.sparse.SparseTensor):
      labels = tf.sparse.to_dense(
          labels, '' if labels.dtype == tf.string else tf.cast(-1, labels.dtype))
    if labels.dtype == tf.string:
      if self.label_vocabulary is None:
        raise SpecError('MultiLabelHead reads class names only with a '
                        'label_vocabulary. Expected class ids, or a '
                        'label_vocabulary. Received: class names. Give '
                        'label_vocabulary=[...], the class names in order.')
      table = tf.lookup.StaticHashTable(
          tf.lookup.KeyValueTensorInitializer(
              tf.constant(self.label_vocabulary),
              tf.range(len(self.label_vocabulary), dtype=tf.int64)), -1)
      labels = table.lookup(labels)
    if labels.shape.rank == 1:
      labels = labels[:, None]
    # -1 (padding, an empty name) sets no class.
    return tf.reduce_max(tf.one_hot(labels, self.n_classes), axis=1)

  def check_labels(self, labels, label_key: str) -> None:
    multi_hot = self._is_multi_hot(labels)
    if isinstance(labels, tf.RaggedTensor):
      labels = labels.flat_values
    if isinstance(labels, tf.sparse.SparseTensor):
      labels = labels.values
    values = np.asarray(labels)
    if values.dtype.kind in ('S', 'U', 'O'):
      if self.label_vocabulary is None:
        raise SpecError(
            f'The label {label_key!r} holds class names, which the '
            'MultiLabelHead reads only with a label_vocabulary: '
            'label_vocabulary=[...] lists them in class id order. Expected '
            'class ids. Received: class names. Give label_vocabulary=[...] '
            'to the head.')
      check_unknown_labels([v for v in values.ravel() if v],
                           self.label_vocabulary, label_key, 'MultiLabelHead')
      return
    allowed = (0, 1) if multi_hot else range(self.n_classes)
    outside = sorted({int(v) for v in values.ravel() if int(v) not in allowed})
    if outside:
      what = ('multi-hot values 0/1' if multi_hot else
              f'class ids 0..{self.n_classes - 1}')
      raise SpecError(
          f'The label {label_key!r} has the value(s) {outside[:10]}, which '
          f'are not {what} of the MultiLabelHead '
          f'(n_classes={self.n_classes}). A dense label of n_classes values '
          'is read as multi-hot; any other as lists of class ids. Expected '
          f'{what}. Received: {outside[:10]}. Fix the labels, or raise '
          'n_classes.')

  def predictions(self, logits, outputs) -> Dict[str, Any]:
    batch = tf.shape(outputs)[0]
    return {
        'logits': logits,
        'probabilities': outputs,
        'all_class_ids': tf.tile(tf.range(self.n_classes)[None], [batch, 1]),
        'all_classes': tf.tile(tf.constant(self.class_names)[None],
                               [batch, 1]),
    }

  def signature_outputs(self, predictions):
    return {CLASSIFICATION: {CLASSIFY_CLASSES: predictions['all_classes'],
                             CLASSIFY_SCORES: predictions['probabilities']}}
