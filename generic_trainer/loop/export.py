"""Exports a trained TrainSpec model with the signatures serving needs.

- `serving_default`: takes serialized tf.Example (`examples`, a string
  vector), parses the raw features with the schema, applies the Transform
  graph when there is one, then the spec's `preprocess`, then the model.
  Evaluator (TFMA), Pusher and TF Serving use it with no user code.
- `serving_raw`: takes the raw (dense) features as tensors by name.
Both return `{'outputs': model_output}`, or the model's outputs by name when
it has several.

With heads (`generic_trainer.heads`), also what a canned Estimator
exported, each on serialized tf.Example:
- `predict` (input `examples`): the heads' predictions (`logits`,
  `probabilities`, `class_ids`, `classes`, `all_classes`...; with several
  outputs, each output's main value under its name and the rest under
  `<name>/<key>`). TFMA reads this signature first when it exists.
- `classification` / `regression` (input `inputs`): TF Serving's Classify
  (`classes`, `scores`) and Regress (`outputs`) shapes; with several outputs,
  `<name>/classification` and `<name>/regression`.
With a Transform graph, also `transform_features` (raw examples in,
transformed features out, the label included), which TFMA's
`ModelSpec(preprocessing_function_names=['transform_features'])` uses to
read a transformed label.

No signature but `transform_features` needs a label or a weight: they are
left out of the parsing (with Transform, so is every raw feature that feeds
only them, as the Transform graph says: `data.not_served`), and the export
declares them (`assets.extra/generic_trainer_not_served.json`) for the
serving check. The heads' `classification` and `regression` signatures get
TF Serving's method names (`heads.serving_methods`).

On the JAX backend the parsing and the Transform graph stay TensorFlow ops,
and `preprocess` with the model become one jax2tf function (`on_jax`): the
same signatures (but not the heads' own: heads train on TensorFlow), served by TensorFlow with XLA.
"""

from typing import List, Optional

import tensorflow as tf

from generic_trainer.heads.head import CLASSIFY_INPUTS
from generic_trainer.heads.head import PREDICT
from generic_trainer.heads.head import logits_layer_name
from generic_trainer.loop import on_jax
from generic_trainer.data import not_served as not_served_lib
from generic_trainer.heads import serving_methods
from generic_trainer.trainspec import outputs
from generic_trainer.data import not_served
from generic_trainer.data import schema_file
from generic_trainer.data import tf_example_dataset
from generic_trainer.system.lazy import tft
import keras

SERVING_DEFAULT = 'serving_default'
SERVING_RAW = 'serving_raw'
TRANSFORM_FEATURES = 'transform_features'
EXAMPLES = 'examples'


def export(spec, model, keys: List[str], export_dir: str, schema_path:
           Optional[str], transform_graph_path: Optional[str]) -> None:
  raw_spec, names, transform_layer, not_served = _raw_feature_spec(
      spec, keys, schema_path, transform_graph_path)
  if on_jax.active():
    archive = on_jax.export_archive()
    archive.track(model)
    model_fn = on_jax.model_function(archive, spec, model, _model_feature_spec(
        keys, raw_spec, names, transform_graph_path))
  else:
    archive = keras.export.ExportArchive()
    archive.track(model)

    def model_fn(features):
      return model(spec.preprocess(features), training=False)

  def transformed(raw_features):
    features = (transform_layer(raw_features) if transform_layer is not None
                else raw_features)
    return {k: features[k] for k in keys}

  def features_of(raw_features):
    return spec.preprocess(transformed(raw_features))

  def parse(examples):
    parsed = tf.io.parse_example(examples, raw_spec)
    return {names[k]: t for k, t in parsed.items()}

  def predict(raw_features):
    values = model_fn(transformed(raw_features))
    return dict(values) if isinstance(values, dict) else {'outputs': values}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, EXAMPLES)])
  def serve_examples(examples):
    return predict(parse(examples))

  dense = {names[k]: v for k, v in raw_spec.items()
           if isinstance(v, tf.io.FixedLenFeature)}
  if transform_layer is not None:
    archive.track(transform_layer)  # A TF Trackable: saved with its assets.
  archive.add_endpoint(SERVING_DEFAULT, serve_examples)
  if len(dense) == len(raw_spec):
    @tf.function(input_signature=[{
        k: tf.TensorSpec([None] + list(v.shape), v.dtype, k)
        for k, v in dense.items()}])
    def serve_raw(features):
      return predict(features)
    archive.add_endpoint(SERVING_RAW, serve_raw)
  if all(o.head is not None for o in spec.outputs):
    _add_head_endpoints(archive, spec.outputs, model,
                        lambda examples: features_of(parse(examples)))
  if transform_layer is not None:
    _add_transform_features(archive, transform_graph_path)
  archive.write_out(export_dir, verbose=False)
  serving_methods.set_method_names(export_dir)
  not_served_lib.declare(export_dir, not_served, required=[
      names[k] for k, v in raw_spec.items()
      if isinstance(v, tf.io.FixedLenFeature) and v.default_value is None])


