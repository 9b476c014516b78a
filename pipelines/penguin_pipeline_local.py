"""The penguin pipeline, run locally with LocalDagRunner on SQLite metadata.

CsvExampleGen -> StatisticsGen -> SchemaGen -> GenericTrainer -> Evaluator
(TFMA, accuracy threshold) -> Pusher. Run it with

    python -m pipelines.penguin_pipeline_local --output-dir tfx_pipeline_output

(add `--num-workers 2` to train with two local worker processes, or
`--module-file module_files/penguin_spec.py --backend jax` to train the
TrainSpec on Keras's JAX backend, in a child process)

and it prints a line as each component starts and ends, the trainer's
progress, then the eval metrics, whether the model was blessed, where the
pushed model, the metadata store and the full log (`OUTPUT_DIR/pipeline.log`;
`--verbose` shows everything instead) are.
"""

import argparse
import json
import os
from typing import Optional

from generic_trainer.system import console

_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MODULE_FILE = os.path.join(os.path.dirname(_HERE), 'module_files',
                                   'penguin_keras.py')
PIPELINE_NAME = 'penguin_generic_trainer'


def create_pipeline(pipeline_name: str, pipeline_root: str, data_root: str,
                    module_file: Optional[str], serving_model_dir: str,
                    metadata_path: Optional[str], train_steps: int = 100,
                    eval_steps: int = 5, accuracy_threshold: float = 0.6,
                    keras_version: Optional[str] = None,
                    num_workers: Optional[int] = None,
                    module_path: Optional[str] = None,
                    baseline: bool = True,
                    evaluate_output: Optional[str] = None,
                    backend: Optional[str] = None,
                    trainer_resources: Optional[dict] = None,
                    trainer_pod_settings: Optional[dict] = None):
  """Returns the TFX pipeline (a `tfx.dsl.Pipeline`).

  `evaluate_output` names the output Evaluator evaluates in a model with
  several (each output is named after its label, `species` here).

  `module_path` (an importable module) replaces `module_file` when given, as
  in the Kubeflow variant, whose image carries the module. Without
  `metadata_path` the orchestrator brings the metadata store (Kubeflow).
  `baseline=False` leaves out the latest-blessed-model Resolver: Evaluator
  then checks the accuracy threshold alone. `backend` is GenericTrainer's
  ('tensorflow' or 'jax'); `trainer_resources` and `trainer_pod_settings`
  its `resources` and `pod_settings` (what a Kubeflow trainer pod asks for
  and carries; a local run ignores them).
  """
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  from tfx.components import CsvExampleGen, Evaluator, Pusher, SchemaGen, StatisticsGen  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.dsl.components.common import resolver  # pylint: disable=g-import-not-at-top
  from tfx.dsl.input_resolution.strategies import latest_blessed_model_strategy  # pylint: disable=g-import-not-at-top
  from tfx.orchestration import metadata, pipeline  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.proto import pusher_pb2, trainer_pb2  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import

  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top

  example_gen = CsvExampleGen(input_base=data_root)
  statistics_gen = StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = SchemaGen(statistics=statistics_gen.outputs['statistics'])
  trainer = GenericTrainer(
      module_file=None if module_path else module_file,
      module_path=module_path,
      examples=example_gen.outputs['examples'],
      schema=schema_gen.outputs['schema'],
      statistics=statistics_gen.outputs['statistics'],
      train_args=trainer_pb2.TrainArgs(num_steps=train_steps),
      eval_args=trainer_pb2.EvalArgs(num_steps=eval_steps),
      keras_version=keras_version,
      num_workers=num_workers,
      backend=backend,
      resources=trainer_resources,
      pod_settings=trainer_pod_settings)
  model_resolver = resolver.Resolver(
      strategy_class=latest_blessed_model_strategy.LatestBlessedModelStrategy,
      model=Channel(type=standard_artifacts.Model),
      model_blessing=Channel(type=standard_artifacts.ModelBlessing)).with_id(
          'latest_blessed_model_resolver')
  model_spec = (tfma.ModelSpec(label_keys={evaluate_output: 'species'})
                if evaluate_output else tfma.ModelSpec(label_key='species'))
  eval_config = tfma.EvalConfig(
      model_specs=[model_spec],
      slicing_specs=[tfma.SlicingSpec()],
      metrics_specs=[tfma.MetricsSpec(output_names=(
          [evaluate_output] if evaluate_output else []), metrics=[
          tfma.MetricConfig(
              class_name='SparseCategoricalAccuracy',
              threshold=tfma.MetricThreshold(
                  value_threshold=tfma.GenericValueThreshold(
                      lower_bound={'value': accuracy_threshold}))),
          tfma.MetricConfig(class_name='ExampleCount'),
      ])])
  evaluator = Evaluator(
      examples=example_gen.outputs['examples'],
      model=trainer.outputs['model'],
      baseline_model=model_resolver.outputs['model'] if baseline else None,
      eval_config=eval_config)
  pusher = Pusher(
      model=trainer.outputs['model'],
      model_blessing=evaluator.outputs['blessing'],
      push_destination=pusher_pb2.PushDestination(
          filesystem=pusher_pb2.PushDestination.Filesystem(
              base_directory=serving_model_dir)))
  return pipeline.Pipeline(
      pipeline_name=pipeline_name,
      pipeline_root=pipeline_root,
      components=[example_gen, statistics_gen, schema_gen, trainer] +
      ([model_resolver] if baseline else []) + [evaluator, pusher],
      metadata_connection_config=(
          metadata.sqlite_metadata_connection_config(metadata_path)
          if metadata_path else None))


