"""Exports a trained TrainSpec model with the signatures serving needs.

- `serving_default`: takes serialized tf.Example (`examples`, a string
  vector), parses the raw features with the schema, applies the Transform
  graph when there is one, then the spec's `preprocess`, then the model.
  Evaluator (TFMA), Pusher and TF Serving use it with no user code.
- `serving_raw`: takes the raw (dense) features as tensors by name.
Both return `{'outputs': model_output}`.
"""

from typing import List, Optional

SERVING_DEFAULT = 'serving_default'
SERVING_RAW = 'serving_raw'


def export(spec, model, keys: List[str], export_dir: str, schema_path:
           Optional[str], transform_graph_path: Optional[str]) -> None:
  import keras  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  raw_spec, names, transform_layer = _raw_feature_spec(
      spec, keys, schema_path, transform_graph_path)

  def predict(raw_features):
    features = (transform_layer(raw_features) if transform_layer is not None
                else raw_features)
    features = spec.preprocess({k: features[k] for k in keys})
    return {'outputs': model(features, training=False)}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, 'examples')])
  def serve_examples(examples):
    parsed = tf.io.parse_example(examples, raw_spec)
    return predict({names[k]: t for k, t in parsed.items()})

  dense = {names[k]: v for k, v in raw_spec.items()
           if isinstance(v, tf.io.FixedLenFeature)}
  archive = keras.export.ExportArchive()
  archive.track(model)
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
  archive.write_out(export_dir, verbose=False)


def _raw_feature_spec(spec, keys, schema_path, transform_graph_path):
  """(parsing spec of the raw features, label removed; {parsing key:
  tensor name}; the TFT layer or None).

  Without a Transform graph it is the parse config the training input used
  (TFXIO's, `tf_example_dataset.parser_config`) of the features the model
  reads (`keys`): serving parses as training did, a client sends those
  features and no others, and TensorFlow Transform (~1.3 s to import) is not
  loaded. With one, it is every raw feature the Transform graph takes.
  """
  if transform_graph_path:
    import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
    output = tft.TFTransformOutput(transform_graph_path)
    raw_spec = dict(output.raw_feature_spec())
    names = {k: k for k in raw_spec}
    layer = output.transform_features_layer()
  else:
    from generic_trainer.data import schema_file  # pylint: disable=g-import-not-at-top
    from generic_trainer.data import tf_example_dataset  # pylint: disable=g-import-not-at-top
    raw_spec, names = tf_example_dataset.parser_config(
        schema_file.read(schema_path))
    raw_spec = {k: v for k, v in raw_spec.items() if names[k] in keys}
    layer = None
  label = spec.raw_label_key or spec.label_key
  raw_spec = {k: v for k, v in raw_spec.items() if names[k] != label}
  return raw_spec, names, layer
