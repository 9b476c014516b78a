"""The fields GenericTrainer adds to TFX's FnArgs, defined once.

Both what `run_fn` gets in a pipeline (`fnargs.fn_args.FnArgs`, a subclass of
TFX's FnArgs) and what a local run gets (`fnargs.local.LocalFnArgs`,
which must not import TFX's FnArgs: its module imports Apache Beam) inherit
them from here. Importing this module is cheap.
"""

from typing import Any, Dict

import attr


@attr.s
class GenericFnArgsFields:
  """GenericTrainer's additions to TFX's FnArgs.

  Attributes:
    num_examples: Examples per split, e.g. `{'train': 230, 'eval': 104}`,
      read from the `statistics` input; None without that input.
    statistics_path: The folder of the `statistics` input (an
      ExampleStatistics artifact: `Split-<name>/FeatureStats.pb`), which
      canned specs read means and vocabularies from; None without it.
    strategy: The `tf.distribute.Strategy` to build and compile the model
      under (`with fn_args.strategy.scope(): model = ...`):
      MultiWorkerMirroredStrategy when several workers train, else the
      default strategy (or MirroredStrategy with `strategy='mirrored'`);
      None in a local run (the default strategy).
    is_chief: Whether this process is the chief, whose export is validated
      and published. Other workers must export too (to `serving_model_dir`,
      a scratch folder for them); what they write is removed.
    worker_index: This process's index among the workers; the chief is 0.
    num_workers: How many processes train together (1 for one process).
    checkpoint_dir: Where to keep what a killed training resumes from; the
      same for a retry on the same inputs, and for every worker of a
      multi-worker training; deleted once the model is published. See
      `generic_trainer.resume`.
    parsed_rows_dir: Where a TrainSpec (or a `run_fn` module's
      `data_accessor` datasets) keeps the parsed rows of each file of its
      data for the next training (`data.kept.store`): the
      `updated_parsed_rows` output (a ParsedRows artifact) in a pipeline,
      the user's cache folder for the command and the Estimator; None
      keeps none.
    parsed_rows_from: A folder of rows kept by an earlier training (the
      `parsed_rows` input), read and carried into `parsed_rows_dir`; None
      without one.
    parsed_rows_budget: The most bytes of parsed rows `parsed_rows_dir`
      keeps; None for `kept_cache.DEFAULT_BUDGET_BYTES`.
  """
  num_examples = attr.ib(type=Dict[str, int], default=None)
  strategy = attr.ib(type=Any, default=None)
  is_chief = attr.ib(type=bool, default=True)
  worker_index = attr.ib(type=int, default=0)
  num_workers = attr.ib(type=int, default=1)
  checkpoint_dir = attr.ib(type=str, default=None)
  statistics_path = attr.ib(type=str, default=None)
  parsed_rows_dir = attr.ib(type=str, default=None)
  parsed_rows_from = attr.ib(type=str, default=None)
  parsed_rows_budget = attr.ib(type=int, default=None)