def run(output_dir: str, train_steps: int = 100, eval_steps: int = 5,
        module_file: str = DEFAULT_MODULE_FILE,
        accuracy_threshold: float = 0.6,
        keras_version: Optional[str] = None,
        num_workers: Optional[int] = None,
        string_labels: bool = False,
        sex: bool = False,
        evaluate_output: Optional[str] = None,
        backend: Optional[str] = None) -> dict:
  """Builds the data (species by name with `string_labels`; with `sex`,
  a second label), runs the pipeline, returns what it produced."""
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # pylint: disable=g-import-not-at-top

  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  output_dir = os.path.abspath(output_dir)
  data_root = os.path.dirname(write_penguin_csv(
      os.path.join(output_dir, 'data'), string_labels=string_labels, sex=sex))
  paths = {
      'pipeline_root': os.path.join(output_dir, 'pipeline_root'),
      'metadata_path': os.path.join(output_dir, 'metadata.sqlite'),
      'serving_model_dir': os.path.join(output_dir, 'serving_model'),
  }
  LocalDagRunner().run(create_pipeline(
      PIPELINE_NAME, paths['pipeline_root'], data_root, module_file,
      paths['serving_model_dir'], paths['metadata_path'], train_steps,
      eval_steps, accuracy_threshold, keras_version, num_workers,
      evaluate_output=evaluate_output, backend=backend))
  return {**paths, **summarize(paths['metadata_path'])}


