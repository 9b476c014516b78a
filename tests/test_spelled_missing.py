"""String columns of numbers whose missing values were spelled out
(`data.spelled_missing`), found in the first records of a real TFRecord
file, whether its features keep one kind in every record or not; such a
column ExampleGen read as strings is refused before a pipeline's run_fn."""

import os

import pytest
import tensorflow as tf

from generic_trainer.data import spelled_missing
from generic_trainer.data import tfrecords
from message_parts import assert_four_parts


def _example(**features):
  feature = {}
  for name, value in features.items():
    if isinstance(value, bytes):
      feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[value]))
    else:
      feature[name] = tf.train.Feature(float_list=tf.train.FloatList(
          value=[value]))
  return tf.train.Example(features=tf.train.Features(feature=feature))


def _file(tmp_path, examples):
  path = str(tmp_path / 'data.gz')
  with tfrecords.writer(path) as writer:
    for example in examples:
      writer.write(example.SerializeToString())
  return path


def test_a_column_of_numbers_and_na_is_named(tmp_path):
  path = _file(tmp_path, [
      _example(bill=b'39.1', island=b'Biscoe', mass=3750.0),
      _example(bill=b'NA', island=b'Dream', mass=3800.0),
      _example(bill=b' n/a ', island=b'NA', mass=3250.0)])
  problem = spelled_missing.problem(path)
  assert problem.startswith("the column(s) ['bill'] hold numbers")
  assert "'bill' ('NA', 'n/a')" in problem  # Stripped, as read.


def test_words_numbers_or_spellings_alone_are_not_named(tmp_path):
  path = _file(tmp_path, [
      _example(name=b'Adelie', number=b'1.5', missing=b'NA'),
      _example(name=b'NA', number=b'2', missing=b'?')])
  assert spelled_missing.problem(path) is None


def test_a_feature_of_another_kind_in_another_record_is_still_read(
    tmp_path, monkeypatch):
  """tfx_bsl's decoder refuses such a file; the records are read one by
  one instead."""
  path = _file(tmp_path, [_example(bill=b'39.1', flipper=b'181'),
                          _example(bill=b'NA', flipper=181.0)])
  one_by_one = []
  real = spelled_missing._string_values_one_by_one  # pylint: disable=protected-access
  monkeypatch.setattr(spelled_missing, '_string_values_one_by_one',
                      lambda records: one_by_one.append(1) or real(records))
  problem = spelled_missing.problem(path)
  assert problem.startswith("the column(s) ['bill'] hold numbers")
  assert one_by_one == [1]


def test_a_feature_missing_or_empty_in_some_records_is_read_too(tmp_path):
  empty = _example(bill=b'1')
  del empty.features.feature['bill'].bytes_list.value[:]
  path = _file(tmp_path, [_example(island=b'Biscoe'), empty,
                          _example(bill=b'39.1'), _example(bill=b'NA')])
  assert spelled_missing.problem(path).startswith(
      "the column(s) ['bill'] hold numbers")


def test_only_the_first_records_are_read(tmp_path, monkeypatch):
  """2,000 records, or fewer past 8 MiB: a spelling after them is not
  seen."""
  path = _file(tmp_path, [_example(bill=b'39.1')] * 10 + [
      _example(bill=b'NA')])
  assert spelled_missing.problem(path) is not None
  monkeypatch.setattr(spelled_missing, '_RECORDS', 10)
  assert spelled_missing.problem(path) is None
  monkeypatch.setattr(spelled_missing, '_RECORDS', 2000)
  monkeypatch.setattr(spelled_missing, '_RECORD_BYTES', 1)
  assert spelled_missing.problem(path) is None


def test_a_file_of_numbers_only_or_no_records_has_no_problem(tmp_path):
  assert spelled_missing.problem(_file(tmp_path, [
      _example(x=1.0, y=2.0)] * 50)) is None
  assert spelled_missing.problem(_file(tmp_path, [])) is None


def _bytes_examples(tmp_path, rows):
  """An Examples artifact whose train and eval splits hold `rows` ({name:
  text}) as bytes features, as CsvExampleGen writes a column of words."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / 'examples')
  examples.split_names = '["train", "eval"]'
  for split in ('train', 'eval'):
    os.makedirs(os.path.join(examples.uri, f'Split-{split}'))
    path = os.path.join(examples.uri, f'Split-{split}', 'data.gz')
    with tf.io.TFRecordWriter(path, options='GZIP') as writer:
      for row in rows:
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            name: tf.train.Feature(bytes_list=tf.train.BytesList(
                value=[value.encode()])) for name, value in row.items()}
        )).SerializeToString())
  return examples


def test_numbers_with_na_read_as_strings_by_example_gen_are_refused(
    trainer_io, tmp_path):
  """In a pipeline, CsvExampleGen read a column of numbers with 'NA' as
  strings: refused before run_fn, naming the column and the spelling."""
  from conftest import TESTDATA  # pylint: disable=g-import-not-at-top
  from generic_trainer.errors import InputArtifactError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples = _bytes_examples(tmp_path, [
      {'island': 'Biscoe', 'bill_length_mm': '39.1'},
      {'island': 'Dream', 'bill_length_mm': 'NA'}])
  io = trainer_io(module_file=os.path.join(TESTDATA, 'records_fn_args.py'))
  io[0]['examples'] = [examples]
  del io[0]['schema']
  with pytest.raises(InputArtifactError) as e:
    GenericExecutor().Do(*io)
  message = str(e.value)
  assert message.endswith(
      "the column(s) ['bill_length_mm'] hold numbers, and missing values "
      "spelled out as words: 'bill_length_mm' ('NA'); CsvExampleGen read "
      'those columns as strings, so a model would take the numbers as names '
      'or fail to cast them. Expected numbers, with a missing value left '
      "empty. Received: string features ['bill_length_mm']. Leave missing "
      'values empty in the CSV (pandas: pd.read_csv(path).to_csv(new_path, '
      'index=False) writes NA as an empty cell) and run ExampleGen again.')
  assert_four_parts(message)
