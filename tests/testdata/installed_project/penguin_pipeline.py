"""A TFX project's penguin pipeline with GenericTrainer from the installed
wheel: CsvExampleGen -> GenericTrainer -> Evaluator -> Pusher, run with
LocalDagRunner (docs/getting-started/install.md).

    python penguin_pipeline.py OUTPUT_DIR

writes the penguin CSV (from the palmerpenguins package), runs the pipeline
and prints one JSON line: blessed, the pushed model, and where
generic_trainer was imported from.
"""

import csv
import importlib.resources
import json
import os
import sys

from tfx import v1 as tfx
import tensorflow_model_analysis as tfma

from generic_trainer.component import GenericTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS = ['species', 'bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
           'body_mass_g']
SPECIES = ['Adelie', 'Chinstrap', 'Gentoo']
# What CsvExampleGen makes of the CSV (ints stay ints); no StatisticsGen.
SCHEMA = ''.join(
    f'feature {{ name: "{name}" type: {kind} '
    'presence { min_fraction: 1.0 } shape { dim { size: 1 } } }\n'
    for name, kind in [('species', 'INT'), ('bill_length_mm', 'FLOAT'),
                       ('bill_depth_mm', 'FLOAT'),
                       ('flipper_length_mm', 'INT'), ('body_mass_g', 'INT')])


def write_data(data_dir: str) -> None:
  """penguins.csv with the species as 0, 1, 2 and no missing values."""
  source = importlib.resources.files('palmerpenguins') / 'data/penguins.csv'
  os.makedirs(data_dir, exist_ok=True)
  with source.open() as src, open(os.path.join(data_dir, 'penguins.csv'),
                                  'w', newline='') as dst:
    writer = csv.writer(dst)
    writer.writerow(COLUMNS)
    for row in csv.DictReader(src):
      values = [row[c] for c in COLUMNS[1:]]
      if row['species'] in SPECIES and 'NA' not in values:
        writer.writerow([SPECIES.index(row['species'])] + values)


def create_pipeline(root: str) -> tfx.dsl.Pipeline:
  schema_file = os.path.join(root, 'schema.pbtxt')
  with open(schema_file, 'w') as f:
    f.write(SCHEMA)
  example_gen = tfx.components.CsvExampleGen(
      input_base=os.path.join(root, 'data'))
  schema_gen = tfx.components.ImportSchemaGen(schema_file=schema_file)
  trainer = GenericTrainer(
      module_file=os.path.join(HERE, 'penguin_module.py'),
      examples=example_gen.outputs['examples'],
      schema=schema_gen.outputs['schema'],
      train_args=tfx.proto.TrainArgs(num_steps=100),
      eval_args=tfx.proto.EvalArgs(num_steps=5))
  evaluator = tfx.components.Evaluator(
      examples=example_gen.outputs['examples'],
      model=trainer.outputs['model'],
      eval_config=tfma.EvalConfig(
          model_specs=[tfma.ModelSpec(label_key='species')],
          slicing_specs=[tfma.SlicingSpec()],
          metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(
              class_name='SparseCategoricalAccuracy',
              threshold=tfma.MetricThreshold(
                  value_threshold=tfma.GenericValueThreshold(
                      lower_bound={'value': 0.6})))])]))
  pusher = tfx.components.Pusher(
      model=trainer.outputs['model'],
      model_blessing=evaluator.outputs['blessing'],
      push_destination=tfx.proto.PushDestination(
          filesystem=tfx.proto.PushDestination.Filesystem(
              base_directory=os.path.join(root, 'serving_model'))))
  return tfx.dsl.Pipeline(
      pipeline_name='penguin', pipeline_root=os.path.join(root, 'pipeline'),
      components=[example_gen, schema_gen, trainer, evaluator, pusher],
      metadata_connection_config=(
          tfx.orchestration.metadata.sqlite_metadata_connection_config(
              os.path.join(root, 'metadata.sqlite'))))


def outcome(root: str) -> dict:
  """Whether the model was blessed, and where it was pushed (from MLMD)."""
  from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
  import generic_trainer  # pylint: disable=g-import-not-at-top
  config = metadata.sqlite_metadata_connection_config(
      os.path.join(root, 'metadata.sqlite'))
  with metadata.Metadata(config) as m:
    blessing, = m.store.get_artifacts_by_type('ModelBlessing')
    pushed, = m.store.get_artifacts_by_type('PushedModel')
  return {
      'blessed': bool(blessing.custom_properties['blessed'].int_value),
      'pushed': (pushed.custom_properties['pushed_destination'].string_value
                 if pushed.custom_properties['pushed'].int_value else None),
      'generic_trainer': generic_trainer.__file__,
      'version': generic_trainer.__version__}


if __name__ == '__main__':
  output = os.path.abspath(sys.argv[1])
  write_data(os.path.join(output, 'data'))
  tfx.orchestration.LocalDagRunner().run(create_pipeline(output))
  print(json.dumps(outcome(output)))
