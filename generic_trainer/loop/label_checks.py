"""A label's kind against what the loss or head takes, before training.

Keras's losses take numbers: class indices for SparseCategoricalCrossentropy,
0/1 for BinaryCrossentropy, any number for a regression loss. A column of
class names ('Adelie') read as the label of a spec without a head reaches
the loss as strings, and fails deep inside (`invalid literal for int()`, or
TensorFlow's cast errors) without naming the column or the way out: a
vocabulary that maps the names to indices. A column of amounts written
with a currency sign ('$647.5') is text too, but for a regression loss it
is numbers to parse, not classes: `heads.regression` tells the two apart
and says how. A head brings its own check (`heads.*.check_labels`).
"""

import numpy as np

from generic_trainer.errors import SpecError
from generic_trainer.heads import regression

_SHOWN = 3


def check_kind(label_key: str, labels, loss, units) -> None:
  """The labels of `label_key` (as read, one batch) fit `loss`.

  Args:
    label_key: The label column.
    labels: Its values in a batch (a tensor or array).
    loss: The spec's loss (an object, a class, a function or a name).
    units: The model's output units for this label, or None.

  Raises:
    SpecError: strings for any loss (saying how to map them to indices), or
      fractions for a loss that takes class indices.
  """
  values = np.asarray(getattr(labels, 'numpy', lambda: labels)())
  name = _loss_name(loss)
  if values.dtype.kind in ('S', 'U', 'O'):
    texts = [_text(v) for v in values.ravel()]
    marks = regression.numbers_as_text(texts)
    if marks is not None and not _takes_indices(loss):
      raise regression.numbers_as_text_error(label_key, texts, marks,
                                             f'the loss {name}')
    shown = sorted(set(texts))
    classes = ', '.join(repr(v) for v in shown[:_SHOWN]) + (
        ', ...' if len(shown) > _SHOWN else '')
    raise SpecError(
        f'The label column {label_key!r} holds names ({classes}), but the '
        f'loss {name} takes numbers: class indices 0..N-1 for a classifier'
        '. Expected class indices (0, 1, 2...) or a vocabulary that maps the '
        f'names to them. Received: strings in {label_key!r} ({classes}). '
        'Map the names to indices: declare a head with the vocabulary '
        f"(head = heads.MultiClassHead(label_vocabulary={shown[:_SHOWN]!r}"
        '), with build_model returning the body), use a canned spec '
        '(canned.DNNClassifierSpec reads the classes from the data), or '
        'write the indices into the data (a keras.layers.StringLookup in '
        'a Transform preprocessing_fn).')
  if _takes_indices(loss) and values.dtype.kind in ('i', 'u', 'f') and (
      values.size and float(values.min()) < 0):
    negative = sorted({float(v) for v in values.ravel() if v < 0})
    raise SpecError(
        f'The label column {label_key!r} holds negative values '
        f'({negative[:_SHOWN]}), but the loss {name} takes class indices '
        'from 0. Expected whole numbers 0..N-1. Received: '
        f'{negative[0]:g}. Write the classes as 0..N-1 (e.g. -1/1 as 0/1), '
        'or use a loss for numbers.')
  if units and _takes_indices(loss) and values.dtype.kind == 'f':
    fractions = sorted({float(v) for v in values.ravel()
                        if not float(v).is_integer()})
    if fractions:
      raise SpecError(
          f'The label column {label_key!r} holds fractions '
          f'({fractions[:_SHOWN]}), but the loss {name} takes class indices. '
          'Expected whole numbers 0..N-1 for a classifier. Received: '
          f'floats such as {fractions[0]!r}. Use a regression loss (e.g. '
          'keras.losses.MeanSquaredError with one output unit) for a number '
          'to predict, or write class indices into the label column.')


def _takes_indices(loss) -> bool:
  name = _loss_name(loss)
  return 'SparseCategorical' in name or 'sparse_categorical' in name


def _loss_name(loss) -> str:
  if isinstance(loss, str):
    return loss
  if isinstance(loss, type):
    return loss.__name__
  return type(loss).__name__ if not callable(loss) or hasattr(
      loss, 'get_config') else getattr(loss, '__name__', type(loss).__name__)


def _text(value) -> str:
  return value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(
      value)
