"""`RegressionHead`: one or more real numbers per example.

Also the one check of a regression label read as text that looks like
numbers (`'$647.5'`, `'1,200'`, `'12%'`): a CSV column of prices with a
currency sign is text to every CSV reader, and such a label reaches a loss
or a head as strings. `numbers_as_text` tells it from class names, and
`numbers_as_text_error` says how to write the column as numbers; the
head's check and the loss's (`loop.label_checks`) both raise it.
"""

import re
from typing import Any, Dict, List, Optional, Sequence, Set

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
    texts = [_text(v) for v in values.ravel()] if values.dtype.kind in (
        'S', 'U', 'O') else []
    marks = numbers_as_text(texts)
    if marks is not None:
      raise numbers_as_text_error(label_key, texts, marks, 'a RegressionHead')
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


# Signs a number is written with, in text a CSV reader keeps as text.
_CURRENCY = '$€£¥₹'
_PERCENT = '%'
_THOUSANDS = re.compile(r'[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?')
_PLAIN = re.compile(r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?')
_SHOWN = 3


def _text(value) -> str:
  return value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(
      value)


def _marks_of(text: str) -> Optional[Set[str]]:
  """The signs `text` writes a number with ('$', ',', '%'; none for a
  number merely quoted), or None when it is not a number so written."""
  rest, marks = text.strip(), set()
  for sign in _CURRENCY + _PERCENT:
    if sign in rest:
      marks.add(sign)
      rest = rest.replace(sign, '')
  rest = rest.replace(' ', '')
  if _THOUSANDS.fullmatch(rest):  # '1,200'; a decimal comma ('1,2') is not.
    marks.add(',')
    rest = rest.replace(',', '')
  return marks if _PLAIN.fullmatch(rest) else None


def numbers_as_text(texts: Sequence[str]) -> Optional[Set[str]]:
  """The signs every non-empty one of `texts` writes a number with (an
  empty set: numbers merely quoted), or None when one of them is not a
  number (a class name, say) or there are none."""
  found = set()
  seen = False
  for text in texts:
    if not text.strip():
      continue
    marks = _marks_of(text)
    if marks is None:
      return None
    found |= marks
    seen = True
  return found if seen else None


def numbers_as_text_error(label_key: str, texts: Sequence[str],
                          marks: Set[str], taker: str) -> SpecError:
  """The error for a label of numbers written as text (`numbers_as_text`
  gave `marks`), which `taker` (a loss, a head) cannot learn."""
  shown = sorted({t for t in texts if t.strip()})
  listed = ', '.join(repr(t) for t in shown[:_SHOWN]) + (
      ', ...' if len(shown) > _SHOWN else '')
  words = []
  currency = ''.join(sorted(marks & set(_CURRENCY)))
  if currency:
    words.append(f'a currency sign ({", ".join(map(repr, currency))})')
  if ',' in marks:
    words.append("thousands separators (',')")
  if _PERCENT in marks:
    words.append("a percent sign ('%')")
  how = ('written with ' + ' and '.join(words)) if words else (
      'stored as text (quoted, or in a bytes_list)')
  number = float(re.sub(r'[^\d.eE+-]', '', shown[0]) or 0)
  signs = ''.join(sorted(marks))
  strip = (f".str.replace(r'[{signs}]', '', regex=True)" if marks else '')
  return SpecError(
      f'The label column {label_key!r} holds text that looks like numbers '
      f'{how} ({listed}), not numbers: a CSV reader keeps such a column as '
      f'text, and {taker} takes numbers for a regression. Expected numbers '
      f'in {label_key!r} (such as {number:g}). Received: strings '
      f'({listed}). Remove the '
      + ('signs' if marks else 'quotes') +
      ' and write the column as plain numbers in the data, then train on '
      f'it: with pandas, df[{label_key!r}] = df[{label_key!r}]{strip}'
      ".astype(float); df.to_csv('clean.csv', index=False) (data from "
      'another producer: parse the text with float() before writing the '
      'tf.Example). Treating each amount as a class would not predict an '
      'amount it has not seen.')
