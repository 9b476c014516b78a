"""The publication gate: a new model must not break the clients of the one
it replaces.

When a base model is connected (in continuous training, the latest blessed
model, the one serving), every signature the base has must stay callable as
its clients call it:
  - the signature is still there;
  - the same inputs (none removed, none added: a client sends exactly the
    inputs it sent), each with the same dtype and a shape that accepts
    what the old one accepted;
  - the old outputs are still there, with the same dtypes (new outputs and
    new signatures are fine: no client asks for them yet).
A difference fails the execution before publication, listing each one (old
vs new), unless the component sets `allow_signature_change=True`.

A base that is a TF1 SavedModel (a tf.estimator export: no object graph) is
not gated: no Keras model can keep an Estimator's signatures, so moving off
tf.estimator changes them whatever the module does; the log says the gate
did not apply. (TFX's own Trainer tests pass such a base for warm start.)
"""

from typing import Any, Dict, List

from generic_trainer.system import progress
from generic_trainer.system import saved_models
from generic_trainer.errors import SignatureChangeError


def check(base_dir: str, new_dir: str, new_model: Any = None) -> None:
  """Raises SignatureChangeError listing what would break `base_dir`'s
  clients if `new_dir` replaced it. `new_model` is `new_dir` loaded, when
  the caller has it (`training.attempt` loads the export once)."""
  if is_tf1(base_dir):
    progress.log().warning(
        'The base model %s is a TF1 (tf.estimator) SavedModel: its '
        'signatures are not compared with the new model\'s. Check that its '
        'serving clients move to the new signatures.', base_dir)
    return
  found = changes(base_dir, new_dir, new_model)
  if found:
    listed = '\n'.join(f'  - {change}' for change in found)
    raise SignatureChangeError(
        f'The new model would break the clients of the base model '
        f'{base_dir}: {len(found)} change(s) to the signatures it serves:\n'
        f'{listed}\nA Pusher would put it in the base model\'s place. '
        'Expected the signatures of the base model. Received: the changes '
        'above. Keep '
        'the signatures (names, inputs with their dtypes and shapes, '
        'outputs), or, when the clients change with the model, set '
        'allow_signature_change=True on GenericTrainer '
        '(--allow-signature-change for generic-trainer).')


def is_tf1(saved_model_dir: str) -> bool:
  """Whether the SavedModel has no object graph (TF1, tf.estimator)."""
  saved_model = saved_models.parse(saved_model_dir)
  return not any(graph.HasField('object_graph_def') and
                 graph.object_graph_def.nodes
                 for graph in saved_model.meta_graphs)


def changes(base_dir: str, new_dir: str, new_model: Any = None) -> List[str]:
  """The differences that would break a client of `base_dir`'s signatures
  if `new_dir` replaced it; [] when there are none."""
  base = dict(saved_models.load(base_dir).signatures)
  new = dict((new_model or saved_models.load(new_dir)).signatures)
  found = []
  for name in sorted(base):
    if name not in new:
      found.append(f'signature {name!r}: removed (the new model has '
                   f'{sorted(new)})')
      continue
    found += _input_changes(name, _inputs(base[name]), _inputs(new[name]))
    found += _output_changes(name, _outputs(base[name]), _outputs(new[name]))
  return found


def _inputs(fn) -> Dict[str, Any]:
  return dict(fn.structured_input_signature[1])


def _outputs(fn) -> Dict[str, Any]:
  return dict(fn.structured_outputs)


def _input_changes(name: str, old: Dict[str, Any],
                   new: Dict[str, Any]) -> List[str]:
  found = []
  for key in sorted(old):
    if key not in new:
      found.append(f'signature {name!r}: input {key!r} removed (was '
                   f'{_spec(old[key])}; the new inputs are {sorted(new)})')
    elif old[key].dtype != new[key].dtype:
      found.append(f'signature {name!r}: input {key!r} dtype '
                   f'{old[key].dtype.name} -> {new[key].dtype.name}')
    elif not _accepts(new[key].shape, old[key].shape):
      found.append(f'signature {name!r}: input {key!r} shape '
                   f'{_shape(old[key].shape)} -> {_shape(new[key].shape)}')
  for key in sorted(set(new) - set(old)):
    found.append(f'signature {name!r}: input {key!r} added ({_spec(new[key])}'
                 '; clients of the old model do not send it)')
  return found


def _output_changes(name: str, old: Dict[str, Any],
                    new: Dict[str, Any]) -> List[str]:
  found = []
  for key in sorted(old):
    if key not in new:
      found.append(f'signature {name!r}: output {key!r} removed (the new '
                   f'outputs are {sorted(new)})')
    elif old[key].dtype != new[key].dtype:
      found.append(f'signature {name!r}: output {key!r} dtype '
                   f'{old[key].dtype.name} -> {new[key].dtype.name}')
  return found


def _accepts(new_shape, old_shape) -> bool:
  """Whether an input of `new_shape` takes every tensor `old_shape` did."""
  if new_shape.rank is None:
    return True
  if old_shape.rank != new_shape.rank:
    return False
  return all(n is None or n == o for n, o in zip(new_shape.as_list(),
                                                 old_shape.as_list()))


def _shape(shape) -> str:
  return str(shape.as_list()) if shape.rank is not None else '<unknown>'


def _spec(spec) -> str:
  return f'{spec.dtype.name}{_shape(spec.shape)}'
