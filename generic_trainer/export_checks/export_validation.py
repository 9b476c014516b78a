"""Checks that what `run_fn` exported is a SavedModel a Pusher can serve.

`validate_export` runs, in order, and stops at the first failure with an
`ExportValidationError` that says what was found and how to fix it:
  1. the export directory holds `saved_model.pb` (a `.keras`/`.h5` file or an
     empty directory gets a message of its own);
  2. `tf.saved_model.load` loads it;
  3. it has a `serving_default` signature;
  4. that signature, fed a few eval examples, returns finite numbers. It is fed
     serialized `tf.Example`s when it takes one string tensor, otherwise the
     features it names, read from the examples (through the Transform graph
     when one is given and the names are transformed features). When the
     examples are Transform's output and the signature parses raw examples,
     it is fed synthetic raw examples built from the raw feature spec;
  5. every signature a serving client calls answers the Classify, Regress or
     Predict request TF Serving would give it, built from those examples
     without labels and weights (`serving_check`); the requests are written
     into the export as its warmup file.
"""

from typing import Any, Dict, List, Optional

from generic_trainer.system import paths
from generic_trainer.system import saved_models
from generic_trainer.export_checks import serving_check
from generic_trainer.data import not_served as not_served_lib
from generic_trainer.data import feature_names
from generic_trainer.data import tfrecords
from generic_trainer.errors import ExportValidationError, summarize
import tensorflow as tf
from generic_trainer.data import schema_file
from generic_trainer.system.lazy import tft
from generic_trainer.keys import SAVED_MODEL_FILE

SERVING_SIGNATURE = 'serving_default'
_KERAS_FILE_SUFFIXES = ('.keras', '.h5', '.hdf5', '.weights.h5')
_HOW_TO_EXPORT = (
    'Save a SavedModel into fn_args.serving_model_dir: `model.export(dir)` '
    'with Keras 3, `model.save(dir, save_format="tf")` with tf.keras 2 '
    '(keras_version="tf_keras"), or `tf.saved_model.save(obj, dir, '
    'signatures=...)`.')


def load_export(serving_dir: str):
  """The SavedModel in `serving_dir`, loaded once for every check of it
  (`validate_export`, the signature gate).

  Raises:
    ExportValidationError: no SavedModel there, or it does not load.
  """
  _check_files(serving_dir)
  try:
    return saved_models.load(serving_dir)
  except Exception as e:  # pylint: disable=broad-except
    raise ExportValidationError(
        f'The export in {serving_dir} has {SAVED_MODEL_FILE} but does not load '
        f'with tf.saved_model.load: {type(e).__name__}: {summarize(e)}. '
        f'It may be half-written or corrupt. Expected a SavedModel that '
        f'loads. Received: the error above. {_HOW_TO_EXPORT}') from e


def validate_export(serving_dir: str,
                    eval_files: List[str],
                    schema_path: Optional[str] = None,
                    transform_graph_path: Optional[str] = None,
                    num_examples: int = 4,
                    loaded: Any = None,
                    not_served: Optional[Dict[str, str]] = None,
                    write_warmup: bool = True) -> Dict[str, Any]:
  """Validates the SavedModel in `serving_dir`; returns what was checked.

  Args:
    serving_dir: The export.
    eval_files: File patterns of the eval tf.Examples.
    schema_path: The schema; its features not in the SERVING environment
      are left out of the serving requests.
    transform_graph_path: Transform's graph, when the examples are its input
      or output.
    num_examples: How many eval examples each request carries.
    loaded: `load_export(serving_dir)`, when the caller has it.
    not_served: {feature: why} of further labels and weights no request
      carries (the export's own declaration, `data.not_served`, is read too).
    write_warmup: Write the requests that passed into the export's
      `assets.extra/tf_serving_warmup_requests`.

  Raises:
    ExportValidationError: (`ServingCheckError` for step 5) what is wrong.
  """
  if loaded is None:
    loaded = load_export(serving_dir)
  signatures = dict(loaded.signatures)
  if SERVING_SIGNATURE not in signatures:
    raise ExportValidationError(
        f"The SavedModel in {serving_dir} has no '{SERVING_SIGNATURE}' "
        f'signature, which Evaluator, Pusher and TF Serving use. Its '
        f'signatures: {sorted(signatures) or "none"}. Expected '
        f"'{SERVING_SIGNATURE}' among them. Received: none of that name. "
        'Pass '
        "`signatures={'serving_default': fn}` to tf.saved_model.save, or use "
        '`model.export(dir)` (Keras 3), which writes one.')
  fn = signatures[SERVING_SIGNATURE]
  input_specs = fn.structured_input_signature[1]
  serialized = _read_serialized_examples(eval_files, num_examples)
  inputs = _signature_inputs(input_specs, serialized, schema_path,
                             transform_graph_path)
  try:
    outputs = fn(**inputs)
  except Exception as e:  # pylint: disable=broad-except
    raise ExportValidationError(
        f"The '{SERVING_SIGNATURE}' signature of {serving_dir} failed on "
        f'{len(serialized)} eval examples: {type(e).__name__}: '
        f'{summarize(e)}. Expected it to answer the eval examples. '
        'Received: the error above. Check that the exported function parses '
        'and transforms the features the way training did.') from e
  output_shapes = {}
  for name, tensor in outputs.items():
    output_shapes[name] = tensor.shape.as_list()
    if tensor.dtype.is_floating and not bool(
        tf.reduce_all(tf.math.is_finite(tensor))):
      raise ExportValidationError(
          f"The '{SERVING_SIGNATURE}' signature of {serving_dir} returned "
          f"non-finite values (NaN or Inf) in output {name!r} for "
          f'{len(serialized)} eval examples: '
          f'{str(tensor.numpy().tolist())[:200]}. Expected finite numbers. '
          'Received: NaN or Inf, above. The model diverged or was exported '
          'before it was trained. Check the training loss and learning '
          'rate.')
  requests = _requests(serving_dir, serialized, inputs, schema_path,
                       transform_graph_path, not_served)
  return {'signature': SERVING_SIGNATURE,
          'inputs': {k: str(v) for k, v in input_specs.items()},
          'outputs': output_shapes,
          'examples_checked': len(serialized),
          'serving': serving_check.check(serving_dir, loaded, requests,
                                         write_warmup=write_warmup)}


