"""The Chicago taxi pipeline with Transform, run locally with LocalDagRunner.

CsvExampleGen -> StatisticsGen -> SchemaGen -> Transform -> GenericTrainer,
on the taxi CSV that ships inside the `tfx` package. The same pipeline runs
TFX's own native-Keras taxi module (unchanged, with keras_version='tf_keras')
and our TrainSpec module `module_files/taxi_spec.py`:

    python -m pipelines.taxi_pipeline_local --output-dir taxi_output
    python -m pipelines.taxi_pipeline_local --tfx-module --output-dir taxi_tfx
"""

import argparse
import itertools
import os
from typing import Optional

_HERE = os.path.dirname(os.path.abspath(__file__))
SPEC_MODULE_FILE = os.path.join(os.path.dirname(_HERE), 'module_files',
                                'taxi_spec.py')


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


def create_pipeline(pipeline_name: str, pipeline_root: str, data_root: str,
                    module_file: str, metadata_path: str,
                    train_steps: int = 100, eval_steps: int = 10,
                    keras_version: Optional[str] = None):
  """Returns the TFX pipeline; `module_file` serves Transform and trainer."""
  from tfx.components import CsvExampleGen, SchemaGen, StatisticsGen, Transform  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.orchestration import metadata, pipeline  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.proto import trainer_pb2  # pylint: disable=g-import-not-at-top

  from component import GenericTrainer  # pylint: disable=g-import-not-at-top

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
      keras_version=keras_version)
  return pipeline.Pipeline(
      pipeline_name=pipeline_name, pipeline_root=pipeline_root,
      components=[example_gen, statistics_gen, schema_gen, transform,
                  trainer],
      metadata_connection_config=metadata.sqlite_metadata_connection_config(
          metadata_path))


def run(output_dir: str, module_file: str = SPEC_MODULE_FILE,
        rows: Optional[int] = None, train_steps: int = 100,
        eval_steps: int = 10, keras_version: Optional[str] = None) -> dict:
  """Writes the data, runs the pipeline; returns the output paths."""
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # pylint: disable=g-import-not-at-top
  output_dir = os.path.abspath(output_dir)
  paths = {'pipeline_root': os.path.join(output_dir, 'pipeline_root'),
           'metadata_path': os.path.join(output_dir, 'metadata.sqlite')}
  LocalDagRunner().run(create_pipeline(
      'taxi_generic_trainer', paths['pipeline_root'],
      write_taxi_csv(os.path.join(output_dir, 'data'), rows), module_file,
      paths['metadata_path'], train_steps, eval_steps, keras_version))
  return paths


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--output-dir', default='taxi_output')
  parser.add_argument('--tfx-module', action='store_true',
                      help="run TFX's own taxi module under tf.keras 2 "
                      'instead of module_files/taxi_spec.py')
  parser.add_argument('--rows', type=int, default=None)
  parser.add_argument('--train-steps', type=int, default=100)
  parser.add_argument('--verbose', action='store_true',
                      help='Show every line instead of writing them to '
                      'OUTPUT_DIR/pipeline.log.')
  args = parser.parse_args(argv)
  from generic_trainer.local import console  # pylint: disable=g-import-not-at-top
  module, keras_version = ((tfx_module_file(), 'tf_keras') if args.tfx_module
                           else (SPEC_MODULE_FILE, None))
  title = f'Taxi pipeline ({os.path.basename(module)})'

  def body(say, log_path):
    paths = run(args.output_dir, module, args.rows, args.train_steps,
                keras_version=keras_version)
    say('== Taxi pipeline finished')
    say(f"  metadata store (SQLite): {paths['metadata_path']}")
    if log_path:
      say(f'  full log: {log_path}')

  return 0 if console.run_pipeline(title, args.output_dir, args.verbose,
                                   body) else 1


if __name__ == '__main__':
  from generic_trainer.local import console  # pylint: disable=g-import-not-at-top
  console.end_process(main())
