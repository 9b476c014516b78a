"""Serialized tf.Examples for calling a model (`data.serving_examples`):
typed as the schema says, a value of the wrong type named with its row."""

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
