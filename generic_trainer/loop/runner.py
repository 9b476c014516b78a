"""Trains, evaluates and exports a TrainSpec: the run_fn of TrainSpec modules.

One sequence, used by pipelines, the `generic-trainer` command and the
notebook `Estimator` alike: `prepare` (schema, features, schedule,
datasets, compiled model, the checks against a real batch, the warm start
from the base model), `train` (the fit loop), `SpecRun` (both, then the
export and the training record).
"""

from typing import Any, Dict, List, Optional, Sequence

import attr

from generic_trainer.trainspec import member_checks
from generic_trainer.loop import train_result
from generic_trainer.loop import spec_checks
from generic_trainer.loop import datasets
from generic_trainer.loop import export
from generic_trainer.loop import fit_loop
from generic_trainer.loop import warm_start
from generic_trainer.loop.handlers.first_step import FirstStepTime
from generic_trainer.data import cache_folder
from generic_trainer.data.kept import store as kept_store
from generic_trainer.system import progress
from generic_trainer.errors import summarize
from generic_trainer.data import statistics


@attr.s(frozen=True)
class Prepared:
  """A spec ready to train: what `prepare` found and built.

  Attributes:
    schema: The schema of the examples the model reads.
    keys: The features the model reads (its named inputs).
    inputs: The datasets and the schedule (`fit_loop.FitInputs`).
    model: The compiled model (`spec.model`), warm-started from the base
      model when there is one (`warm_start`).
    warm_start: What the warm start loaded, or None.
  """
  schema = attr.ib()
  keys = attr.ib(type=List[str])
  inputs = attr.ib(type=fit_loop.FitInputs)
  model = attr.ib()
  warm_start = attr.ib(default=None)


def prepare(spec, fn_args, cache_folder=None, kept_rows=None) -> Prepared:
  """Builds the datasets and the compiled model, and checks the spec
  against the data, before any training step. Parsed rows that the cache
  decision puts on disk go in `cache_folder` (a
  `data.cache_folder.CacheFolder`; None: none goes on disk); rows kept
  across trainings in `kept_rows` (a `data.kept.cache.SpanCache`, None:
  none kept).

  Raises:
    SpecError: the spec does not fit the data; the message says how.
  """
  spec_checks.check_backend(spec)
  spec_checks.check_cache(spec)
  member_checks.check_batch_split(spec.batch_size,
                                  [getattr(fn_args, 'num_workers', 1)])
  schema = datasets.load_schema(fn_args)
  keys = datasets.feature_keys(spec, schema)
  datasets.check_data(fn_args, schema)
  epochs, steps_per_epoch = datasets.schedule(
      spec, fn_args.train_steps, _num_train_examples(fn_args))
  model = fit_loop.compile_model(spec, getattr(fn_args, 'strategy', None),
                                 steps_per_epoch, fn_args.eval_steps)
  keys = spec_checks.model_features(model, keys)
  train, evaluation = _datasets(spec, fn_args, schema, keys, steps_per_epoch,
                                cache_folder, kept_rows=kept_rows)
  if kept_rows is not None:
    kept_rows.log_decisions()
  spec_checks.check_batch(spec, model, datasets.first_batch(
      spec, fn_args, schema, fn_args.train_files, keys))
  spec_checks.check_monitors(spec, model)
  warm = warm_start.apply(spec, model, fn_args.base_model)
  inputs = fit_loop.FitInputs(train, evaluation, epochs, steps_per_epoch,
                              fn_args.eval_steps)
  return Prepared(schema, keys, inputs, model, warm)


def train(spec, fn_args, interactive: Optional[bool] = None,
          extra_handlers: Sequence[Any] = ()):
  """`prepare`, then the fit loop. Returns (Prepared, result record).

  `interactive` and `extra_handlers` go to `fit_loop.fit`. Parsed rows
  cached on disk live in a folder of the system's temporary directory
  (TMPDIR), removed when training ends, failed or not (a killed process's
  folder by the next training; see `data.cache_folder`).
  """
  workers = getattr(fn_args, 'num_workers', 1)
  with cache_folder.CacheFolder(sharers=workers) as cache, \
      kept_store.store(fn_args) as kept:
    prepared = prepare(spec, fn_args, cache, kept)
    try:
      result = fit_loop.fit(spec, prepared.inputs, fn_args,
                            interactive=interactive,
                            extra_handlers=extra_handlers)
    except Exception as e:  # pylint: disable=broad-except
      if not (cache.on_disk and cache_folder.disk_full(e)):
        raise
      prepared = _without_disk_cache(spec, fn_args, prepared, cache, e)
      result = fit_loop.fit(spec, prepared.inputs, fn_args,
                            interactive=interactive,
                            extra_handlers=extra_handlers)
  if prepared.warm_start:
    result['warm_start'] = prepared.warm_start
  return prepared, result


