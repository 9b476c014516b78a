"""`CannedSpec`: a TrainSpec whose model is configured, not written.

It reads the features from the schema (after Transform, when there is a
Transform graph), gives each a column (`columns.default_column`, or the
spec's `columns = {...}`), learns what the columns need from the
statistics or a sample (`data_summary`), and builds the Keras inputs and
preprocessing layers; the subclasses (linear, DNN, DNN-linear combined)
say what the body does with them, and a head finishes the model.

Hyperparameters (`spec.hparams`, Tuner's best values) override the
attributes of the same name: `{'hidden_units': [32, 16], 'learning_rate':
0.003}` trains a DNN spec with those.
"""

import functools
from typing import Any, Dict, List, Optional

from generic_trainer.canned import column_report
from generic_trainer.canned import columns as columns_lib
from generic_trainer.canned import data_summary
from generic_trainer.data import feature_names
from generic_trainer.errors import SpecError
from generic_trainer.system import progress
from generic_trainer.trainspec.spec import TrainSpec
from generic_trainer.system.lazy import keras
from generic_trainer.system.lazy import tf


class CannedSpec(TrainSpec):
  """Base of the canned specs; see the module docstring.

  Attributes (all optional):
    feature_keys: The features to use; None for every feature of the
      schema but the labels and weights.
    columns: {feature: column} overriding the default column of a feature
      (`Numeric`, `Bucketized`, `Categorical`), or None to leave it out.
    optimizer_name: A Keras optimizer name ('adam', 'adagrad', 'ftrl',
      'sgd'...).
    learning_rate: Its learning rate.
    sample_rows: How many train rows to read for what the statistics do not
      give (means, vocabularies, bucket boundaries, classes).
    fills_missing_features: True: a feature missing from a row is filled
      with 0 or '' (`preprocess`), in a pipeline and on the command alike
      (`data.local_files.required_of`, the one rule of blanks).
  """

  columns: Dict[str, Any] = {}
  fills_missing_features = True
  optimizer_name = 'adam'
  learning_rate = 0.01
  sample_rows = 10000

  def __init__(self, fn_args=None, hparams: Optional[Dict[str, Any]] = None):
    super().__init__(fn_args, hparams)
    for name, value in self.hparams.items():
      if _is_setting(type(self), name):
        setattr(self, name, value)

  # What the data says.
  @functools.cached_property
  def schema(self):
    """The schema of the examples the model reads."""
    # Inside: `loop.datasets` imports TensorFlow at its top, and the canned
    # specs must import light (`from generic_trainer.canned import ...`).
    from generic_trainer.loop import datasets  # pylint: disable=g-import-not-at-top
    if self.fn_args is None:
      raise SpecError(
          f'{type(self).__name__} reads its features from the data, which it '
          'has not been given. Expected fn_args (the data, schema and '
          'statistics of a training). Received: fn_args=None. Train it with '
          'GenericTrainer, the generic-trainer command or the Estimator, '
          'which pass fn_args.')
    return datasets.load_schema(self.fn_args)

  @functools.cached_property
  def feature_columns(self) -> Dict[str, Any]:
    """{feature: column} of every feature the model reads."""
    # Inside: as in `schema` above, `loop.datasets` imports TensorFlow.
    from generic_trainer.loop import datasets  # pylint: disable=g-import-not-at-top
    names = [f.name for f in self.schema.feature]
    self._check_known('columns', list(self.columns), names)
    features = {f.name: f for f in self.schema.feature}
    chosen = {}
    for key in datasets.feature_keys(self, self.schema):
      column = (self.columns[key] if key in self.columns else
                columns_lib.default_column(features[key]))
      if column is None:
        continue
      if not isinstance(column, columns_lib.COLUMN_TYPES):
        raise SpecError(
            f'columns[{key!r}] must be Numeric(), Bucketized(...), '
            'Categorical(...) (from generic_trainer.canned) or None to leave '
            f'the feature out. Received: {column!r}. Wrap the feature in one '
            'of those column classes.')
      chosen[key] = column
    return chosen

  @functools.cached_property
  def summaries(self) -> Dict[str, data_summary.FeatureSummary]:
    """What the columns and the head learn from the data, by feature."""
    needs = {k: _need(c) for k, c in self.feature_columns.items()}
    return data_summary.summarize(self.fn_args, self.schema, needs,
                                  self.sample_rows)

  def _check_known(self, member: str, keys: List[str], names: List[str]):
    unknown = feature_names.lacking(keys, names)
    if unknown:
      after = ' (after Transform)' if self.fn_args.transform_graph_path else ''
      raise SpecError(
          f'{feature_names.lacks(f"{type(self).__name__}.{member} names", unknown, names, has="The schema has" + after)}'
          f' Expected names among those. Received: {member}={keys!r}. Fix '
          'the spelling, or remove the name.')

  # The model.
  def preprocess(self, features):
    """Every feature as a dense [batch, width] tensor: optional (sparse)
    features filled with 0 or '', [batch] tensors expanded."""
    dense = {}
    for key, value in features.items():
      if isinstance(value, tf.sparse.SparseTensor):
        default = '' if value.dtype == tf.string else tf.cast(0, value.dtype)
        value = tf.sparse.to_dense(tf.sparse.reset_shape(
            value, [value.dense_shape[0], 1]), default)
      elif isinstance(value, tf.RaggedTensor):
        value = value.to_tensor(shape=[None, 1])
      if value.shape.rank == 1:
        value = tf.expand_dims(value, -1)
      dense[key] = value
    return dense

  def build_model(self):
    """The body: inputs, their columns, and `build_body`'s hidden layer.

    Says first what it reads: a line per feature with its column, and a
    warning for a column that looks like an ID or dates
    (`column_report`).
    """
    features = {f.name: f for f in self.schema.feature}
    block, warnings = column_report.report(
        type(self).__name__, self.feature_columns, self.summaries)
    progress.log().info('%s', block)
    for warning in warnings:
      progress.log().warning('%s', warning)
    inputs, encoded = {}, {}
    for key, column in self.feature_columns.items():
      dtype = data_summary.dtype_of(features[key])
      inputs[key] = keras.Input(shape=_width(features[key]), name=key,
                                dtype={'float': 'float32', 'int': 'int64',
                                       'string': 'string'}[dtype])
      encoded[key] = column.encode(key, inputs[key], self.summaries[key])
    return keras.Model(inputs, self.build_body(encoded),
                       name=type(self).__name__)

  def build_body(self, encoded: Dict[str, columns_lib.Encoded]):
    """The last hidden layer, from the features' encodings."""
    raise NotImplementedError

  def build_optimizer(self):
    try:
      return keras.optimizers.get({'class_name': self.optimizer_name,
                                   'config': {'learning_rate':
                                              self.learning_rate}})
    except ValueError as e:
      raise SpecError(
          f'{type(self).__name__}.optimizer_name must name a Keras '
          "optimizer ('adam', 'adagrad', 'ftrl', 'sgd', 'rmsprop'...). "
          f'Received: optimizer_name={self.optimizer_name!r}. Set '
          'optimizer_name to one of those.') from e

  # Helpers of the bodies.
  def parts(self, encoded, keys: Optional[List[str]], part: str,
            member: str = 'feature_keys') -> List[Any]:
    """The `part` ('wide' or 'deep') of the encodings of `keys` (None: all),
    which the spec's attribute `member` names."""
    if keys is None:
      keys = list(encoded)
    self._check_known(member, keys, list(encoded))
    return [getattr(encoded[k], part) for k in keys]

  def tower(self, inputs: List[Any], hidden_units, activation: str,
            dropout: Optional[float], batch_norm: bool, prefix: str):
    """Dense layers of `hidden_units` on the concatenated `inputs`."""
    if not hidden_units or not all(
        isinstance(u, int) and u > 0 for u in hidden_units):
      raise SpecError(
          f'{type(self).__name__} hidden units must be a list of positive '
          f'ints, one per layer, e.g. [64, 32]. Received: {hidden_units!r}. '
          'Give one positive int of units per hidden layer.')
    x = concatenate(inputs, f'{prefix}_inputs')
    for i, units in enumerate(hidden_units):
      x = keras.layers.Dense(units, activation=activation,
                             name=f'{prefix}_{i}')(x)
      if batch_norm:
        x = keras.layers.BatchNormalization(name=f'{prefix}_{i}_norm')(x)
      if dropout:
        x = keras.layers.Dropout(dropout, name=f'{prefix}_{i}_dropout')(x)
    return x


