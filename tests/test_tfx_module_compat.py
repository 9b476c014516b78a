"""A module file written for `tfx.components.Trainer` runs unchanged.

The module is TFX's own Chicago taxi native-Keras example
(`tfx/examples/chicago_taxi_pipeline/taxi_utils_native_keras.py`), whose
`preprocessing_fn` feeds Transform and whose `run_fn` reads
`fn_args.transform_output`, `train_files`, `data_accessor`, `train_steps`,
`model_run_dir` and `serving_model_dir`. It builds its model with tf.keras 2
idioms that Keras 3 rejects, so it runs with `keras_version='tf_keras'`.
TFX's experimental Flax penguin module
(`tfx/examples/penguin/penguin_utils_flax_experimental.py`: Flax, optax
and jax2tf, after Transform) runs unchanged too.
"""

import glob
import os

import pytest

_TAXI_ROWS = 2000  # Of ~15k; enough for every split and Transform's vocabularies.
_TRAIN_STEPS = 20
_EVAL_STEPS = 5


def _taxi_pipeline(tmp_path, module_file: str, keras_version=None):
  from pipelines import taxi_pipeline_local  # pylint: disable=g-import-not-at-top
  return taxi_pipeline_local.create_pipeline(
      'taxi_compat', str(tmp_path / 'pipeline_root'),
      taxi_pipeline_local.write_taxi_csv(str(tmp_path / 'data'), _TAXI_ROWS),
      module_file, str(tmp_path / 'metadata.sqlite'), _TRAIN_STEPS,
      _EVAL_STEPS, keras_version)


def _read_metadata(tmp_path):
  """The Model, CsvExampleGen's Examples and every execution's state."""
  from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
  config = metadata.sqlite_metadata_connection_config(
      str(tmp_path / 'metadata.sqlite'))
  with metadata.Metadata(config) as m:
    models = m.store.get_artifacts_by_type('Model')
    # Transform's transformed_examples are Examples too; the serving
    # signature takes raw ones.
    raw_examples = [
        a for a in m.store.get_artifacts_by_type('Examples')
        if a.uri.startswith(str(tmp_path / 'pipeline_root' / 'CsvExampleGen'))]
    states = [e.last_known_state for e in m.store.get_executions()]
  assert len(models) == 1 and len(raw_examples) == 1, (models, raw_examples)
  return models[0], raw_examples[0], states


def _raw_eval_records(examples_uri: str, count: int):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  files = sorted(glob.glob(os.path.join(examples_uri, 'Split-eval', '*.gz')))
  assert files, f'no eval TFRecords under {examples_uri}'
  dataset = tf.data.TFRecordDataset(files, compression_type='GZIP')
  return [record.numpy() for record in dataset.take(count)]


@pytest.mark.slow
def test_taxi_native_keras_module_trains_and_serves_unchanged(
    tmp_path, monkeypatch):
  """The taxi Transform + native-Keras module trains, publishes and serves."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # pylint: disable=g-import-not-at-top

  # Training may set TF_USE_LEGACY_KERAS here; monkeypatch undoes it after.
  monkeypatch.delenv('TF_USE_LEGACY_KERAS', raising=False)
  from pipelines import taxi_pipeline_local  # pylint: disable=g-import-not-at-top
  LocalDagRunner().run(_taxi_pipeline(
      tmp_path, taxi_pipeline_local.tfx_module_file(), keras_version='tf_keras'))

  model, examples, states = _read_metadata(tmp_path)
  assert states == [metadata_store_pb2.Execution.COMPLETE] * 5
  serving_dir = os.path.join(model.uri, 'Format-Serving')
  assert os.path.isfile(os.path.join(serving_dir, 'saved_model.pb'))
  assert not os.path.exists(os.path.join(model.uri, '.staging'))

  serve = tf.saved_model.load(serving_dir).signatures['serving_default']
  records = _raw_eval_records(examples.uri, count=8)
  outputs = serve(examples=tf.constant(records))['outputs'].numpy()
  assert outputs.shape == (8, 1)
  assert np.all(np.isfinite(outputs))
  assert np.all((outputs >= 0) & (outputs <= 1))  # A sigmoid: P(big tipper).


def test_built_like_trainer_it_has_trainers_properties_and_channels():
  """Built like tfx Trainer, GenericTrainer has Trainer's properties and inputs."""
  from tfx.components import Trainer  # pylint: disable=g-import-not-at-top
  from tfx.proto import trainer_pb2  # pylint: disable=g-import-not-at-top
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import

  from component import GenericTrainer  # pylint: disable=g-import-not-at-top

  from pipelines import taxi_pipeline_local  # pylint: disable=g-import-not-at-top
  kwargs = dict(
      module_file=taxi_pipeline_local.tfx_module_file(),
      examples=Channel(type=standard_artifacts.Examples),
      transform_graph=Channel(type=standard_artifacts.TransformGraph),
      schema=Channel(type=standard_artifacts.Schema),
      train_args=trainer_pb2.TrainArgs(num_steps=_TRAIN_STEPS),
      eval_args=trainer_pb2.EvalArgs(num_steps=_EVAL_STEPS))
  expected = Trainer(**kwargs)
  actual = GenericTrainer(keras_version='tf_keras', **kwargs)

  def given(component):
    return {k: v for k, v in component.exec_properties.items()
            if v is not None}

  assert given(actual) == {**given(expected), 'keras_version': 'tf_keras'}
  assert sorted(actual.inputs) == sorted(expected.inputs)
  assert sorted(actual.outputs) == sorted(expected.outputs)