class SpecRun:
  """The run_fn of a TrainSpec: builds the spec from fn_args, checks it,
  trains it, exports it, and writes its training record.

  What the module loader gives for a module that defines a TrainSpec
  (`usercode.module_loader`), and what the notebook `Estimator` trains
  its own spec with; `launch.launcher` calls it as it calls a `run_fn`, with
  the request's display and record options.

  Attributes:
    train_spec: The TrainSpec class.
    spec: The spec to train (the notebook's, built with its
      hyperparameters); None: one is built from fn_args at each call.
    export: Whether the call exports the model into
      `fn_args.serving_model_dir` (the notebook exports later, on request).
    prepared: What the last call prepared (`Prepared`: its feature keys
      serve the notebook's evaluate, predict and export).
  """

  def __init__(self, train_spec: type, spec=None, export: bool = True):
    self.train_spec = train_spec
    self.spec = spec
    self.export = export
    self.prepared: Optional[Prepared] = None

  def __call__(self, fn_args, interactive: Optional[bool] = None,
               started: Optional[float] = None,
               record: Optional[Dict[str, Any]] = None,
               handlers: Sequence[Any] = ()) -> Dict[str, Any]:
    """Trains on `fn_args`; returns the training record, written to
    model_run/train_result.json here, once: its one writer.

    `interactive` goes to `fit_loop.fit`, and `handlers` too, after the
    built-in ones (what the cluster adds: the TrainJob's progress). With
    `started`
    (`time.monotonic()` when the process that asked started), the record
    says how long it took to the first step (`time_to_first_step_s`);
    `record`'s entries are added to it (the command's `evaluation`).
    """
    timer = FirstStepTime(started) if started is not None else None
    spec = self.spec if self.spec is not None else self.train_spec(fn_args)
    spec.fn_args = fn_args  # What canned specs read the data from.
    self.prepared, result = train(spec, fn_args, interactive,
                                  ([timer] if timer else []) +
                                  list(handlers))
    if self.export:
      export.export(spec, self.prepared.model, self.prepared.keys,
                    fn_args.serving_model_dir, fn_args.schema_path,
                    fn_args.transform_graph_path)
    if timer is not None and timer.seconds is not None:
      result['time_to_first_step_s'] = round(timer.seconds, 3)
    result.update(record or {})
    train_result.write(fn_args.model_run_dir, result)
    return result


def _datasets(spec, fn_args, schema, keys, steps_per_epoch, cache_folder,
              cache=None, kept_rows=None):
  """(train, eval) datasets; `cache` False reads the files every epoch."""
  train = datasets.make_dataset(
      spec, fn_args, schema, fn_args.train_files, keys, spec.batch_size,
      num_epochs=None if steps_per_epoch else 1, shuffle=True,
      seed=spec.shuffle_seed, cache_folder=cache_folder, cache=cache,
      kept_rows=kept_rows)
  evaluation = datasets.make_dataset(
      spec, fn_args, schema, fn_args.eval_files, keys,
      spec.eval_batch_size or spec.batch_size, num_epochs=1, shuffle=False,
      cache_folder=cache_folder, cache=cache, kept_rows=kept_rows)
  return train, evaluation


def _without_disk_cache(spec, fn_args, prepared: Prepared, cache,
                        error: Exception) -> Prepared:
  """`prepared` with datasets that read and parse the files every epoch,
  after the disk filled while the first epoch wrote the cache (logged).
  The model keeps what the interrupted epoch trained; the fit starts over
  from the first epoch."""
  progress.log().warning(
      'cache: the disk filled while the first epoch wrote the parsed rows '
      'to %s (%s); they are removed, and training starts its epochs again '
      'reading and parsing the files every epoch (uncached)', cache.path,
      summarize(error))
  cache.clear()
  train, evaluation = _datasets(spec, fn_args, prepared.schema, prepared.keys,
                                prepared.inputs.steps_per_epoch, None,
                                cache=False)
  return attr.evolve(prepared, inputs=attr.evolve(prepared.inputs, train=train,
                                                evaluation=evaluation))


def _num_train_examples(fn_args):
  """Train examples from fn_args.num_examples (the statistics input, summed
  over the Examples artifacts): the train splits' counts, each split once."""
  if not fn_args.num_examples:
    return None
  splits = statistics.split_names(fn_args.train_files)
  counts = [fn_args.num_examples.get(s) for s in sorted(splits)]
  return sum(counts) if counts and None not in counts else None
