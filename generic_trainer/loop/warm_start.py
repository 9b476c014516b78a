"""Warm start: a TrainSpec's model starts from the base model's weights.

The base is the `base_model` input (in a continuous-training pipeline, the
latest blessed model), a serving SavedModel as GenericTrainer publishes it.
Such a SavedModel keeps each Keras variable under its path
('dense_1/kernel'), in the model's order, so the weights load by layer from
the SavedModel alone, whether a TrainSpec or a Keras `run_fn` exported it:
nothing is published beside it. Keras numbers the names it makes up per
process ('dense', 'dense_1'... in a fresh process, 'dense_3'... after three
Dense layers), so a layer whose exact name is not in the base is matched by
its name without that number and its rank among the layers of that name
('dense_3' as the first 'dense'), in both models' order. Optimizer state is
not in a serving SavedModel and is not carried over; a spec that wants it
defines its own `warm_start()`.

`TrainSpec.warm_start`:
  - True (default): every layer whose variables are all in the base, by
    name and shape, is loaded; a one-line report says what was and was not;
  - 'strict': as True, but any layer that does not load fails the run,
    naming them;
  - False: no warm start;
  - a method `warm_start(self, model, base_model_dir)`: the spec's own.
"""

import os
from typing import Any, Dict, List, Optional
import re


from generic_trainer.system import progress
from generic_trainer.system import saved_models
from generic_trainer.errors import InputArtifactError, SpecError
from generic_trainer.errors import summarize

MODES = (True, False, 'strict')


def apply(spec, model, base_model_dir: Optional[str]) -> Optional[Dict[str,
                                                                       Any]]:
  """Warm-starts `model` from `base_model_dir` as the spec says.

  Returns the report ({'base', 'loaded', 'not_loaded'}), or None when there
  is no base or the spec turned warm start off (or does its own).

  Raises:
    SpecError: `warm_start` is not a mode; in 'strict' mode a layer did not
      load; no layer of the model is in the base by name (another framework
      or another model: layers found with other shapes are only reported).
    InputArtifactError: the base holds no weights, or does not load.
  """
  mode = getattr(type(spec), 'warm_start', True)
  if not base_model_dir:
    return None
  if callable(mode):
    spec.warm_start(model, base_model_dir)
    progress.log().info('Warm start: TrainSpec.warm_start() ran on %s.',
                        base_model_dir)
    return None
  if mode not in MODES:
    raise SpecError(
        "TrainSpec.warm_start must be True (load the layers that match by "
        "name and shape), 'strict' (all of them must), False, or a method "
        f'warm_start(self, model, base_model_dir). Received: '
        f'warm_start={mode!r}. Set warm_start to one of those.')
  if mode is False:
    return None
  base = base_weights(base_model_dir)
  loaded, not_loaded = match(model, base)
  report = {'base': base_model_dir, 'loaded': sorted(loaded),
            'not_loaded': not_loaded}
  if not loaded and all('not in the base' in why
                        for why in not_loaded.values()):
    raise SpecError(
        f'Warm start: no layer of the model is in the base model '
        f'{base_model_dir}. Its weights: {_sample(base)}; the model\'s layers: '
        f'{", ".join(sorted(not_loaded)) or "none"}. It may come from another '
        'framework or another model. Expected a base model with layers of '
        'the same names. Received: none in common. Connect the model of an earlier run of '
        'this spec as base_model, or set warm_start = False to train from '
        'scratch.')
  if mode == 'strict' and not_loaded:
    raise SpecError(
        f"Warm start (warm_start = 'strict'): {len(not_loaded)} layer(s) of "
        f'the model do not match the base model {base_model_dir}: '
        f'{_reasons(not_loaded)}. Expected every layer to match. Received: '
        f'{len(not_loaded)} that do not. Make the layers match (same names and '
        "shapes), or set warm_start = True to load those that do.")
  for layer, values in loaded.items():
    for variable in _variables_by_layer(model)[layer]:
      variable.assign(values[_path(variable)])
  progress.log().info(
      'Warm start from %s: loaded %d layer(s) (%s)%s; optimizer state not '
      'carried over.', base_model_dir, len(loaded),
      ', '.join(sorted(loaded)) or 'none',
      f'; not loaded {len(not_loaded)}: {_reasons(not_loaded)}'
      if not_loaded else '')
  return report


