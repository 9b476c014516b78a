"""GenericTrainer's arguments refused when the component is built, each
named with what it takes: an input wired to the wrong channel, a component
instead of its channel, a parameter of the wrong type; a module file given
as a path object read as meant. (tests/test_component.py holds the
constructor's parity with TFX's Trainer.)"""

import pytest

from conftest import PENGUIN_MODULE
from message_parts import assert_four_parts
from generic_trainer.errors import InvalidArgumentError


# Wrong wiring is named at construction.
def test_examples_wired_to_a_schema_channel_is_named_at_construction():
  """examples=schema_gen.outputs['schema']: our error naming the input, the
  type it takes and the type it got, instead of TFX's bare TypeError."""
  from tfx.components import SchemaGen  # pylint: disable=g-import-not-at-top
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  schema_gen = SchemaGen(
      statistics=Channel(type=standard_artifacts.ExampleStatistics))
  with pytest.raises(InvalidArgumentError) as raised:
    GenericTrainer(examples=schema_gen.outputs['schema'],
                   module_file=PENGUIN_MODULE)
  message = str(raised.value)
  assert message == (
      "'examples' is wired to a channel of Schema artifacts "
      "(SchemaGen.outputs['schema']), which GenericTrainer cannot read as "
      'examples. Expected a channel of Examples artifacts. Received: '
      "examples=a channel of Schema artifacts (SchemaGen.outputs['schema'])."
      " Connect example_gen.outputs['examples'] (or Transform's "
      "outputs['transformed_examples']) to examples.")
  assert isinstance(raised.value.__cause__, TypeError)
  assert_four_parts(message)


@pytest.mark.parametrize('name', ['schema', 'transform_graph', 'base_model',
                                  'hyperparameters', 'statistics'])
def test_every_input_of_the_wrong_type_is_named(name):
  """Any input given a channel of another artifact type is refused with its
  own name and the output to connect."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  examples = Channel(type=standard_artifacts.Examples)
  with pytest.raises(InvalidArgumentError,
                     match=rf"^'{name}' is wired to a channel of Examples "
                     r'artifacts, which GenericTrainer cannot read as') as e:
    GenericTrainer(examples=examples, module_file=PENGUIN_MODULE,
                   **{name: examples})
  assert_four_parts(str(e.value))


def test_a_component_instead_of_its_channel_is_named():
  """examples=example_gen (the component): told to pass its output."""
  from tfx.components import CsvExampleGen  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  example_gen = CsvExampleGen(input_base='/tmp/data')
  with pytest.raises(InvalidArgumentError,
                     match=r"^'examples' is wired to the CsvExampleGen "
                     r"component itself \(its outputs: \['examples'\]\), not "
                     r'one of its output channels') as e:
    GenericTrainer(examples=example_gen, module_file=PENGUIN_MODULE)
  assert_four_parts(str(e.value))


def test_a_module_file_given_as_a_path_object_is_read_as_meant():
  """module_file=pathlib.Path(...): taken as its str, not TFX's TypeError."""
  import pathlib  # pylint: disable=g-import-not-at-top
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  trainer = GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                           module_file=pathlib.Path(PENGUIN_MODULE))
  assert trainer.exec_properties['module_file'] == PENGUIN_MODULE


def test_a_parameter_of_the_wrong_type_is_named():
  """module_path=5: our error naming the parameter and the type, not TFX's
  bare TypeError from the spec."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  with pytest.raises(InvalidArgumentError) as e:
    GenericTrainer(examples=Channel(type=standard_artifacts.Examples),
                   module_path=5)
  assert str(e.value) == (
      "'module_path' has the wrong type for GenericTrainer. Expected <class "
      "'str'>. Received: module_path=5. Pass a value of that type (a path as "
      'a str).')
  assert isinstance(e.value.__cause__, TypeError)
  assert_four_parts(str(e.value))
