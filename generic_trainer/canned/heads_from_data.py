"""The heads of the canned classifiers and regressors, from their
attributes and, for what they leave out, from the data.

A classifier's classes come from `label_vocabulary` or `n_classes` when
given; otherwise from the data: the label's values in the schema's domain,
the statistics, or the sample (names sorted, for string labels; ids
0..max for int labels). Two classes make a BinaryClassHead, more a
MultiClassHead, as tf.estimator's canned classifiers chose.
"""

import functools
from typing import List, Optional, Sequence

from generic_trainer.canned import data_summary
from generic_trainer.data import feature_names
from generic_trainer.errors import SpecError
from generic_trainer.heads.classification import BinaryClassHead
from generic_trainer.heads.classification import MultiClassHead
from generic_trainer.heads.regression import RegressionHead


class ClassifierHead:
  """Mixin of the canned classifiers: `head` from the attributes below.

  Attributes:
    n_classes: The number of classes; None to read it from the data.
    label_vocabulary: The class names in class id order, for string labels;
      None to read them from the data (sorted).
    weight_key: A feature weighting each example (TrainSpec's).
  """

  n_classes: Optional[int] = None
  label_vocabulary: Optional[Sequence[str]] = None

  @functools.cached_property
  def head(self):
    vocabulary, n_classes = self.label_vocabulary, self.n_classes
    if vocabulary is None and n_classes is None:
      vocabulary, n_classes = classes_from_data(self, self.label_key)
    if (n_classes or len(vocabulary)) == 2:
      return BinaryClassHead(label_vocabulary=vocabulary,
                             weight_key=self.weight_key)
    return MultiClassHead(n_classes=n_classes, label_vocabulary=vocabulary,
                          weight_key=self.weight_key)


class RegressorHead:
  """Mixin of the canned regressors: a RegressionHead.

  Attributes:
    label_dimension: How many numbers the label holds.
  """

  label_dimension: int = 1

  @functools.cached_property
  def head(self):
    return RegressionHead(label_dimension=self.label_dimension,
                          weight_key=self.weight_key)


def classes_from_data(spec, label_key: str):
  """(class names or None, number of classes) of the label in the data."""
  if not isinstance(label_key, str):
    raise SpecError(
        f'{type(spec).__name__} has one label. Expected label_key to be one '
        f'feature name (a str). Received: label_key={label_key!r}. Use a '
        "canned spec with a head per label (head = {'a': ..., 'b': ...}) "
        'for several labels.')
  features = {f.name: f for f in spec.schema.feature}
  if label_key not in features:
    raise SpecError(
        f'The label {label_key!r} (TrainSpec.label_key) is not a feature of '
        f'the data{feature_names.did_you_mean(label_key, features)}. '
        'Expected one of the schema\'s features: '
        f'{", ".join(features)}. Received: label_key={label_key!r}. Set '
        'label_key to '
        'one of them (the transformed name, with Transform).')
  feature = features[label_key]
  dtype = data_summary.dtype_of(feature)
  if dtype == 'string':
    names = _domain_values(spec.schema, feature)
    if not names:
      names = _summary(spec, label_key).vocabulary
    names = sorted(v for v in names if v)
    if len(names) < 2:
      raise SpecError(
          f'The label {label_key!r} has {len(names)} distinct value(s) '
          f'({names}) in the data; a classifier needs at least 2. Received: '
          f'{names}. Give '
          'label_vocabulary=[...] if the sample misses classes.')
    return names, len(names)
  if dtype == 'int':
    top = None
    if feature.HasField('int_domain') and feature.int_domain.HasField('max'):
      top = feature.int_domain.max
    if top is None:
      top = _summary(spec, label_key).max_value
    return None, max(2, int(top or 0) + 1)
  raise SpecError(
      f'The label {label_key!r} holds floats, which a classifier cannot take '
      'as classes. Use a regressor spec, or make the label an int class id '
      'or a string (with Transform, e.g. tf.cast(..., tf.int64)). Expected '
      'int class ids or strings. Received: a float feature.')


def _summary(spec, key: str):
  return data_summary.summarize(spec.fn_args, spec.schema,
                                {key: data_summary.CLASSES},
                                spec.sample_rows)[key]


def _domain_values(schema, feature) -> List[str]:
  if feature.HasField('string_domain'):
    return list(feature.string_domain.value)
  if feature.HasField('domain'):
    for domain in schema.string_domain:
      if domain.name == feature.domain:
        return list(domain.value)
  return []
