"""The `tf.distribute.Strategy` objects FnArgs hands to user code.

One per name and process: MultiWorkerMirroredStrategy configures the
process's collective ops and joins the cluster in TF_CONFIG when it is
created, which can happen once, before TensorFlow runs anything else.

Keras 3 (3.12, with TF 2.16) cannot `fit` under MultiWorkerMirroredStrategy
as TF ships it (keras-team/keras#20585): it asks `strategy.reduce` for a
nested structure of values, and for `axis=0` on scalar metrics, which TF's
multi-worker reduce rejects. `KerasCompatibleMultiWorkerMirroredStrategy`
reduces each value of the structure on its own and a scalar over replicas
only; everything else is TF's MultiWorkerMirroredStrategy, and it is one
(`isinstance` holds), so tf.keras 2 and custom loops behave as with TF's.
"""

from typing import Any, Dict

import tensorflow as tf

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import DEFAULT_STRATEGY
from generic_trainer.keys import MIRRORED
from generic_trainer.keys import MULTI_WORKER_MIRRORED
from generic_trainer.keys import STRATEGIES

_created: Dict[str, tf.distribute.Strategy] = {}


class KerasCompatibleMultiWorkerMirroredStrategy(
    tf.distribute.MultiWorkerMirroredStrategy):
  """MultiWorkerMirroredStrategy whose `reduce` takes what Keras 3 passes."""

  def reduce(self, reduce_op, value, axis=None):
    def reduce_one(v):
      local = v.values[0] if isinstance(v, tf.distribute.DistributedValues) \
          else v
      one_axis = None if axis is not None and local.shape.rank == 0 else axis
      return super(KerasCompatibleMultiWorkerMirroredStrategy,
                   self).reduce(reduce_op, v, one_axis)
    return tf.nest.map_structure(reduce_one, value)


def fn_args_fields(plan) -> Dict[str, Any]:
  """FnArgs' `strategy`, `is_chief`, `worker_index` and `num_workers`, from
  a plan's strategy and role (`plan.plan.TrainingPlan`)."""
  role = plan.role
  return {'strategy': get(plan.strategy), 'is_chief': role.is_chief,
          'worker_index': role.worker_index, 'num_workers': role.num_workers}


def get(name: str) -> tf.distribute.Strategy:
  """The strategy named `name` (one of `keys.STRATEGIES`) for this process."""
  if name == DEFAULT_STRATEGY:
    return tf.distribute.get_strategy()
  if name not in _created:
    if name == MIRRORED:
      _created[name] = tf.distribute.MirroredStrategy()
    elif name == MULTI_WORKER_MIRRORED:
      _created[name] = KerasCompatibleMultiWorkerMirroredStrategy()
    else:
      raise InvalidArgumentError(
          f"'strategy' must be one of {STRATEGIES}. Received: "
          f'strategy={name!r}. Set strategy to one of those, or leave it '
          'unset.')
  return _created[name]


def replicas_in_sync() -> Dict[str, int]:
  """How many replicas each strategy created here trains with."""
  return {name: s.num_replicas_in_sync for name, s in _created.items()}
