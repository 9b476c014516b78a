"""Serialized tf.Examples for calling a model (`data.serving_examples`):
typed as the schema says, a value of the wrong type named with its row."""

import os

import pytest

from message_parts import assert_four_parts


def test_a_float_for_an_int64_feature_is_refused_naming_the_row(tmp_path):
  """tf_examples builds serialized tf.Examples typed as the schema says,
  and refuses a float for an INT feature (TensorFlow would say "Data types
  don't match" from inside the signature) naming the row and the fix."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  from generic_trainer import InvalidArgumentError, tf_examples  # pylint: disable=g-import-not-at-top,g-multiple-import
  schema = schema_pb2.Schema()
  schema.feature.add(name='bill_length_mm', type=schema_pb2.FLOAT)
  schema.feature.add(name='body_mass_g', type=schema_pb2.INT)
  schema.feature.add(name='island', type=schema_pb2.BYTES)
  (serialized,) = tf_examples(
      [{'bill_length_mm': 39, 'body_mass_g': 3750, 'island': 'Biscoe'}],
      schema)
  parsed = tf.train.Example.FromString(serialized).features.feature
  assert list(parsed['body_mass_g'].int64_list.value) == [3750]
  assert list(parsed['bill_length_mm'].float_list.value) == [39.0]
  assert list(parsed['island'].bytes_list.value) == [b'Biscoe']
  with pytest.raises(InvalidArgumentError) as e:
    tf_examples([{'body_mass_g': 3750}, {'body_mass_g': 3750.5}], schema)
  assert str(e.value) == (
      "Row 1 gives the feature 'body_mass_g' the value 3750.5, a float, but "
      "'body_mass_g' is INT in the schema: a tf.Example carries it as an "
      'int64_list, and the serving signature would refuse another type with '
      "TensorFlow's \"Data types don't match\". Expected an int for "
      "'body_mass_g'. Received: body_mass_g=3750.5 (float). Pass an int "
      '(3750 or 3751, as you mean it), or make the feature FLOAT in the '
      'schema and train again.')
  assert_four_parts(str(e.value))
  with pytest.raises(InvalidArgumentError, match=r"did you mean "
                     r"'body_mass_g'\?"):
    tf_examples([{'body_mass': 3750}], schema)


def test_a_row_without_a_feature_the_model_requires_is_refused(
    tmp_path, penguin_csvs):
  """Given the export, a row lacking a feature its serving_default parses
  as required is refused naming the row and the feature, where the real
  signature fails with TensorFlow's "is required but could not be found";
  the label, which serving does not read, may be left out."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from generic_trainer import Estimator, InvalidArgumentError, tf_examples  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.canned import LinearClassifierSpec  # pylint: disable=g-import-not-at-top

  class Spec(LinearClassifierSpec):
    label_key = 'species'
    feature_keys = ['bill_length_mm', 'body_mass_g']
    checkpoint = None
  est = Estimator(Spec, str(tmp_path / 'est'))
  est.train(penguin_csvs[0], steps=2)
  model_dir = est.export()
  schema_path = os.path.join(str(tmp_path / 'est'), 'schema.pbtxt')
  whole = {'bill_length_mm': 39.1, 'body_mass_g': 3750}
  serving_default = tf.saved_model.load(model_dir).signatures[
      'serving_default']
  serving_default(examples=tf.constant(tf_examples([whole], schema_path,
                                                   model_dir)))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match='is required but could not be found'):
    serving_default(examples=tf.constant(tf_examples(
        [{'body_mass_g': 3750}], schema_path)))
  with pytest.raises(InvalidArgumentError) as e:
    tf_examples([whole, {'body_mass_g': 3750}], schema_path, model_dir)
  assert str(e.value) == (
      "Row 1 lacks 'bill_length_mm', which the model's serving_default (in "
      f'{model_dir}) parses without a default: the signature would refuse '
      "the whole request with TensorFlow's \"is required but could not be "
      "found\". Expected every row to carry 'bill_length_mm'. Received: row "
      "1 with body_mass_g. Give each row a value for 'bill_length_mm' (the "
      'model reads it), or train a model that does without it.')
  assert_four_parts(str(e.value))


def test_without_the_model_a_row_lacking_what_another_carries_is_refused(
    tmp_path):
  """Without the export, the schema cannot tell a label from a feature: a
  required feature every row leaves out passes (the label), one that a
  row carries and another lacks is refused."""
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  from generic_trainer import InvalidArgumentError, tf_examples  # pylint: disable=g-import-not-at-top,g-multiple-import
  schema = schema_pb2.Schema()
  for name in ('x', 'label'):
    feature = schema.feature.add(name=name, type=schema_pb2.FLOAT)
    feature.presence.min_fraction = 1.0
  assert len(tf_examples([{'x': 1.0}, {'x': 2.0}], schema)) == 2
  with pytest.raises(InvalidArgumentError, match=(
      r"^Row 1 lacks 'x', which the schema requires in every example "
      r'\(presence min_fraction 1\) and another row of this call carries:')):
    tf_examples([{'x': 1.0}, {'x': None}], schema)
