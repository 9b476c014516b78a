"""The datasets a TrainSpec trains and evaluates on.

Parsed with the schema's TFXIO config; see `input_pipeline` for how.
"""

import contextlib
import os
from typing import Iterator, List, Optional, Tuple, Union
import tempfile
import warnings

import tensorflow as tf

from generic_trainer.system import progress
from generic_trainer.errors import SpecError
from generic_trainer.trainspec.spec import TrainSpec
from generic_trainer.data import schema_file
from generic_trainer.data import input_pipeline
from generic_trainer.data.kept import blocks as kept_blocks
from generic_trainer.data import feature_names
from generic_trainer.data import schema_check
from generic_trainer.system import paths
from generic_trainer.trainspec import outputs
from generic_trainer.loop import on_jax
from generic_trainer.system import machine
from generic_trainer.loop import first_batch_errors
from generic_trainer.system.lazy import dataset_options
from generic_trainer.system.lazy import tft


# What Keras 3 warns whenever a dataset of unknown length ends
# (keras/src/trainers/epoch_iterator.py), written for a training dataset
# too short for its steps.
_RAN_OUT = 'Your input ran out of data'


@contextlib.contextmanager
def read_to_its_end() -> Iterator[None]:
  """While in it, Keras does not warn that a dataset ran out of data: an
  evaluation reads its finite split to the end on purpose (fit's
  validation each epoch, the Estimator's `evaluate`)."""
  with warnings.catch_warnings():
    warnings.filterwarnings('ignore', message=_RAN_OUT)
    yield


def load_schema(fn_args):
  """The schema of the examples the model reads (after Transform, if any)."""
  if fn_args.transform_graph_path:
    return tft.TFTransformOutput(
        fn_args.transform_graph_path).transformed_metadata.schema
  if not fn_args.schema_path:
    raise SpecError(
        'A TrainSpec needs to know the features: connect a `schema` input '
        "(e.g. schema=schema_gen.outputs['schema']) or a `transform_graph`. "
        'Received neither. Connect one of them to GenericTrainer.')
  return schema_file.read(fn_args.schema_path)


def check_data(fn_args, schema) -> None:
  """The first records of every train and eval file parse with the schema;
  else an InputArtifactError names the file, record and feature (see
  `data.schema_check`). tf.Example data read by our factory only."""
  factory = fn_args.data_accessor.tf_dataset_factory
  if not isinstance(factory, input_pipeline.DatasetFactory):
    return
  config, _ = factory.parser(schema)
  source = fn_args.transform_graph_path or fn_args.schema_path
  for what, patterns in (('train', fn_args.train_files),
                         ('eval', fn_args.eval_files)):
    files = paths.expand(patterns)
    schema_check.check_examples(files, config, what, source)


def feature_keys(spec, schema) -> List[str]:
  """The spec's feature_keys, or every schema feature but the labels and
  weights."""
  names = [f.name for f in schema.feature]
  targets = outputs.target_keys(spec.outputs)
  for key in outputs.label_keys(spec.outputs):
    if key not in names:
      raise SpecError(
          f'The label {key!r} (TrainSpec.label_key) is not a '
          f'feature of the data. The schema has: {", ".join(names)}. '
          f'Expected one of those{feature_names.did_you_mean(key, names)}. Received: '
          f'label_key={key!r}. Set '
          'label_key to one of them (the transformed name, with Transform).')
  weights = [k for k in targets if k not in outputs.label_keys(spec.outputs)]
  for key in weights:
    if key not in names:
      raise SpecError(
          f'The weight column {key!r} (weight_key) is not a feature of the '
          f'data. The schema has: {", ".join(names)}. Expected one of '
          f'those{feature_names.did_you_mean(key, names)}. Received: weight_key={key!r}. Set '
          'weight_key to one of them, or to None to weigh every example '
          'equally.')
  keys = list(spec.feature_keys or [n for n in names if n not in targets])
  missing = feature_names.lacking(keys, names)
  if missing:
    raise SpecError(
        f'{feature_names.lacks("TrainSpec.feature_keys names", missing, names)}'
        ' Expected features of the data. Received: feature_keys='
        f'{spec.feature_keys!r}. Name features of the data, or leave '
        'feature_keys unset to read them all.')
  return keys