def _requests(serving_dir: str, serialized: List[bytes], inputs, schema_path,
              transform_graph_path, not_served) -> serving_check.Requests:
  """What the serving requests carry: the examples step 4 fed (raw ones,
  with Transform), without labels and weights."""
  found = {}
  if schema_path:
    found.update(not_served_lib.from_schema(schema_file.read(schema_path)))
  found.update(not_served_lib.declared(serving_dir))
  found.update(not_served or {})
  examples = serialized
  fed = next(iter(inputs.values())) if len(inputs) == 1 else None
  if fed is not None and fed.dtype.name == 'string':
    examples = [bytes(e) for e in fed.numpy().reshape([-1])]
  stripped = serving_check.without(examples, found)
  features = serving_check.features_of(serving_check.without(serialized,
                                                             found))
  features.update(serving_check.features_of(stripped))
  transformed_only = ()
  if transform_graph_path:
    output = tft.TFTransformOutput(transform_graph_path)
    transformed_only = set(output.transformed_feature_spec()) - set(
        output.raw_feature_spec())
  return serving_check.Requests(stripped, features, found, transformed_only)



def _check_files(serving_dir: str) -> None:
  if not tf.io.gfile.isdir(serving_dir):
    prefix = paths.as_pattern(serving_dir.rstrip('/'))
    stray = [p for suffix in _KERAS_FILE_SUFFIXES
             for p in tf.io.gfile.glob(prefix + '*' + suffix)]
    found = f' Found instead: {stray}.' if stray else ''
    raise ExportValidationError(
        'run_fn exported nothing: fn_args.serving_model_dir '
        f'({serving_dir}) does not exist.{found} Expected a SavedModel there. '
        f'Received: no folder. {_HOW_TO_EXPORT}')
  names = sorted(tf.io.gfile.listdir(serving_dir))
  if SAVED_MODEL_FILE in names:
    return
  keras_files = [n for n in names if n.endswith(_KERAS_FILE_SUFFIXES)]
  if keras_files:
    raise ExportValidationError(
        f'Expected a SavedModel in {serving_dir}, found the Keras file(s) '
        f'{keras_files}. A Keras file is not a SavedModel: Evaluator, Pusher '
        f'and TF Serving cannot load it. Received: {keras_files}. '
        f'{_HOW_TO_EXPORT}')
  raise ExportValidationError(
      f'Expected a SavedModel ({SAVED_MODEL_FILE}) in {serving_dir}. Found: '
      f'{names or "an empty directory"}. Received: no {SAVED_MODEL_FILE}. '
      f'{_HOW_TO_EXPORT}')


def _read_serialized_examples(patterns: List[str], limit: int) -> List[bytes]:
  """Up to `limit` serialized records from the eval files."""
  files = paths.expand(patterns)
  records = []
  for path in files:
    try:
      for record in tfrecords.records(path):
        if len(records) >= limit:
          break
        records.append(record)
    except tf.errors.OpError as e:
      raise ExportValidationError(
          f'Cannot read eval examples from {path} to test the export: '
          f'{summarize(e)}. Expected TFRecord files of tf.Example. '
          'Received: a file that does not read as one. Re-run the component '
          'that wrote the eval split.') from e
    if len(records) >= limit:
      break
  if not records:
    raise ExportValidationError(
        f'No eval examples to test the export with. Expected at least one '
        f'record. Received: {patterns} matched {len(files)} file(s) and no '
        'records. Give an eval split with examples (fn_args.eval_files).')
  return records


