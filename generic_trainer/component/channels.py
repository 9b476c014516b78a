"""The input channels of GenericTrainer, checked at construction.

TFX's ComponentSpec refuses a channel of the wrong artifact type with a bare
`TypeError` ('Argument examples should be a Channel of type ...'), from deep
inside the spec, naming neither what to connect nor where the channel came
from. Here each input is checked first, by the spec's own rule
(`ChannelParameter.type_check`, so what TFX accepts is accepted), and a
mismatch is an InvalidArgumentError that names the input, the artifact type
it takes, what it was given (the producing component and output, when
known) and the output to connect instead.
"""

import re
from typing import Any, Dict

from generic_trainer.errors import InvalidArgumentError

# The output a pipeline usually connects to each input.
_USUAL_SOURCE = {
    'examples': "example_gen.outputs['examples'] (or Transform's "
                "outputs['transformed_examples'])",
    'transform_graph': "transform.outputs['transform_graph']",
    'schema': "schema_gen.outputs['schema']",
    'base_model': "a resolver's outputs['model'] (a finished trainer's "
                  'model)',
    'hyperparameters': "tuner.outputs['best_hyperparameters']",
    'statistics': "statistics_gen.outputs['statistics']",
    'parsed_rows': "a resolver's outputs['parsed_rows'] (the latest "
                   "ParsedRows, LatestArtifactStrategy)",
}


def check_inputs(inputs_spec: Dict[str, Any], **channels) -> None:
  """Each given channel carries the artifact type its input takes.

  Args:
    inputs_spec: The ComponentSpec's INPUTS ({name: ChannelParameter}).
    **channels: The constructor's input arguments; None ones are skipped.

  Raises:
    InvalidArgumentError: a channel of another artifact type, or a value
      that is not a channel (a component, a path, an artifact); TFX's
      TypeError is the `__cause__`.
  """
  for name, value in channels.items():
    if value is None:
      continue
    parameter = inputs_spec[name]
    try:
      parameter.type_check(name, value)
    except TypeError as e:
      expected = parameter.type.__name__
      raise InvalidArgumentError(
          f'{name!r} is wired to {_describe(value)}, which GenericTrainer '
          f'cannot read as {name}. Expected a channel of {expected} '
          f'artifacts. Received: {name}={_describe(value)}. Connect '
          f'{_USUAL_SOURCE.get(name, "a channel of " + expected)} to '
          f'{name}.') from e


def _describe(value) -> str:
  """'a channel of Schema artifacts (schema_gen.outputs['schema'])', or
  'a CsvExampleGen component', or 'a str ('data/')'."""
  artifact_type = getattr(value, 'type', None)
  if isinstance(artifact_type, type):
    where = ''
    producer = getattr(value, 'producer_component_id', None)
    key = getattr(value, 'output_key', None)
    if producer and key:
      where = f" ({producer}.outputs[{key!r}])"
    return f'a channel of {artifact_type.__name__} artifacts{where}'
  if hasattr(value, 'outputs') and hasattr(value, 'id'):
    outputs = sorted(getattr(value, 'outputs', {}) or {})
    return (f'the {type(value).__name__} component itself (its outputs: '
            f'{outputs}), not one of its output channels')
  shown = repr(value)
  if len(shown) > 80:
    shown = shown[:77] + '...'
  return f'a {type(value).__name__} ({shown})'


_TFX_TYPE_ERROR = re.compile(
    r"Expected type (.+?) for parameter '(\w+)' but got (.+) instead\.")


def parameter_error(error: TypeError) -> Exception:
  """TFX's TypeError for a parameter of the wrong type (its spec checks
  them after ours) as an InvalidArgumentError naming it; other TypeErrors
  are returned as they are."""
  match = _TFX_TYPE_ERROR.search(str(error))
  if not match:
    return error
  expected, name, received = match.groups()
  return InvalidArgumentError(
      f'{name!r} has the wrong type for GenericTrainer. Expected {expected}. '
      f'Received: {name}={received}. Pass a value of that type (a path as a '
      'str).')
