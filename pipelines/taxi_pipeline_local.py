"""The Chicago taxi pipeline with Transform, run locally with LocalDagRunner.

CsvExampleGen -> StatisticsGen -> SchemaGen -> Transform -> GenericTrainer
-> Evaluator (TFMA: AUC, on raw eval examples, the label through the
model's `transform_features` signature) -> Pusher, on the taxi CSV that
ships inside the `tfx` package. The same pipeline runs TFX's own
native-Keras taxi module (unchanged, with keras_version='tf_keras'), our
TrainSpec module `module_files/taxi_spec.py`, and the canned wide-and-deep
classifier `module_files/taxi_wide_deep.py`:

    python -m pipelines.taxi_pipeline_local --output-dir taxi_output
    python -m pipelines.taxi_pipeline_local --module wide_deep --output-dir taxi_wd
    python -m pipelines.taxi_pipeline_local --module tfx --output-dir taxi_tfx
"""

import argparse
import itertools
import os
from typing import Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
SPEC_MODULE_FILE = os.path.join(os.path.dirname(_HERE), 'module_files',
                                'taxi_spec.py')
WIDE_DEEP_MODULE_FILE = os.path.join(os.path.dirname(_HERE), 'module_files',
                                     'taxi_wide_deep.py')


def tfx_taxi_dir() -> str:
  import tfx  # pylint: disable=g-import-not-at-top
  return os.path.join(os.path.dirname(tfx.__file__), 'examples',
                      'chicago_taxi_pipeline')


def tfx_module_file() -> str:
  """TFX's own native-Keras taxi module (preprocessing_fn and run_fn)."""
  return os.path.join(tfx_taxi_dir(), 'taxi_utils_native_keras.py')


def write_taxi_csv(data_root: str, rows: Optional[int] = None) -> str:
  """Copies the header and the first `rows` rows (all if None) of the CSV."""
  os.makedirs(data_root, exist_ok=True)
  source = os.path.join(tfx_taxi_dir(), 'data', 'simple', 'data.csv')
  with open(source) as f, open(os.path.join(data_root, 'data.csv'),
                               'w') as out:
    out.writelines(itertools.islice(f, None if rows is None else rows + 1))
  return data_root


def label_key(module_file: str) -> str:
  """The transformed label of the module's preprocessing_fn."""
  return 'big_tipper' if module_file == SPEC_MODULE_FILE else 'tips_xf'


def create_pipeline(pipeline_name: str, pipeline_root: str, data_root: str,
                    module_file: str, metadata_path: str,
                    train_steps: int = 100, eval_steps: int = 10,
                    keras_version: Optional[str] = None,
                    serving_model_dir: Optional[str] = None,
                    auc_threshold: float = 0.5,
                    backend: Optional[str] = None):
  """Returns the TFX pipeline; `module_file` serves Transform and trainer;
  `keras_version` and `backend` are GenericTrainer's.

  With `serving_model_dir`, Evaluator (blessing at AUC >= `auc_threshold`)
  and Pusher follow the trainer; without, the pipeline ends at it.
  """
  from tfx.components import CsvExampleGen, SchemaGen, StatisticsGen, Transform  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.orchestration import metadata, pipeline  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.proto import trainer_pb2  # pylint: disable=g-import-not-at-top

  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top

  example_gen = CsvExampleGen(input_base=data_root)
  statistics_gen = StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = SchemaGen(statistics=statistics_gen.outputs['statistics'])
  transform = Transform(examples=example_gen.outputs['examples'],
                        schema=schema_gen.outputs['schema'],
                        module_file=module_file)
  trainer = GenericTrainer(
      module_file=module_file,
      examples=transform.outputs['transformed_examples'],
      transform_graph=transform.outputs['transform_graph'],
      schema=schema_gen.outputs['schema'],
      train_args=trainer_pb2.TrainArgs(num_steps=train_steps),
      eval_args=trainer_pb2.EvalArgs(num_steps=eval_steps),
      keras_version=keras_version,
      backend=backend)
  components = [example_gen, statistics_gen, schema_gen, transform, trainer]
  if serving_model_dir:
    components += _evaluate_and_push(
        example_gen, trainer, label_key(module_file), serving_model_dir,
        auc_threshold)
  return pipeline.Pipeline(
      pipeline_name=pipeline_name, pipeline_root=pipeline_root,
      components=components,
      metadata_connection_config=metadata.sqlite_metadata_connection_config(
          metadata_path))