@pytest.mark.slow
def test_taxi_train_spec_with_transform_serves_raw_examples(tmp_path):
  """The taxi TrainSpec trains on Transform's output; its serving_default
  takes raw examples and applies the Transform graph itself."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # pylint: disable=g-import-not-at-top
  from pipelines import taxi_pipeline_local  # pylint: disable=g-import-not-at-top
  LocalDagRunner().run(_taxi_pipeline(
      tmp_path, taxi_pipeline_local.SPEC_MODULE_FILE))
  model, examples, _ = _read_metadata(tmp_path)
  assert model.custom_properties['train_steps'].int_value == _TRAIN_STEPS
  assert 'eval_auc' in model.custom_properties
  loaded = tf.saved_model.load(os.path.join(model.uri, 'Format-Serving'))
  outputs = loaded.signatures['serving_default'](
      examples=tf.constant(_raw_eval_records(examples.uri, count=8)))
  probabilities = outputs['outputs'].numpy()
  assert probabilities.shape == (8, 1)
  assert np.all((probabilities >= 0) & (probabilities <= 1))


@pytest.mark.slow
def test_tfx_flax_penguin_module_trains_and_serves_unchanged(tmp_path):
  """TFX's experimental Flax penguin module (pure Flax and jax2tf, no Keras)
  runs unchanged after Transform: GenericTrainer validates and publishes
  its SavedModel, whose serving_default classifies raw examples."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tfx  # pylint: disable=g-import-not-at-top
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # pylint: disable=g-import-not-at-top
  from pipelines import taxi_pipeline_local  # pylint: disable=g-import-not-at-top
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  module_file = os.path.join(os.path.dirname(tfx.__file__), 'examples',
                             'penguin', 'penguin_utils_flax_experimental.py')
  data_root = os.path.dirname(write_penguin_csv(str(tmp_path / 'data'),
                                                tfx_names=True))
  # The Transform pipeline of the taxi example: CsvExampleGen ->
  # StatisticsGen -> SchemaGen -> Transform -> GenericTrainer.
  LocalDagRunner().run(taxi_pipeline_local.create_pipeline(
      'flax_penguin', str(tmp_path / 'pipeline_root'), data_root,
      module_file, str(tmp_path / 'metadata.sqlite'), train_steps=40,
      eval_steps=5))

  model, examples, states = _read_metadata(tmp_path)
  assert states == [metadata_store_pb2.Execution.COMPLETE] * 5
  serve = tf.saved_model.load(os.path.join(
      model.uri, 'Format-Serving')).signatures['serving_default']
  records = _raw_eval_records(examples.uri, count=40)
  logits = serve(examples=tf.constant(records))['outputs'].numpy()
  labels = [tf.train.Example.FromString(r).features.feature['species']
            .int64_list.value[0] for r in records]
  assert logits.shape == (40, 3)
  assert (logits.argmax(axis=1) == np.array(labels)).mean() > 0.6