def make_dataset(spec, fn_args, schema, files: List[str], keys: List[str],
                 batch_size: int, num_epochs: Optional[int], shuffle: bool,
                 with_label: bool = True, cache: Optional[bool] = None,
                 encode_labels: bool = True, seed: Optional[int] = None,
                 cache_folder=None, kept_rows=None):
  """(features, labels) batches of `files`, features restricted to `keys`;
  (features, labels, weights) when the spec has weight columns.

  Labels are one tensor, or {label: tensor} for several outputs (see
  `generic_trainer.trainspec.outputs`); a head's labels are encoded as its loss takes
  them, unless `encode_labels` is False (the checks look at them raw).
  Without `with_label`, batches of features alone (the labels may be
  absent). With `shuffle` and a `seed`, the order is the seed's, the same in
  every process (see `input_pipeline.block_dataset`); without, each run's
  own. When every column read is dense and the data is local tf.Example
  (the factory is `input_pipeline.DatasetFactory`), rows are parsed in
  blocks and kept after the first epoch where `cache_decision` says (it
  logs why: in memory, on local disk in `cache_folder`, a
  `data.cache_folder.CacheFolder`, or nowhere), or nowhere with
  `cache=False`; otherwise the dataset comes from the factory, row by row.
  With `kept_rows` (a `data.kept.cache.SpanCache`), each file's parsed
  blocks are read back from the rows an earlier training kept, or kept
  for the next one as the first epoch parses them (numbers only).
  """
  plain = outputs.plain(spec.outputs)
  # A plain label is popped by the reader; other targets are read as columns
  # and split off by `targets`.
  label = spec.outputs[0].name if with_label and plain else None
  columns = list(keys)
  if with_label and not plain:
    columns += [k for k in outputs.target_keys(spec.outputs)
                if k not in columns]
  factory = fn_args.data_accessor.tf_dataset_factory
  if isinstance(factory, input_pipeline.DatasetFactory):
    config, names = factory.parser(schema, columns + ([label] if label else []))
    if input_pipeline.dense_only(config):
      if cache is None:
        cache = cache_decision(spec, files, config, cache_folder)
      dataset = _shard_by_data(input_pipeline.block_dataset(
          files, config, names, label, batch_size, num_epochs, shuffle,
          cache=cache, seed=seed,
          kept=kept_blocks.with_key(
              kept_rows, config, names, label, input_pipeline.PARSE_ROWS,
              getattr(fn_args, 'transform_graph_path', None))))
      # Blocks hold exactly the columns (and a plain label).
      return _preprocessed(spec, dataset, keys, with_label, plain,
                           encode_labels, select=False)
  # Not tfx_bsl.public.tfxio, which imports Apache Beam: the same class.
  options = dataset_options.TensorFlowDatasetOptions(
      batch_size=batch_size, label_key=label, num_epochs=num_epochs,
      shuffle=shuffle, shuffle_seed=seed)
  dataset = _shard_by_data(factory(files, options, schema))
  return _preprocessed(spec, dataset, keys, with_label, plain, encode_labels,
                       select=True)


def _preprocessed(spec, dataset, keys: List[str], with_label: bool,
                  plain: bool, encode_labels: bool, select: bool):
  """`dataset` mapped to what the model trains on: the features of `keys`
  through the spec's `preprocess`, with their targets when `with_label` (a
  plain label comes from the reader; other targets are columns, split off
  by `outputs.targets`). Without `select`, a plain dataset's features are
  exactly `keys` already (the block reader read only them).

  On JAX the features are checked first (dense numbers only), and
  `preprocess` is its jax2tf conversion (see `on_jax`).
  """
  columns_spec = dataset.element_spec
  if with_label and plain:
    columns_spec = columns_spec[0]
  own = type(spec).preprocess is not TrainSpec.preprocess
  preprocess = spec.preprocess
  if on_jax.active():
    features_spec = {k: columns_spec[k] for k in keys}
    on_jax.check_features(features_spec)
    if own:
      preprocess = on_jax.tf_preprocess(spec, features_spec)
  if plain and not (own or select):
    return dataset

  refused = []  # Our error, which autograph would wrap in a StagingError.

  def features_of(columns):
    features = preprocess({k: columns[k] for k in keys})
    if features is None:
      refused.append(SpecError(
          f'{type(spec).__name__}.preprocess() returned None. Expected the '
          'features the model reads: a dict of tensors by name. Received: '
          'None. Return the dict (`return features`) at the end of '
          'preprocess().'))
      raise refused[-1]
    return features

  if not with_label:
    return _mapped(dataset, features_of, refused)
  if plain:
    return _mapped(dataset, lambda features, label: (features_of(features),
                                                     label), refused)

  def example(columns):
    labels, weights = outputs.targets(spec.outputs, columns, encode_labels)
    features = features_of(columns)
    return (features, labels) if weights is None else (
        features, labels, weights)

  return _mapped(dataset, example, refused)


def _mapped(dataset, fn, refused: list):
  """`dataset.map(fn)`, raising the SpecError `fn` raised while traced
  (in `refused`) rather than autograph's StagingError around it."""
  try:
    return dataset.map(fn)
  except Exception as e:  # pylint: disable=broad-except
    if refused:
      raise refused[0] from e
    raise