def _signature_inputs(specs, serialized: List[bytes], schema_path,
                      transform_graph_path) -> Dict[str, Any]:
  """Builds the keyword inputs of the serving signature from the examples."""
  if len(specs) == 1:
    (name, spec), = specs.items()
    if isinstance(spec, tf.TensorSpec) and spec.dtype == tf.string:
      if transform_graph_path:
        serialized = _raw_examples(serialized, transform_graph_path)
      batch = tf.constant(serialized)
      if spec.shape.rank == 2:
        batch = tf.reshape(batch, [-1, 1])
      return {name: batch}
  features = _decode_examples(serialized)
  missing = feature_names.lacking(specs, features)
  if missing and transform_graph_path:
    features.update(_transformed_features(serialized, transform_graph_path))
    missing = feature_names.lacking(specs, features)
  if missing:
    lacks = feature_names.lacks(
        f"The '{SERVING_SIGNATURE}' signature takes the input(s)", missing,
        sorted(features), has='The eval examples have')
    raise ExportValidationError(
        f'{lacks} The model cannot be tested as a server would call it. '
        'Expected inputs named like features of the data. Received: inputs '
        f'{sorted(specs)}. Export a serving_default that takes serialized '
        'tf.Example (one tf.string input), or name the inputs like the '
        'features in the data.')
  inputs = {}
  for name, spec in specs.items():
    if not isinstance(spec, tf.TensorSpec):
      raise ExportValidationError(
          f'Input {name!r} of the serving signature is a '
          f'{type(spec).__name__}; only dense inputs can be fed from the '
          'eval examples. Expected tf.TensorSpec inputs. Received: '
          f'{spec}. Export a serving_default that takes serialized '
          'tf.Example.')
    try:
      value = tf.convert_to_tensor(features[name])
      if value.dtype != spec.dtype:
        value = tf.cast(value, spec.dtype)
      if spec.shape.rank is not None and value.shape.rank != spec.shape.rank:
        value = tf.reshape(value, [-1] + [d or 1 for d in spec.shape[1:]])
    except (tf.errors.OpError, TypeError, ValueError) as e:
      raise ExportValidationError(
          f'Cannot feed feature {name!r} of the eval examples to the '
          f'serving signature, which takes {spec}: {summarize(e)}. Expected '
          f'values that fit {spec}. Received: the error above. Export a '
          'serving_default that takes serialized tf.Example.') from e
    inputs[name] = value
  return inputs


def _decode_examples(serialized: List[bytes]) -> Dict[str, Any]:
  """Dense features of tf.Examples: name -> list of per-example values."""
  columns = {}
  for i, record in enumerate(serialized):
    try:
      example = tf.train.Example.FromString(record)
    except Exception as e:  # pylint: disable=broad-except
      raise ExportValidationError(
          f'Eval record {i} is not a tf.Example ({e}); cannot feed the '
          'serving signature. Expected serialized tf.Examples, as ExampleGen '
          'writes them. Received: a record that does not parse. Re-run the '
          'component that wrote the eval split.') from e
    for name, feature in example.features.feature.items():
      kind = feature.WhichOneof('kind')
      values = list(getattr(feature, kind).value) if kind else []
      columns.setdefault(name, []).append(values)
  dense = {}
  for name, rows in columns.items():
    if len(rows) == len(serialized) and len({len(r) for r in rows}) == 1 and rows[0]:
      dense[name] = rows
  return dense


def _raw_examples(serialized: List[bytes], transform_graph_path: str):
  """Raw tf.Examples for a signature that parses raw features.

  With Transform, the trainer's examples are usually the transformed ones,
  which a raw-example signature cannot parse. Then we feed synthetic raw
  examples (zeros and empty strings for every required raw feature): they
  test that the signature parses, transforms and predicts, not the values.
  """
  raw_spec = tft.TFTransformOutput(transform_graph_path).raw_feature_spec()
  required = {n: s for n, s in raw_spec.items()
              if isinstance(s, tf.io.FixedLenFeature) and s.default_value is None}
  present = set(tf.train.Example.FromString(serialized[0]).features.feature)
  if set(required) <= present:
    return serialized
  example = tf.train.Example()
  for name, spec in required.items():
    size = 1
    for dim in spec.shape:
      size *= dim
    feature = example.features.feature[name]
    if spec.dtype == tf.string:
      feature.bytes_list.value.extend([b''] * size)
    elif spec.dtype.is_integer:
      feature.int64_list.value.extend([0] * size)
    else:
      feature.float_list.value.extend([0.0] * size)
  return [example.SerializeToString()] * len(serialized)


def _transformed_features(serialized, transform_graph_path) -> Dict[str, Any]:
  output = tft.TFTransformOutput(transform_graph_path)
  raw = tf.io.parse_example(tf.constant(serialized), output.raw_feature_spec())
  return {k: v for k, v in output.transform_raw_features(raw).items()
          if isinstance(v, tf.Tensor)}

