"""Where a training keeps parsed rows (`kept_cache`): decided once, from
its FnArgs.

- `parsed_rows_dir` unset: nothing is kept;
- a local or mounted folder (the command's cache folder, a pipeline's
  ParsedRows artifact on local disk): the store works in it;
- an object store (gs://: a Kubeflow run's artifacts): the store works in
  a scratch folder of TMPDIR, fetching the earlier artifact's hits into
  it, and the entries are uploaded when the training ends without an
  error (`kept_remote`).

With several workers, each reads every file (data sharding: every N-th
batch), so the chief writes every miss; the others read what is kept and
write nothing (their folder is a scratch one:
`plan.request.TrainingRequest.with_scratch_outputs`).

Kept rows only save time: a folder that cannot be used (a read-only home),
or that is not this user's alone (refused by `kept_cache.SpanCache`; the
command and the Estimator refuse it before training), is logged and the
training goes on without them.
"""

import contextlib
import json
import os
from typing import Any, Dict, Iterator, Optional

import tensorflow as tf

from generic_trainer.system import paths
from generic_trainer.system import progress
from generic_trainer.system import scratch
from generic_trainer.data.kept import remote as kept_remote
from generic_trainer.data.kept import cache as kept_cache
from generic_trainer.data.kept.folder import DECISIONS
from generic_trainer.errors import InvalidArgumentError, UnsafeFolderError


@contextlib.contextmanager
def store(fn_args) -> Iterator[Optional[kept_cache.SpanCache]]:
  """Yields the entered `SpanCache` of `fn_args.parsed_rows_dir`, reading
  earlier entries from `fn_args.parsed_rows_from` (local or remote), or
  None when nothing is kept."""
  folder = getattr(fn_args, 'parsed_rows_dir', None)
  if not folder:
    yield None
    return
  previous = getattr(fn_args, 'parsed_rows_from', None)
  budget = (getattr(fn_args, 'parsed_rows_budget', None) or
            kept_cache.DEFAULT_BUDGET_BYTES)
  chief = getattr(fn_args, 'is_chief', True)
  if not paths.is_remote(folder):
    with _entered(kept_cache.SpanCache(folder, previous, budget,
                                       writes=chief)) as cache:
      yield cache
    return
  with contextlib.ExitStack() as stack:
    try:
      local = stack.enter_context(scratch.folder('parsed-rows'))
    except (OSError, InvalidArgumentError) as e:  # TMPDIR: full, unusable.
      progress.log().warning('parsed rows: not kept: no scratch folder for '
                             '%s (%s)', folder, e)
      local = None
    if local is None:
      yield None
      return
    # Not evicted: the output holds this execution's files, within budget.
    with _entered(kept_cache.SpanCache(
        local, previous, budget, evict=False, record=False, writes=chief,
        shown=folder)) as cache:
      yield cache
    if cache is not None and chief:  # After a training that ended well.
      kept_remote.publish(cache, folder)


@contextlib.contextmanager
def _entered(cache: kept_cache.SpanCache):
  """`cache`, entered and left; None when its folder cannot be used."""
  try:
    cache.__enter__()
  except (OSError, UnsafeFolderError) as e:  # Refused: its message says why.
    progress.log().warning('parsed rows: not kept: %s cannot be used (%s)',
                           cache.folder, e)
    yield None
    return
  try:
    yield cache
  finally:
    cache.__exit__(None, None, None)


def read_decisions(folder: str) -> Optional[Dict[str, Any]]:
  """The summary a training left in `folder` (local or remote), or None
  (no training kept rows there)."""
  try:
    with tf.io.gfile.GFile(os.path.join(folder, DECISIONS), 'r') as f:
      return json.loads(f.read())
  except (tf.errors.OpError, ValueError):
    return None
