"""Continuous training of the penguin TrainSpec: a run a day, on a rolling
window of spans, warm-started from the last blessed model.

The penguin rows are split into three spans (days) written as ExampleGen
reads spans: `data/span-1/penguins.csv`, `span-2/...`. The run of day N
writes the spans up to N, then:

    CsvExampleGen (span pattern span-{SPAN}/*: ingests the newest span)
    StatisticsGen, SchemaGen (on the newest span)
    Resolver: the last two spans (a rolling window of Examples)
    Resolver: the latest blessed model
    Resolver: the latest ParsedRows (the rows the last training parsed)
    GenericTrainer (the window; the blessed model as base_model: warm start
                    and the signature gate; the spans of the window the
                    last run parsed are read back, not parsed again)
    Evaluator (the newest span; accuracy >= 0.6 and no worse than the
               blessed model by more than 0.05)
    Pusher

    python -m pipelines.penguin_ct_pipeline_local --day 1 --output-dir ct
    python -m pipelines.penguin_ct_pipeline_local --day 2 --output-dir ct
    python -m pipelines.penguin_ct_pipeline_local --day 3 --output-dir ct

Each day's run uses the same output folder (metadata store, pipeline root),
as a scheduler's daily runs would.
"""

import argparse
import csv
import os
from typing import Optional

from pipelines import penguin_pipeline_local

_HERE = os.path.dirname(os.path.abspath(__file__))
SPEC_MODULE_FILE = os.path.join(os.path.dirname(_HERE), 'module_files',
                                'penguin_spec.py')
PIPELINE_NAME = 'penguin_continuous_training'
DAYS = 3
WINDOW_SPANS = 2
TRAIN_STEPS = 100


def write_spans(data_root: str, day: int) -> str:
  """Writes the spans of days 1..`day` (a third of the rows each, every
  third row, so each day has every species); returns `data_root`."""
  from pipelines.penguin_data import write_penguin_csv  # pylint: disable=g-import-not-at-top
  with open(write_penguin_csv(os.path.join(data_root, '.all'))) as f:
    rows = list(csv.reader(f))
  header, rows = rows[0], rows[1:]
  for span in range(1, day + 1):
    folder = os.path.join(data_root, f'span-{span}')
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, 'penguins.csv'), 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(header)
      writer.writerows(rows[span - 1::DAYS])
  return data_root