def base_weights(base_model_dir: str) -> Dict[str, Any]:
  """{variable path: value} of a SavedModel's variables.

  Raises:
    InputArtifactError: it does not load, or holds no variables.
  """
  try:
    loaded = saved_models.load(base_model_dir)
  except Exception as e:  # pylint: disable=broad-except
    raise InputArtifactError(
        f'The base model {base_model_dir} does not load as a SavedModel: '
        f'{type(e).__name__}: {summarize(e)}. Expected the model a trainer '
        'published (its Format-Serving folder). Received: a folder that does '
        'not load. Connect the model output of an earlier training as '
        'base_model, or set warm_start = False.') from e
  variables = list(getattr(loaded, 'variables', None) or [])
  if not variables:
    raise InputArtifactError(
        f'The base model {base_model_dir} holds no weights to warm-start '
        'from (its SavedModel has no variables). Expected the model an '
        'earlier GenericTrainer run published. Received: a SavedModel without '
        'variables. Connect that model as base_model, or set warm_start = '
        'False.')
  return {v.name.split(':')[0]: v.numpy() for v in variables}


def match(model, base: Dict[str, Any]):
  """({layer: {path: value}} that load, {layer: why not} that do not).

  A layer is looked up by its exact name, else by its ranked name (see the
  module docstring)."""
  loaded, not_loaded = {}, {}
  layers = _variables_by_layer(model)
  ranked_base = {r: p for p, r in _ranked(list(base)).items()}
  ranked_model = _ranked([_path(v) for vs in layers.values() for v in vs])
  for layer, variables in layers.items():
    values, problems = {}, []
    for variable in variables:
      path = _path(variable)
      if path not in base:
        path = ranked_base.get(ranked_model[path], path)
      if path not in base:
        problems.append(f'{path} not in the base')
      elif tuple(base[path].shape) != tuple(variable.shape):
        problems.append(f'{path} {tuple(variable.shape)} vs base '
                        f'{tuple(base[path].shape)}')
      else:
        values[_path(variable)] = base[path]
    if problems:
      not_loaded[layer] = '; '.join(problems)
    else:
      loaded[layer] = values
  return loaded, not_loaded


def _ranked(paths: List[str]) -> Dict[str, str]:
  """{path: 'dense#1/kernel'}: each layer's name without Keras's number,
  and its rank among the layers of that name, in order of appearance."""
  ranks, seen, ranked = {}, {}, {}
  for path in paths:
    layer, _, variable = path.rpartition('/')
    if layer not in seen:
      stem = re.sub(r'_\d+$', '', layer)
      seen[layer] = f'{stem}#{ranks.get(stem, 0)}'
      ranks[stem] = ranks.get(stem, 0) + 1
    ranked[path] = f'{seen[layer]}/{variable}'
  return ranked


def _variables_by_layer(model) -> Dict[str, List[Any]]:
  layers = {}
  for variable in model.variables:
    layers.setdefault(os.path.dirname(_path(variable)) or _path(variable),
                      []).append(variable)
  return layers


def _path(variable) -> str:
  return getattr(variable, 'path', None) or variable.name.split(':')[0]


def _reasons(not_loaded: Dict[str, str]) -> str:
  return ', '.join(f'{layer} ({why})' for layer, why in sorted(
      not_loaded.items()))


def _sample(base: Dict[str, Any]) -> str:
  names = sorted(base)
  return ', '.join(names[:6]) + (f' and {len(names) - 6} more'
                                 if len(names) > 6 else '')