def cache_decision(spec, files: List[str], config,
                   folder=None) -> Union[bool, str]:
  """Where to keep the parsed rows of `files` after the first epoch, as
  `input_pipeline.block_dataset` takes it: True (memory), a path prefix in
  `folder` (a `data.cache_folder.CacheFolder` on local disk; its share of
  the disk is claimed), or False (every epoch reads and parses the files).
  From `spec.cache` (checked by `spec_checks.check_cache`): True, False, 'disk',
  or None for `input_pipeline.cache_fit`'s choice. The decision and its
  reason go to the progress log: a user should know what each epoch costs.
  """
  setting = spec.cache
  disk = folder.path if folder is not None else None
  if setting is None:
    fit = input_pipeline.cache_fit(
        files, config, disk_dir=disk, disk_sharers=getattr(
            folder, 'sharers', 1), disk_claimed=getattr(folder, 'claimed', 0))
    where, reason = fit.where, fit.reason
    if where == 'disk':
      folder.claim(fit.parsed_bytes)
  else:
    where = {True: 'memory', 'disk': 'disk', False: None}[setting]
    reason = f'TrainSpec.cache={setting!r}'
    if where == 'disk' and disk is None:
      where = None
      reason += ', but this training has no local folder for a cache'
    elif where == 'disk':
      kind = machine.memory_filesystem(disk)
      if kind:
        reason += f'; note that {disk} is on {kind}, in memory'
  what = _describe(files)
  log = progress.log()
  if where is None:
    log.info('cache: off for %s (%s); every epoch reads and parses the '
             'files', what, reason)
    return False
  if where == 'memory':
    log.info('cache: in memory for %s (%s)', what, reason)
    return True
  path = tempfile.mkdtemp(prefix=f'{what}-', dir=disk)
  folder.on_disk.append(path)
  log.info('cache: on disk for %s, in %s (%s); the first epoch writes the '
           'parsed rows there, later epochs read them back', what, path,
           reason)
  return os.path.join(path, 'blocks')


def _describe(files: List[str]) -> str:
  """'Split-train', the folder the files are in, or 'N file patterns'."""
  folders = {os.path.basename(os.path.dirname(f.rstrip('/'))) for f in files}
  if len(folders) == 1 and folders != {''}:
    return folders.pop()
  return f'{len(files)} file patterns'


def first_batch(spec, fn_args, schema, files: List[str], keys: List[str]):
  """One shuffled train batch, read without caching, labels as read (for
  the checks)."""
  dataset = make_dataset(spec, fn_args, schema, files, keys, spec.batch_size,
                         num_epochs=1, shuffle=True, cache=False,
                         encode_labels=False)
  try:
    return next(iter(dataset))
  except tf.errors.OpError as e:
    raise first_batch_errors.explain(
        e, schema, keys, files, fn_args.transform_graph_path or
        fn_args.schema_path) from e


def _shard_by_data(dataset):
  """With several workers, each takes every N-th batch: splits often have
  fewer files than workers, which TF's default (by file) cannot shard."""
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = (
      tf.data.experimental.AutoShardPolicy.DATA)
  return dataset.with_options(options)


def schedule(spec, train_steps: Optional[int],
             num_train_examples: Optional[int]) -> Tuple[int, Optional[int]]:
  """(epochs, steps_per_epoch); steps None means one pass per epoch."""
  epochs, batch_size = spec.epochs, spec.batch_size
  for name, value in (('epochs', epochs), ('batch_size', batch_size)):
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
      raise SpecError(f'TrainSpec.{name} must be a positive int. Received: '
                      f'{name}={value!r}. Set it to 1 or more.')
  if train_steps:
    if train_steps < epochs:
      raise SpecError(
          f'train_args.num_steps={train_steps} is fewer than '
          f'TrainSpec.epochs={epochs}: every epoch needs a step. Expected '
          f'at least {epochs} steps. Received: num_steps={train_steps}, '
          f'epochs={epochs}. Raise num_steps or lower epochs.')
    if train_steps % epochs:
      raise SpecError(
          f'train_args.num_steps={train_steps} does not divide into '
          f'TrainSpec.epochs={epochs} equal epochs. Expected a multiple of '
          f'{epochs}. Received: num_steps={train_steps}, epochs={epochs}. Use '
          f'a multiple of {epochs} (e.g. '
          f'{train_steps - train_steps % epochs or epochs}).')
    return epochs, train_steps // epochs
  if num_train_examples:
    return epochs, -(-num_train_examples // batch_size)
  return epochs, None