def _add_head_endpoints(archive, outputs, model, features_of) -> None:
  """`predict`, and each head's `classification`/`regression` signatures."""
  single = len(outputs) == 1
  both = keras.Model(model.input, {
      **{o.name: model.get_layer(o.name).output for o in outputs},
      **{logits_layer_name(o.name): model.get_layer(
          logits_layer_name(o.name)).output for o in outputs}})
  archive.track(both)

  def predictions(examples):
    values = both(features_of(examples), training=False)
    return {o.name: o.head.predictions(values[logits_layer_name(o.name)],
                                       values[o.name]) for o in outputs}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, EXAMPLES)])
  def predict(examples):
    by_output = predictions(examples)
    if single:
      return by_output[outputs[0].name]
    flat = {}
    for name, values in by_output.items():
      flat[name] = values.get('probabilities', values.get('predictions'))
      flat.update({f'{name}/{k}': v for k, v in values.items()})
    return flat

  archive.add_endpoint(PREDICT, predict)
  for output in outputs:
    kinds = output.head.signature_outputs(
        output.head.predictions(*_symbolic(output)))
    for kind in kinds:
      archive.add_endpoint(kind if single else f'{output.name}/{kind}',
                           _signature(predictions, output, kind))


def _symbolic(output):
  """Placeholder logits and outputs, to ask a head which signatures it has."""
  width = output.head.logits_dimension
  value = tf.zeros([1, width])
  return value, value


def _signature(predictions, output, kind: str):

  @tf.function(input_signature=[
      tf.TensorSpec([None], tf.string, CLASSIFY_INPUTS)])
  def signature(inputs):
    values = predictions(inputs)[output.name]
    return output.head.signature_outputs(values)[kind]

  return signature


def _add_transform_features(archive, transform_graph_path: str) -> None:
  """`transform_features`: raw serialized examples (label included) in,
  the transformed features out."""
  output = tft.TFTransformOutput(transform_graph_path)
  layer = output.transform_features_layer()
  archive.track(layer)
  raw_spec = output.raw_feature_spec()

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, EXAMPLES)])
  def transform_features(examples):
    transformed = layer(tf.io.parse_example(examples, raw_spec))
    return {k: v for k, v in transformed.items() if isinstance(v, tf.Tensor)}

  archive.add_endpoint(TRANSFORM_FEATURES, transform_features)


def _model_feature_spec(keys, raw_spec, names, transform_graph_path):
  """{feature: tf.TensorSpec} of what the model reads (after Transform,
  before `preprocess`), batch first; dense features only, as on JAX."""
  if transform_graph_path:
    parsed = tft.TFTransformOutput(
        transform_graph_path).transformed_feature_spec()
  else:
    parsed = {names[k]: v for k, v in raw_spec.items()}
  return {k: tf.TensorSpec([None] + list(parsed[k].shape), parsed[k].dtype, k)
          for k in keys}


def _raw_feature_spec(spec, keys, schema_path, transform_graph_path):
  """(parsing spec of the raw features, labels and weights removed;
  {parsing key: tensor name}; the TFT layer or None; {feature left out:
  why}).

  Without a Transform graph it is the parse config the training input used
  (TFXIO's, `tf_example_dataset.parser_config`) for the features the model
  reads (`keys`), so serving parses as training did and needs no other
  feature, and TensorFlow Transform (~1.3 s to import) is not loaded. With
  one, every raw feature Transform reads but those that feed only the
  labels and weights.
  """
  if transform_graph_path:
    output = tft.TFTransformOutput(transform_graph_path)
    raw_spec = dict(output.raw_feature_spec())
    names = {k: k for k in raw_spec}
    layer = output.transform_features_layer()
  else:
    raw_spec, names = tf_example_dataset.parser_config(
        schema_file.read(schema_path))
    raw_spec = {k: v for k, v in raw_spec.items() if names[k] in keys}
    layer = None
  targets = outputs.target_keys(spec.outputs)
  absent = {k: 'label or weight' for k in targets}
  if spec.raw_label_key:
    absent[spec.raw_label_key] = 'raw_label_key'
  if transform_graph_path:
    absent.update({k: why for k, why in not_served.from_transform(
        transform_graph_path, targets, keys).items() if k not in absent})
  raw_spec = {k: v for k, v in raw_spec.items() if names[k] not in absent}
  return raw_spec, names, layer, absent