def _evaluate_and_push(example_gen, trainer, label: str,
                       serving_model_dir: str, auc_threshold: float):
  """Evaluator on the raw eval split (the label read through the model's
  `transform_features` signature, as TFX's taxi pipeline does), and Pusher."""
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  from tfx.components import Evaluator, Pusher  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.proto import pusher_pb2  # pylint: disable=g-import-not-at-top
  eval_config = tfma.EvalConfig(
      model_specs=[tfma.ModelSpec(
          label_key=label,
          preprocessing_function_names=['transform_features'])],
      slicing_specs=[tfma.SlicingSpec()],
      metrics_specs=[tfma.MetricsSpec(metrics=[
          tfma.MetricConfig(class_name='ExampleCount'),
          tfma.MetricConfig(class_name='BinaryAccuracy'),
          tfma.MetricConfig(
              class_name='AUC',
              threshold=tfma.MetricThreshold(
                  value_threshold=tfma.GenericValueThreshold(
                      lower_bound={'value': auc_threshold}))),
      ])])
  evaluator = Evaluator(examples=example_gen.outputs['examples'],
                        model=trainer.outputs['model'],
                        eval_config=eval_config)
  pusher = Pusher(
      model=trainer.outputs['model'],
      model_blessing=evaluator.outputs['blessing'],
      push_destination=pusher_pb2.PushDestination(
          filesystem=pusher_pb2.PushDestination.Filesystem(
              base_directory=serving_model_dir)))
  return [evaluator, pusher]


def run(output_dir: str, module_file: str = SPEC_MODULE_FILE,
        rows: Optional[int] = None, train_steps: int = 100,
        eval_steps: int = 10, keras_version: Optional[str] = None,
        auc_threshold: float = 0.5,
        backend: Optional[str] = None) -> dict:
  """Writes the data, runs the pipeline; returns the output paths, the
  eval metrics, the blessing and the pushed model."""
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # pylint: disable=g-import-not-at-top
  from pipelines.penguin_pipeline_local import summarize  # pylint: disable=g-import-not-at-top
  output_dir = os.path.abspath(output_dir)
  paths = {'pipeline_root': os.path.join(output_dir, 'pipeline_root'),
           'metadata_path': os.path.join(output_dir, 'metadata.sqlite'),
           'serving_model_dir': os.path.join(output_dir, 'serving_model')}
  LocalDagRunner().run(create_pipeline(
      'taxi_generic_trainer', paths['pipeline_root'],
      write_taxi_csv(os.path.join(output_dir, 'data'), rows), module_file,
      paths['metadata_path'], train_steps, eval_steps, keras_version,
      paths['serving_model_dir'], auc_threshold, backend))
  return {**paths, **summarize(paths['metadata_path'])}


MODULES = {'spec': (SPEC_MODULE_FILE, None),
           'wide_deep': (WIDE_DEEP_MODULE_FILE, None),
           'tfx': (None, 'tf_keras')}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--output-dir', default='taxi_output')
  parser.add_argument('--module', choices=sorted(MODULES), default='spec',
                      help='spec: module_files/taxi_spec.py; wide_deep: '
                      'module_files/taxi_wide_deep.py (canned); tfx: TFX\'s '
                      'own native-Keras taxi module, under tf.keras 2')
  parser.add_argument('--rows', type=int, default=None)
  parser.add_argument('--train-steps', type=int, default=100)
  parser.add_argument('--eval-steps', type=int, default=10)
  parser.add_argument('--verbose', action='store_true',
                      help='Show every line instead of writing them to '
                      'OUTPUT_DIR/pipeline.log.')
  args = parser.parse_args(argv)
  from generic_trainer.system import console  # pylint: disable=g-import-not-at-top
  module, keras_version = MODULES[args.module]
  module = module or tfx_module_file()
  result = {}

  def body(say, log_path):
    from pipelines.penguin_pipeline_local import summary_lines  # pylint: disable=g-import-not-at-top
    result.update(run(args.output_dir, module, args.rows, args.train_steps,
                      args.eval_steps, keras_version=keras_version))
    for line in summary_lines('Taxi pipeline', result, log_path):
      say(line)

  ok = console.run_pipeline(f'Taxi pipeline ({os.path.basename(module)})',
                            args.output_dir, args.verbose, body)
  return 0 if ok and result['pushed_model'] else 1


if __name__ == '__main__':
  from generic_trainer.usercode import stray_threads  # pylint: disable=g-import-not-at-top
  stray_threads.end_process(main())