def summarize(metadata_path: str) -> dict:
  """The latest run's eval metrics, blessing and pushed model, from MLMD."""
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
  config = metadata.sqlite_metadata_connection_config(metadata_path)
  with metadata.Metadata(config) as m:
    def latest(type_name):
      artifacts = m.store.get_artifacts_by_type(type_name)
      return max(artifacts, key=lambda a: a.id) if artifacts else None
    evaluation, blessing, pushed, model = (latest('ModelEvaluation'),
                                           latest('ModelBlessing'),
                                           latest('PushedModel'),
                                           latest('Model'))
  metrics = {}
  if evaluation is not None:
    result = tfma.load_eval_result(evaluation.uri)
    for _, by_output in result.slicing_metrics:
      for _, by_class in by_output.items():
        for _, values in by_class.items():
          for name, value in values.items():
            metrics[name] = value.get('doubleValue', value)
  blessed = bool(blessing and blessing.custom_properties['blessed'].int_value)
  pushed_dir = None
  if pushed is not None and pushed.custom_properties['pushed'].int_value:
    pushed_dir = pushed.custom_properties['pushed_destination'].string_value
  trainer, validated = {}, None
  if model is not None:  # GenericTrainer's record of the training.
    for name, value in model.custom_properties.items():
      if name.startswith(('train_', 'eval_')) and name != 'train_steps':
        trainer[name] = value.double_value or float(value.int_value)
    if 'serving_check' in model.custom_properties:  # Its export checks.
      properties = model.custom_properties
      validated = console.validated_line(
          properties['export_examples_checked'].int_value
          if 'export_examples_checked' in properties else 0,
          json.loads(properties['serving_check'].string_value),
          properties['serving_requests_checked'].int_value)
  return {'metrics': metrics, 'blessed': blessed, 'pushed_model': pushed_dir,
          'trainer': trainer, 'validated': validated}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--output-dir', default='tfx_pipeline_output',
                      help='Folder for data, artifacts, metadata, the log and '
                      'the pushed model (default: %(default)s).')
  parser.add_argument('--train-steps', type=int, default=100)
  parser.add_argument('--eval-steps', type=int, default=5)
  parser.add_argument('--module-file', default=DEFAULT_MODULE_FILE)
  parser.add_argument('--string-labels', action='store_true',
                      help="The species by name ('Adelie'...), for modules "
                      'whose head reads names (module_files/penguin_canned.py).')
  parser.add_argument('--num-workers', type=int, default=None,
                      help='Train with this many local worker processes '
                      '(MultiWorkerMirroredStrategy); default: one process.')
  from generic_trainer.keys import BACKENDS  # pylint: disable=g-import-not-at-top
  parser.add_argument('--backend', default=None, choices=BACKENDS,
                      help="GenericTrainer's Keras backend (default: the "
                      "TrainSpec's, else tensorflow).")
  parser.add_argument('--verbose', action='store_true',
                      help='Show every line (TensorFlow, TFX, absl...) '
                      'instead of writing them to OUTPUT_DIR/pipeline.log.')
  args = parser.parse_args(argv)
  result = {}

  def body(say, log_path):
    result.update(run(args.output_dir, args.train_steps, args.eval_steps,
                      args.module_file, num_workers=args.num_workers,
                      string_labels=args.string_labels,
                      backend=args.backend))
    for line in summary_lines('Penguin pipeline', result, log_path):
      say(line)

  ok = console.run_pipeline(
      f'Penguin pipeline ({os.path.relpath(args.module_file)})',
      args.output_dir, args.verbose, body)
  return 0 if ok and result['pushed_model'] else 1


def summary_lines(title: str, result: dict, log_path: Optional[str]):
  """The lines that end a run: metrics, blessing, where things are."""
  lines = [f'== {title} finished']
  if result.get('trainer'):
    lines.append('  trainer: ' + ', '.join(
        f'{k}={v:.4g}' for k, v in sorted(result['trainer'].items())))
  if result.get('validated'):
    lines.append(f"  trainer's {result['validated']}")
  for name, value in sorted(result['metrics'].items()):
    lines.append(f'  eval {name}: {value}')
  lines.append(f"  blessed by Evaluator: {result['blessed']}")
  lines.append(f"  pushed model: {result['pushed_model'] or 'not pushed'}")
  lines.append(f"  metadata store (SQLite): {result['metadata_path']}")
  if log_path:
    lines.append(f'  full log: {log_path}')
  return lines


if __name__ == '__main__':
  from generic_trainer.usercode import stray_threads  # pylint: disable=g-import-not-at-top
  stray_threads.end_process(main())
