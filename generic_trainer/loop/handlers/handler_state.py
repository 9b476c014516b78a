"""What each handler saves with a resume checkpoint, and how it gets it back.

The protocol is Lightning's stateful callbacks (`state_dict` /
`load_state_dict`), under the names the issue tracker settled on: a handler
that defines `get_state()` and `set_state(state)` has its state saved with
every resume checkpoint and given back, after its `on_train_begin`, when a
killed training resumes. The state is a dict of JSON values (str, numbers,
bool, None, lists, dicts) and numpy arrays.

Keras's own handlers do not define it; their state is read here, by type:
`EarlyStopping` (wait, best, best epoch, the best weights when
`restore_best_weights`), `ModelCheckpoint` (the best value of a best-only
checkpoint, and its step count for every-N-steps files) and
`ReduceLROnPlateau` (wait, cooldown, best; the learning rate itself is an
optimizer variable, saved with the weights). A handler's own
`get_state`/`set_state` wins over these.
"""

from typing import Any, Callable, Dict, List, Optional, Tuple

import keras

_KERAS_STATE = (
    (keras.callbacks.EarlyStopping,
     ('wait', 'stopped_epoch', 'best', 'best_epoch', 'best_weights')),
    (keras.callbacks.ModelCheckpoint,
     ('best', '_batches_seen_since_last_saving', '_last_batch_seen',
      '_current_epoch')),
    (keras.callbacks.ReduceLROnPlateau, ('wait', 'cooldown_counter', 'best')),
)


def has_state(handler) -> bool:
  """Whether `handler` has state to save (the protocol, or a Keras type)."""
  return _protocol(handler) is not None or _keras_fields(handler) is not None


def get_state(handler) -> Dict[str, Any]:
  """The state of `handler` (see `has_state`)."""
  protocol = _protocol(handler)
  if protocol is not None:
    return protocol[0]()
  return {name: getattr(handler, name, None)
          for name in _keras_fields(handler) or ()}


def set_state(handler, state: Dict[str, Any]) -> None:
  """Gives `handler` back the state `get_state` returned."""
  protocol = _protocol(handler)
  if protocol is not None:
    protocol[1](state)
    return
  for name in _keras_fields(handler) or ():
    if name in state:
      setattr(handler, name, state[name])


def keys(handlers: List[Any]) -> Dict[str, Any]:
  """{key: handler} of the handlers with state; the key is the handler's
  place and class (`3.EarlyStopping`), the same in every attempt of a
  training, since the handlers are built the same way."""
  return {f'{i}.{type(h).__name__}': h for i, h in enumerate(handlers)
          if has_state(h)}


def _protocol(handler) -> Optional[Tuple[Callable, Callable]]:
  get, put = (getattr(handler, 'get_state', None),
              getattr(handler, 'set_state', None))
  return (get, put) if callable(get) and callable(put) else None


def _keras_fields(handler) -> Optional[Tuple[str, ...]]:
  for cls, fields in _KERAS_STATE:
    if isinstance(handler, cls):
      return fields
  return None
