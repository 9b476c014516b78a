"""Which features no serving request carries: from the schema, the export's
declaration and the Transform graph; a canned export with Transform leaves
the raw label out by itself."""

import os

import pytest

from generic_trainer.data import not_served


def test_schema_features_outside_serving_are_not_served():
  """A feature `not_in_environment: "SERVING"` is left out of requests."""
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  schema = text_format.Parse(
      'default_environment: "TRAINING" default_environment: "SERVING" '
      'feature { name: "tips" type: FLOAT not_in_environment: "SERVING" } '
      'feature { name: "fare" type: FLOAT }', schema_pb2.Schema())
  assert not_served.from_schema(schema) == {
      'tips': "not in the schema's SERVING environment"}


def test_the_declaration_round_trips(tmp_path):
  """What an export declares is what the check reads; nothing when absent."""
  assert not_served.declared(str(tmp_path)) == {}
  not_served.declare(str(tmp_path), {'tips': 'raw_label_key'})
  assert not_served.declared(str(tmp_path)) == {'tips': 'raw_label_key'}


def _preprocessing_fn(inputs):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  fare = inputs['fare']
  return {'fare_xf': tft.scale_to_z_score(fare),
          'company_xf': tft.compute_and_apply_vocabulary(inputs['company']),
          'big_tipper': tf.cast(inputs['tips'] > 0.2 * fare, tf.int64)}


@pytest.fixture(scope='module')
def taxi_like(tmp_path_factory):
  """(transform graph folder, raw eval file): a Transform graph whose label
  `big_tipper` is computed from the raw `tips` and `fare`, `fare` also
  feeding `fare_xf`; made with tf.Transform's Beam API on 40 rows."""
  import tempfile  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_transform.beam as tft_beam  # pylint: disable=g-import-not-at-top
  from tensorflow_transform.tf_metadata import dataset_metadata  # pylint: disable=g-import-not-at-top
  from tensorflow_transform.tf_metadata import metadata_io  # pylint: disable=g-import-not-at-top
  from tensorflow_transform.tf_metadata import schema_utils  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp('transform')
  spec = {'fare': tf.io.FixedLenFeature([], tf.float32),
          'tips': tf.io.FixedLenFeature([], tf.float32),
          'company': tf.io.FixedLenFeature([], tf.string)}
  rows = [{'fare': float(10 + i % 7), 'tips': float(i % 5),
           'company': ['a', 'b', 'c'][i % 3]} for i in range(40)]
  metadata = dataset_metadata.DatasetMetadata(
      schema_utils.schema_from_feature_spec(spec))
  with tft_beam.Context(temp_dir=tempfile.mkdtemp(dir=str(root))):
    _, transform_fn = ((rows, metadata)
                       | tft_beam.AnalyzeAndTransformDataset(_preprocessing_fn))
    _ = transform_fn | tft_beam.WriteTransformFn(str(root / 'graph'))
  metadata_io.write_metadata(metadata, str(root / 'graph' / 'metadata'))
  path = str(root / 'eval.tfrecord')
  with tf.io.TFRecordWriter(path) as writer:
    for row in rows[:8]:
      f = tf.train.Feature
      writer.write(tf.train.Example(features=tf.train.Features(feature={
          'fare': f(float_list=tf.train.FloatList(value=[row['fare']])),
          'tips': f(float_list=tf.train.FloatList(value=[row['tips']])),
          'company': f(bytes_list=tf.train.BytesList(
              value=[row['company'].encode()]))})).SerializeToString())
  return str(root / 'graph'), path


@pytest.mark.slow
def test_the_transform_graph_says_which_raw_features_feed_only_the_label(
    taxi_like):
  """`tips` feeds only the label; `fare` feeds the label and a feature, so
  a client sends it."""
  graph, _ = taxi_like
  assert not_served.output_sources(graph) == {
      'fare_xf': {'fare'}, 'company_xf': {'company'},
      'big_tipper': {'fare', 'tips'}}
  found = not_served.from_transform(graph, ['big_tipper'],
                                    ['fare_xf', 'company_xf'])
  assert list(found) == ['tips']


@pytest.mark.slow
def test_a_spec_export_with_transform_serves_without_the_raw_label(
    tmp_path, taxi_like):
  """With no raw_label_key, the export still leaves `tips` out of every
  signature: label-less requests pass the serving check, and the export
  declares `tips` and `big_tipper`."""
  import keras  # pylint: disable=g-import-not-at-top
  from generic_trainer import TrainSpec  # pylint: disable=g-import-not-at-top
  from generic_trainer.export_checks import serving_check  # pylint: disable=g-import-not-at-top
  from generic_trainer.export_checks.export_validation import validate_export  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop import export  # pylint: disable=g-import-not-at-top
  graph, eval_file = taxi_like

  class Spec(TrainSpec):
    label_key = 'big_tipper'
    feature_keys = ['fare_xf', 'company_xf']

    def build_optimizer(self):
      return keras.optimizers.Adam()

    def build_loss(self):
      return keras.losses.BinaryCrossentropy()

    def build_model(self):
      inputs = {'fare_xf': keras.Input((), name='fare_xf'),
                'company_xf': keras.Input((), name='company_xf',
                                          dtype='int64')}
      x = keras.ops.stack([inputs['fare_xf'], keras.ops.cast(
          inputs['company_xf'], 'float32')], axis=1)
      return keras.Model(inputs, keras.layers.Dense(1, 'sigmoid')(x))

  spec = Spec()
  export_dir = str(tmp_path / 'export')
  export.export(spec, spec.build_model(), Spec.feature_keys, export_dir,
                None, graph)
  assert set(not_served.declared(export_dir)) == {'big_tipper', 'tips'}
  report = validate_export(export_dir, [eval_file],
                           transform_graph_path=graph)
  assert report['serving']['not_served'] == ['big_tipper', 'tips']
  for log in serving_check.read_warmup_requests(export_dir):
    request = log.predict_log.request
    if request.model_spec.signature_name == 'serving_default':
      assert 'tips' not in str(request.inputs)
  assert os.path.exists(os.path.join(export_dir, serving_check.WARMUP_FILE))
