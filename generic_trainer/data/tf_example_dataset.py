"""TFXIO's tf.Example dataset, without importing Apache Beam.

In a pipeline, `fn_args.data_accessor.tf_dataset_factory(files, options,
schema)` is `tfx_bsl`'s `TFExampleRecord(files, schema=schema)
.TensorFlowDataset(options)`. The module that defines `TFExampleRecord`
imports Apache Beam (about 4 s on top of TensorFlow's own import), of which
reading needs nothing. `dataset` takes the same steps with the same tfx_bsl
functions, all Beam-free: tensor representations inferred from the schema,
the tf.Example parser config built from them and checked,
`dataset_util.make_tf_record_dataset`, the features renamed to their tensor
names, the label popped. So a local run reads exactly what a pipeline reads;
`tests/test_tf_example_dataset.py` compares the two.
"""

from typing import Any, Dict, List, Tuple, Union

import tensorflow as tf
from tensorflow.python.util import deprecation

from generic_trainer.errors import InputArtifactError, InvalidArgumentError
from generic_trainer.system.lazy import dataset_util
from generic_trainer.system.lazy import tensor_representation_util as reps

# Our tf.data functions as plain graph code.
#
# tf.data converts the Python functions it traces with autograph unless told
# not to; autograph parses their source and rewrites their control flow.
# Ours have no Python control flow that depends on tensors, and converting
# them took most of the CPU of building a dataset (2 cores: a training's
# block dataset with kept rows, 0.21 s to build converted, 0.14 s not). A
# user's function is always converted: this is for ours only.
plain = tf.autograph.experimental.do_not_convert

_FEATURE_NAME_PREFIX = '_tfx_bsl_'  # tfx_bsl's prefix for multi-column parsers.


def dataset(file_pattern: Union[str, List[str]], options, schema):
  """The dataset `TFExampleRecord(file_pattern, schema=schema)` would make.

  Args:
    file_pattern: A file pattern, or a list of them, of TFRecord files of
      tf.Example (gzip when every name ends in .gz).
    options: A `tfx_bsl.tfxio.dataset_options.TensorFlowDatasetOptions`.
    schema: The TFMD Schema of the examples.

  Returns:
    Batches of `{name: tensor}`, or `({name: tensor}, label)` with
    `options.label_key`.
  """
  if schema is None:
    raise InvalidArgumentError(
        'Unable to create a parsing config because no schema is provided. '
        'Expected a TFMD Schema (read fn_args.schema_path, or '
        'tf_transform_output.transformed_metadata.schema). Received: '
        'schema=None. Pass the schema as the third argument.')
  config, tensor_names = parser_config(schema)
  patterns = file_pattern if isinstance(file_pattern, list) else [file_pattern]
  if not patterns:
    raise InvalidArgumentError(
        'Must provide at least one file pattern. Expected '
        'fn_args.train_files or fn_args.eval_files. Received: '
        'file_pattern=[]. Pass the split\'s files.')
  data = dataset_util.make_tf_record_dataset(
      tf.convert_to_tensor(patterns),
      batch_size=options.batch_size,
      num_epochs=options.num_epochs,
      shuffle=options.shuffle,
      shuffle_buffer_size=options.shuffle_buffer_size,
      shuffle_seed=options.shuffle_seed,
      reader_num_threads=options.reader_num_threads,
      drop_final_batch=options.drop_final_batch)
  with deprecation.silence():  # TFXIO's call; TF suggests a slower map.
    data = data.apply(tf.data.experimental.parse_example_dataset(config))
  data = data.map(lambda x: {tensor_names[k]: v for k, v in x.items()})
  label_key = options.label_key
  if label_key is not None:
    if label_key not in tensor_names.values():
      raise InvalidArgumentError(
          f'The `label_key` provided ({label_key}) must be one of the '
          f'following tensors names: {list(tensor_names.values())}. Received: '
          f'label_key={label_key!r}. Pass the name of the label feature as '
          'the schema has it (after Transform, its transformed name).')
    data = data.map(lambda x: (x, x.pop(label_key)))
  return data.prefetch(buffer_size=tf.data.experimental.AUTOTUNE)


def parser_config(schema) -> Tuple[Dict[str, Any], Dict[str, str]]:
  """(tf.io parser config, parser key -> tensor name), as TFXIO builds them."""
  types = {f.name: f.type for f in schema.feature}
  config, tensor_names = {}, {}
  representations = reps.InferTensorRepresentationsFromMixedSchema(schema)
  for tensor_name, representation in representations.items():
    paths = reps.GetSourceColumnsFromTensorRepresentation(representation)
    if len(paths) == 1:
      column = paths[0].initial_step()
      value_type = types[column]
    else:
      column = tensor_name
      value_type = types[reps.GetSourceValueColumnFromTensorRepresentation(
          representation).initial_step()]
    parser = reps.CreateTfExampleParserConfig(representation, value_type)
    key = (_FEATURE_NAME_PREFIX + tensor_name + '_' + column
           if isinstance(parser, (tf.io.SparseFeature, tf.io.RaggedFeature))
           else column)
    if key in tensor_names:
      raise InputArtifactError(
          f'Unable to create a valid parsing config. Feature name: {key} is '
          'a duplicate: the schema names the feature twice (once as the tensor '
          f'representation {representations[tensor_names[key]]}). Expected '
          'each feature once. Received: a schema with a duplicate. Remove '
          'one of them from the schema.')
    tensor_names[key] = tensor_name
    config[key] = parser
  _check_parser_config(config, schema)
  return config, tensor_names


def _check_parser_config(config, schema) -> None:
  """Traces tf.io.parse_example with `config`, which raises if it is invalid."""

  @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string)])
  def parse(serialized):
    tf.io.parse_example(serialized, config)

  try:
    parse.get_concrete_function()
  except (ValueError, TypeError) as err:
    raise InputArtifactError(
        'Unable to create a valid parsing config from the provided schema\'s '
        f'tensor representation: {err}. Expected features '
        'whose type, shape and presence tf.io.parse_example accepts. '
        f'Received: the schema {str(schema)[:300]}. Fix the feature the '
        'error names in the schema (SchemaGen\'s output, or --schema).'
        ) from err