def concatenate(parts: List[Any], name: str):
  """`parts` side by side, as float32, in a layer named `name`."""
  parts = [keras.ops.cast(p, 'float32') for p in parts]
  if len(parts) == 1:
    return keras.layers.Identity(name=name)(parts[0])
  return keras.layers.Concatenate(name=name)(parts)


def _need(column) -> str:
  if isinstance(column, columns_lib.Numeric):
    return data_summary.MOMENTS if column.normalize else data_summary.NOTHING
  if isinstance(column, columns_lib.Bucketized):
    return data_summary.NOTHING if column.boundaries else data_summary.QUANTILES
  if column.vocabulary is not None or column.num_buckets is not None:
    return data_summary.NOTHING
  return data_summary.VOCABULARY


def _width(feature):
  dims = [d.size for d in feature.shape.dim]
  return (dims[0],) if len(dims) == 1 and dims[0] > 0 else (1,)


_NOT_SETTINGS = {'fn_args', 'hparams', 'columns'}


def _is_setting(cls: type, name: str) -> bool:
  """Whether `name` is a plain attribute of the spec (a setting that a
  hyperparameter of that name overrides): not a method or property."""
  if name.startswith('_') or name in _NOT_SETTINGS or not hasattr(cls, name):
    return False
  value = getattr(cls, name)
  return not callable(value) and not isinstance(
      value, (property, functools.cached_property))