def create_pipeline(pipeline_root: str, data_root: str, module_file: str,
                    serving_model_dir: str, metadata_path: str,
                    train_steps: Optional[int] = TRAIN_STEPS):
  """The pipeline of one day's run (see the module docstring).

  `train_steps`: train_args.num_steps, spread over the spec's epochs; None
  reads the window once per epoch.
  """
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  from tfx.components import CsvExampleGen, Evaluator, Pusher, SchemaGen, StatisticsGen  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.dsl.components.common import resolver  # pylint: disable=g-import-not-at-top
  from tfx.dsl.input_resolution.strategies import latest_artifact_strategy  # pylint: disable=g-import-not-at-top
  from tfx.dsl.input_resolution.strategies import latest_blessed_model_strategy  # pylint: disable=g-import-not-at-top
  from tfx.dsl.input_resolution.strategies import span_range_strategy  # pylint: disable=g-import-not-at-top
  from tfx.orchestration import metadata, pipeline  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.proto import example_gen_pb2, pusher_pb2, range_config_pb2, trainer_pb2  # pylint: disable=g-import-not-at-top,g-multiple-import
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import

  from generic_trainer.component import GenericTrainer, ParsedRows  # pylint: disable=g-import-not-at-top,g-multiple-import

  example_gen = CsvExampleGen(
      input_base=data_root,
      input_config=example_gen_pb2.Input(splits=[
          example_gen_pb2.Input.Split(name='input',
                                      pattern='span-{SPAN}/*')]))
  statistics_gen = StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = SchemaGen(statistics=statistics_gen.outputs['statistics'])
  window = resolver.Resolver(
      strategy_class=span_range_strategy.SpanRangeStrategy,
      config={'range_config': range_config_pb2.RangeConfig(
          rolling_range=range_config_pb2.RollingRange(
              num_spans=WINDOW_SPANS))},
      examples=Channel(type=standard_artifacts.Examples,
                       producer_component_id=example_gen.id)).with_id(
                           'span_window')
  window.add_upstream_node(example_gen)
  blessed = resolver.Resolver(
      strategy_class=latest_blessed_model_strategy.LatestBlessedModelStrategy,
      model=Channel(type=standard_artifacts.Model),
      model_blessing=Channel(type=standard_artifacts.ModelBlessing)).with_id(
          'latest_blessed_model')
  parsed_rows = resolver.Resolver(
      strategy_class=latest_artifact_strategy.LatestArtifactStrategy,
      parsed_rows=Channel(type=ParsedRows)).with_id('latest_parsed_rows')
  trainer = GenericTrainer(
      module_file=module_file,
      examples=window.outputs['examples'],
      schema=schema_gen.outputs['schema'],
      base_model=blessed.outputs['model'],
      parsed_rows=parsed_rows.outputs['parsed_rows'],
      train_args=trainer_pb2.TrainArgs(num_steps=train_steps),
      eval_args=trainer_pb2.EvalArgs())
  eval_config = tfma.EvalConfig(
      model_specs=[tfma.ModelSpec(label_key='species')],
      slicing_specs=[tfma.SlicingSpec()],
      metrics_specs=[tfma.MetricsSpec(metrics=[
          tfma.MetricConfig(
              class_name='SparseCategoricalAccuracy',
              threshold=tfma.MetricThreshold(
                  value_threshold=tfma.GenericValueThreshold(
                      lower_bound={'value': 0.6}),
                  # Ignored on day 1, when nothing is blessed yet.
                  change_threshold=tfma.GenericChangeThreshold(
                      direction=tfma.MetricDirection.HIGHER_IS_BETTER,
                      absolute={'value': -0.05}))),
          tfma.MetricConfig(class_name='ExampleCount'),
      ])])
  evaluator = Evaluator(
      examples=example_gen.outputs['examples'],
      model=trainer.outputs['model'],
      baseline_model=blessed.outputs['model'],
      eval_config=eval_config)
  pusher = Pusher(
      model=trainer.outputs['model'],
      model_blessing=evaluator.outputs['blessing'],
      push_destination=pusher_pb2.PushDestination(
          filesystem=pusher_pb2.PushDestination.Filesystem(
              base_directory=serving_model_dir)))
  return pipeline.Pipeline(
      pipeline_name=PIPELINE_NAME, pipeline_root=pipeline_root,
      components=[example_gen, statistics_gen, schema_gen, window, blessed,
                  parsed_rows, trainer, evaluator, pusher],
      metadata_connection_config=metadata.sqlite_metadata_connection_config(
          metadata_path))


def run(output_dir: str, day: int, module_file: str = SPEC_MODULE_FILE,
        train_steps: Optional[int] = TRAIN_STEPS) -> dict:
  """Runs day `day` into `output_dir`; returns what it produced."""
  from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # pylint: disable=g-import-not-at-top
  output_dir = os.path.abspath(output_dir)
  paths = {
      'pipeline_root': os.path.join(output_dir, 'pipeline_root'),
      'metadata_path': os.path.join(output_dir, 'metadata.sqlite'),
      'serving_model_dir': os.path.join(output_dir, 'serving_model'),
  }
  data_root = write_spans(os.path.join(output_dir, 'data'), day)
  LocalDagRunner().run(create_pipeline(
      paths['pipeline_root'], data_root, module_file,
      paths['serving_model_dir'], paths['metadata_path'], train_steps))
  return {**paths, **penguin_pipeline_local.summarize(
      paths['metadata_path'])}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--day', type=int, required=True,
                      choices=range(1, DAYS + 1),
                      help='Which day to run: its span is the newest.')
  parser.add_argument('--output-dir', default='ct_output',
                      help='The folder every day shares (default: '
                      '%(default)s).')
  parser.add_argument('--module-file', default=SPEC_MODULE_FILE)
  parser.add_argument('--verbose', action='store_true',
                      help='Show every line instead of writing them to '
                      'OUTPUT_DIR/pipeline.log.')
  args = parser.parse_args(argv)
  from generic_trainer.system import console  # pylint: disable=g-import-not-at-top
  title = f'Penguin continuous training, day {args.day}'

  def body(say, log_path):
    result = run(args.output_dir, args.day, args.module_file)
    for line in penguin_pipeline_local.summary_lines(title, result, log_path):
      say(line)

  return 0 if console.run_pipeline(title, args.output_dir, args.verbose,
                                   body) else 1


if __name__ == '__main__':
  from generic_trainer.usercode import stray_threads  # pylint: disable=g-import-not-at-top
  stray_threads.end_process(main())
