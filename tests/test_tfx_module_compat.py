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

  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top

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


def _flax_and_jax_pipeline(tmp_path):
  """Penguins (TFX's column names) -> Transform with TFX's Flax module's
  preprocessing_fn -> two GenericTrainers on its output: the Flax module's
  run_fn, and a TrainSpec on Keras's JAX backend."""
  import tfx  # pylint: disable=g-import-not-at-top
  from tfx.components import CsvExampleGen, SchemaGen, StatisticsGen, Transform  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.orchestration import metadata, pipeline  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.proto import trainer_pb2  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  from conftest import TESTDATA  # pylint: disable=g-import-not-at-top
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  flax_module = os.path.join(os.path.dirname(tfx.__file__), 'examples',
                             'penguin', 'penguin_utils_flax_experimental.py')
  example_gen = CsvExampleGen(input_base=os.path.dirname(write_penguin_csv(
      str(tmp_path / 'data'), tfx_names=True)))
  statistics_gen = StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = SchemaGen(statistics=statistics_gen.outputs['statistics'])
  transform = Transform(examples=example_gen.outputs['examples'],
                        schema=schema_gen.outputs['schema'],
                        module_file=flax_module)
  trainers = [
      GenericTrainer(
          module_file=module_file,
          examples=transform.outputs['transformed_examples'],
          transform_graph=transform.outputs['transform_graph'],
          schema=schema_gen.outputs['schema'],
          train_args=trainer_pb2.TrainArgs(num_steps=40),
          eval_args=trainer_pb2.EvalArgs(num_steps=5)).with_id(name)
      for name, module_file in (
          ('FlaxTrainer', flax_module),
          ('JaxSpecTrainer', os.path.join(
              TESTDATA, 'penguin_transformed_jax_spec.py')))]
  return pipeline.Pipeline(
      pipeline_name='flax_penguin', pipeline_root=str(tmp_path / 'root'),
      components=[example_gen, statistics_gen, schema_gen, transform,
                  *trainers],
      metadata_connection_config=metadata.sqlite_metadata_connection_config(
          str(tmp_path / 'metadata.sqlite')))


@pytest.mark.slow
def test_flax_module_and_a_jax_spec_after_transform(tmp_path):
  """TFX's experimental Flax penguin module (pure Flax and jax2tf, no
  Keras) runs unchanged after Transform, and so does a TrainSpec on JAX:
  GenericTrainer validates and publishes both, and each serving_default
  classifies raw examples (the JAX one through XlaCallModule, with the
  Transform graph in TensorFlow)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from ml_metadata.proto import metadata_store_pb2  # pylint: disable=g-import-not-at-top
  from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # pylint: disable=g-import-not-at-top
  LocalDagRunner().run(_flax_and_jax_pipeline(tmp_path))

  config = metadata.sqlite_metadata_connection_config(
      str(tmp_path / 'metadata.sqlite'))
  with metadata.Metadata(config) as m:
    models = {a.uri.split(os.sep)[-3]: a.uri
              for a in m.store.get_artifacts_by_type('Model')}
    [raw_examples] = [
        a.uri for a in m.store.get_artifacts_by_type('Examples')
        if a.uri.startswith(str(tmp_path / 'root' / 'CsvExampleGen'))]
    states = [e.last_known_state for e in m.store.get_executions()]
  assert states == [metadata_store_pb2.Execution.COMPLETE] * 6
  records = _raw_eval_records(raw_examples, count=40)
  labels = np.array([tf.train.Example.FromString(r).features.feature[
      'species'].int64_list.value[0] for r in records])
  for name in ('FlaxTrainer', 'JaxSpecTrainer'):
    serve = tf.saved_model.load(os.path.join(
        models[name], 'Format-Serving')).signatures['serving_default']
    ops = {node.op for f in serve.graph.as_graph_def().library.function
           for node in f.node_def}
    assert 'XlaCallModule' in ops, name
    predicted = serve(examples=tf.constant(records))['outputs'].numpy()
    assert predicted.shape == (40, 3), name
    assert (predicted.argmax(axis=1) == labels).mean() > 0.6, name
