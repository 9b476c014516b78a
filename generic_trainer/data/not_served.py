"""The features a serving request never carries: labels and weights.

A client asking a model for a prediction has no label. Three sources say
which features are labels or weights:
  - the TrainSpec (its label and weight keys, its `raw_label_key`): the
    export declares them in `assets.extra/generic_trainer_not_served.json`;
  - the schema: a feature with `not_in_environment: "SERVING"` (TFX's way of
    saying the label is absent at serving time);
  - the Transform graph: a raw feature that feeds only the transformed label
    or weight, and no feature the model reads (the taxi's raw `tips`, from
    which `preprocessing_fn` computes the label `tips_xf`).
The export leaves them out of every signature's parsing; the serving check
builds its requests without them. The same file records the features
`serving_default` requires in every example (parsed without a default),
so that `tf_examples` can name one a row lacks before the call.
"""

import json
import os
from typing import Dict, Iterable, List, Optional
from generic_trainer.system import atomic_files
from generic_trainer.system.lazy import saved_transform_io_v2
from generic_trainer.system.lazy import tft
import tensorflow as tf

# Written into the export by `loop.export`, read by the serving check.
DECLARATION = os.path.join('assets.extra', 'generic_trainer_not_served.json')
SERVING = 'SERVING'


def declare(export_dir: str, features: Dict[str, str],
            required: Optional[Iterable[str]] = None) -> None:
  """Writes {feature: why ('label', 'weight', 'raw label')} into the
  export, for the serving check, and the features `serving_default`
  requires in every example (`required`), for `tf_examples`."""
  path = os.path.join(export_dir, DECLARATION)
  tf.io.gfile.makedirs(os.path.dirname(path))
  record = {'features': features}
  if required is not None:
    record['required'] = sorted(required)
  atomic_files.write_json(path, record, indent=1, sort_keys=True)


def declared(export_dir: str) -> Dict[str, str]:
  """What the export declares ({} when it declares nothing)."""
  path = os.path.join(export_dir, DECLARATION)
  if not tf.io.gfile.exists(path):
    return {}
  with tf.io.gfile.GFile(path) as f:
    return dict(json.load(f).get('features', {}))


def required(export_dir: str) -> Optional[List[str]]:
  """The features the export's `serving_default` requires in every
  example, or None when it does not say (an export of an earlier
  release, or not ours)."""
  path = os.path.join(export_dir, DECLARATION)
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    found = json.load(f).get('required')
  return None if found is None else list(found)


def from_schema(schema) -> Dict[str, str]:
  """The schema's features absent from the SERVING environment."""
  found = {}
  for feature in schema.feature:
    if SERVING in feature.not_in_environment:
      found[feature.name] = "not in the schema's SERVING environment"
  return found


def from_transform(transform_graph_path: str, targets: Iterable[str],
                   features: Optional[Iterable[str]] = None) -> Dict[str, str]:
  """The raw features that feed only Transform outputs in `targets` (labels,
  weights) and no other output (or none of `features`, when given).

  Read from the Transform graph (which graph inputs each output depends on,
  as TensorFlow Transform itself computes to serve with missing inputs).
  Returns {} when the graph cannot say.
  """
  targets = set(targets)
  try:
    sources = output_sources(transform_graph_path)
  except Exception:  # pylint: disable=broad-except
    return {}  # An older or unusual graph: nothing dropped by inference.
  used = set(features) if features is not None else (set(sources) - targets)
  feeds_target = set().union(*[sources[t] for t in targets if t in sources])
  feeds_feature = set().union(*[sources[f] for f in used if f in sources])
  return {raw: f'feeds only the label or weight {_which(sources, raw, targets)}'
          for raw in sorted(feeds_target - feeds_feature)}


def output_sources(transform_graph_path: str) -> Dict[str, set]:
  """{transformed feature: the raw features it is computed from}."""
  loader = saved_transform_io_v2.SavedModelLoader(
      tft.TFTransformOutput(transform_graph_path).transform_savedmodel_dir)
  inputs = loader._structured_inputs  # pylint: disable=protected-access
  by_tensor = {}
  for name, value in inputs.items():
    for component in tf.nest.flatten(value, expand_composites=True):
      by_tensor[id(component)] = name
  result = {}
  for output, tensors in loader._output_to_inputs_map.items():  # pylint: disable=protected-access
    result[output] = {by_tensor[id(t)] for t in tensors if id(t) in by_tensor}
  return result


def _which(sources, raw: str, targets) -> str:
  return ', '.join(repr(t) for t in sorted(targets)
                   if raw in sources.get(t, ()))


def names(*found: Dict[str, str]) -> List[str]:
  """The sorted union of the features of several findings."""
  return sorted(set().union(*[set(f) for f in found]))
