"""One training attempt in this process: build FnArgs, call the entry
point."""

import threading
from typing import Any, Callable

from generic_trainer import member_checks
from generic_trainer.core import stray_threads
from generic_trainer.data import input_pipeline
from generic_trainer.data import kept_factory
from generic_trainer.data import kept_store
from generic_trainer.core.request import TrainingRequest
from generic_trainer.core.user_code import user_code
from generic_trainer.keys import RUN_FN_KEY
from generic_trainer.core import fn_args as fn_args_lib


def train(request: TrainingRequest, run_fn: Callable[[Any], None]) -> None:
  """Runs the user's `run_fn` (or TrainSpec), which exports into
  `request.serving_dir`.

  `run_fn` is the entry point, which `core.plan` loaded before FnArgs are
  built, so a broken module fails in seconds instead of after the data
  accessors are set up. Where to train (here, a child process, local
  workers) is the plan's decision.

  Raises:
    UserModuleError, InvalidArgumentError, InputArtifactError: see their docs.
    RunFnError: `run_fn` raised, or tried to end the process (see
      `core.user_code`); the user's exception is its `__cause__` and its
      traceback is in the message.
  """
  source = request.plan.describe_source()
  spec = getattr(run_fn, 'train_spec', None)
  low, high = request.plan.worker_bounds()
  if spec is not None and low < high:  # Every size the group may take.
    member_checks.check_batch_split(getattr(spec, 'batch_size', None),
                                    range(low, high + 1))
  fn_args = fn_args_lib.build_fn_args(request)
  threads = set(threading.enumerate())
  try:
    if spec is not None:  # Its runner keeps its parsed rows itself.
      with user_code(f'TrainSpec {spec.__name__}', source):
        run_fn(fn_args)
    else:
      with kept_store.store(fn_args) as kept, user_code(RUN_FN_KEY, source):
        run_fn(_keeping(fn_args, kept))
      if kept is not None:
        kept.log_decisions()
  finally:  # Failed or not, its threads cannot hold the process.
    stray_threads.release(threads, source)


def _keeping(fn_args, kept):
  """`fn_args`, its data accessor's tf.Example datasets reading and keeping
  parsed rows through `kept` (a `span_cache.SpanCache`, or None)."""
  factory = fn_args.data_accessor.tf_dataset_factory
  if kept is None or not isinstance(factory, input_pipeline.DatasetFactory):
    return fn_args
  fn_args.data_accessor = fn_args.data_accessor._replace(
      tf_dataset_factory=kept_factory.KeptRowsFactory(
          kept, fn_args.transform_graph_path,
          getattr(fn_args, 'num_workers', 1), factory.telemetry_descriptors))
  return fn_args
