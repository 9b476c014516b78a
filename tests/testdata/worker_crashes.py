"""run_fn whose worker 1 fails; the chief would wait for it forever.

The chief creates a variable under MultiWorkerMirroredStrategy, which
broadcasts its initial value to every worker: without worker 1 it blocks.
"""

import tensorflow as tf


def run_fn(fn_args):
  if fn_args.worker_index == 1:
    raise OSError('worker 1 cannot read its shard: disk quota exceeded')
  with fn_args.strategy.scope():
    weights = tf.Variable(tf.ones([4]))
  tf.saved_model.save(tf.Module(), fn_args.serving_model_dir)
  del weights
