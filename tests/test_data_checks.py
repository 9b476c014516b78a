"""The data checked before training (docs/guides/data-checks.md): a schema
that does not parse or does not match the records, TFRecords that hold no
tf.Example or are cut short, columns glued by a split at the wrong
delimiter; through the command and the component."""

import os

import pytest

from command_line import main as _main
from conftest import REPO
from conftest import penguin_text as _penguin_text
from message_parts import assert_four_parts

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def test_schema_types_that_disagree_with_the_data_are_named(
    tmp_path, penguin_csvs, capsys):
  """A --schema saying BYTES for a column of numbers the model casts:
  the feature, both sides and the fix, not TensorFlow's UnimplementedError
  from a function_node."""
  fields = ''.join(
      f'feature {{ name: "{name}" type: {kind} presence {{ min_fraction: 1.0 '
      '} shape { dim { size: 1 } } }\n' for name, kind in (
          ('species', 'INT'), ('bill_length_mm', 'BYTES'),
          ('bill_depth_mm', 'FLOAT'), ('flipper_length_mm', 'INT'),
          ('body_mass_g', 'INT')))
  schema = tmp_path / 'schema.pbtxt'
  schema.write_text(fields)
  path = tmp_path / 'train.csv'
  path.write_text(_penguin_text(penguin_csvs))
  out = tmp_path / 'out'
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(path),
               '--schema', str(schema), '--output-dir', str(out),
               '--steps', '5') == 1
  err = capsys.readouterr().err
  message = [l for l in err.splitlines() if 'generic-trainer:' in l][0]
  assert message.startswith(
      "generic-trainer: InputArtifactError: The schema and the data disagree "
      f"on ['bill_length_mm']: {out}/schema/schema.pbtxt says BYTES "
      '(strings), the data holds numbers, and the model casts them to '
      'numbers, which TensorFlow cannot do (Cast string to float is not '
      "supported). Expected the type FLOAT or INT for ['bill_length_mm'] in ")
  assert ('Set `type: FLOAT` (or INT) for those features in the schema, or '
          'leave --schema out to infer the types from the data.') in message
  assert 'function_node' not in err and 'Traceback' not in err
  assert_four_parts(message)


def test_examples_of_a_csv_split_at_the_wrong_delimiter_are_refused(
    trainer_io, tmp_path):
  """In a pipeline, CsvExampleGen split a ';' file at commas: one feature
  named after the whole header. The trainer refuses it before run_fn, naming
  ';' and what to do."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from conftest import TESTDATA  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / 'examples')
  examples.split_names = '["train", "eval"]'
  name = 'species;bill_length_mm;body_mass_g'
  for split in ('train', 'eval'):
    os.makedirs(os.path.join(examples.uri, f'Split-{split}'))
    path = os.path.join(examples.uri, f'Split-{split}', 'data.gz')
    with tf.io.TFRecordWriter(path, options='GZIP') as writer:
      for line in ('0;39.1;3750', '1;46.5;3500'):
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[line.encode()]))})).SerializeToString())
  io = trainer_io(module_file=os.path.join(TESTDATA, 'records_fn_args.py'))
  io[0]['examples'] = [examples]
  del io[0]['schema']
  with pytest.raises(InputArtifactError) as e:
    GenericExecutor().Do(*io)
  message = str(e.value)
  assert message.endswith(
      "record 0: the feature 'species;bill_length_mm;body_mass_g' is a whole "
      "CSV header: the CSV was split at commas, but it is separated by ';'. "
      'Expected one feature per column (species, bill_length_mm, '
      "body_mass_g). Received: one feature holding whole lines ('0;39.1;"
      "3750'). Re-save the CSV with commas (pandas: pd.read_csv(path, "
      "sep=';').to_csv(new_path, index=False)) and run ExampleGen again: "
      'CsvExampleGen splits at commas only.')
  assert_four_parts(message)
  assert not os.path.exists(os.path.join(io[1]['model_run'][0].uri,
                                         'fn_args.json'))


def test_schema_that_does_not_parse_names_the_line(tmp_path, penguin_csvs,
                                                   capsys):
  """A schema file with a typo: the file and line, not a bare ParseError."""
  schema = tmp_path / 'schema.pbtxt'
  schema.write_text('feature {\n  name: "species"\n  type: INTEGER\n}\n')
  assert _main('--module-file', SPEC_MODULE, '--train-data', penguin_csvs[0],
               '--schema', str(schema), '--output-dir',
               str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert (f'InputArtifactError: The schema file {schema} does not parse, at '
          'line 3, column 9: ') in err
  assert 'has no value named INTEGER' in err


def _penguin_records(tmp_path, penguin_artifacts):
  examples, _ = penguin_artifacts
  return os.path.join(examples.uri, 'Split-train', 'data.gz')


def test_tfrecords_that_hold_no_tf_example(tmp_path, capsys):
  """TFRecords of something else than tf.Example: the file and record."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / 'not_examples.tfrecord')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(b'\xff\xfe this is not a protocol buffer')
  assert _main('--module-file', SPEC_MODULE, '--train-data', path,
               '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert err.startswith(f'generic-trainer: InputArtifactError: {path}, record '
                        '0, is not a tf.Example (DecodeError')
  assert 'Traceback' not in err


def test_truncated_gzip_tfrecords_are_named_before_training(
    tmp_path, penguin_artifacts, capsys):
  """A gzip TFRecord file cut short past its first records: named first."""
  source = _penguin_records(tmp_path, penguin_artifacts)
  with open(source, 'rb') as f:
    data = f.read()
  path = tmp_path / 'cut.gz'
  path.write_bytes(data[:len(data) * 2 // 3])
  assert _main('--module-file', SPEC_MODULE, '--train-data', str(path),
               '--output-dir', str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert err.startswith(f'generic-trainer: InputArtifactError: {path} is not '
                        'a readable gzip TFRecord file: ')
  assert 'Traceback' not in err


def test_schema_that_does_not_match_the_data(tmp_path, penguin_artifacts,
                                             capsys):
  """A given schema that says FLOAT where the data holds ints: the file,
  record and feature, before TensorFlow parses anything."""
  examples, schema = penguin_artifacts
  text = open(os.path.join(schema.uri, 'schema.pbtxt')).read()
  wrong = tmp_path / 'schema.pbtxt'
  wrong.write_text(text.replace('name: "body_mass_g"\n  type: INT',
                                'name: "body_mass_g"\n  type: FLOAT'))
  assert 'FLOAT' in wrong.read_text()
  train = _penguin_records(tmp_path, penguin_artifacts)
  assert _main('--module-file', SPEC_MODULE, '--train-data', train,
               '--schema', str(wrong), '--output-dir',
               str(tmp_path / 'out')) == 1
  err = capsys.readouterr().err
  assert (f'InputArtifactError: The Split-train data does not match the '
          f'schema (the schema {wrong}): {train}, record 0: feature '
          "'body_mass_g' holds ints; the schema says floats.") in err


def test_component_checks_the_data_against_the_schema(trainer_io, tmp_path,
                                                      penguin_artifacts):
  """The same mismatch through the component (a TrainSpec): named before
  training, nothing published."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  _, schema = penguin_artifacts
  text = open(os.path.join(schema.uri, 'schema.pbtxt')).read()
  wrong = standard_artifacts.Schema()
  wrong.uri = str(tmp_path / 'wrong_schema')
  os.makedirs(wrong.uri)
  with open(os.path.join(wrong.uri, 'schema.pbtxt'), 'w') as f:
    f.write(text.replace('name: "species"\n  type: INT',
                         'name: "species"\n  type: BYTES'))
  io = trainer_io(module_file=SPEC_MODULE)
  io[0]['schema'] = [wrong]
  with pytest.raises(InputArtifactError, match=(
      r"The train data does not match the schema \(.*wrong_schema.*\): .*"
      r"Split-train.*record 0: feature 'species' holds ints; the schema says "
      r'bytes')):
    GenericExecutor().Do(*io)
