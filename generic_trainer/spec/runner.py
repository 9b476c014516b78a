"""Trains, evaluates and exports a TrainSpec: the run_fn of TrainSpec modules."""

import os
from typing import Any, Optional, Sequence

from generic_trainer.spec import fit_loop
from generic_trainer.spec import checks as spec_checks
from generic_trainer.spec import export as spec_export
from generic_trainer.spec import datasets as spec_input
from generic_trainer import train_result


def run(spec_class, fn_args, interactive: Optional[bool] = None,
        extra_handlers: Sequence[Any] = ()) -> dict:
  """Builds the spec from fn_args, checks it, trains it, exports it.

  `interactive` and `extra_handlers` go to `fit_loop.fit` (the local
  command's progress choice and first-step timer). Returns the result
  record, also written to model_run/train_result.json.
  """
  spec = spec_class(fn_args)
  schema = spec_input.load_schema(fn_args)
  keys = spec_input.feature_keys(spec, schema)
  epochs, steps_per_epoch = spec_input.schedule(
      spec, fn_args.train_steps, _num_train_examples(fn_args))
  train = spec_input.make_dataset(
      spec, fn_args, schema, fn_args.train_files, keys, spec.batch_size,
      num_epochs=None if steps_per_epoch else 1, shuffle=True)
  evaluation = spec_input.make_dataset(
      spec, fn_args, schema, fn_args.eval_files, keys,
      spec.eval_batch_size or spec.batch_size, num_epochs=1, shuffle=False)
  model = fit_loop.compile_model(spec, getattr(fn_args, 'strategy', None),
                                 steps_per_epoch, fn_args.eval_steps)
  spec_checks.check_model_inputs(model, keys)
  spec_checks.check_batch(spec, model, spec_input.first_batch(
      spec, fn_args, schema, fn_args.train_files, keys))
  result = fit_loop.fit(spec, train, evaluation, epochs, steps_per_epoch,
                        fn_args.eval_steps, fn_args.model_run_dir,
                        interactive=interactive,
                        checkpoint_dir=fn_args.checkpoint_dir,
                        extra_handlers=extra_handlers)
  spec_export.export(spec, model, keys, fn_args.serving_model_dir,
                     fn_args.schema_path, fn_args.transform_graph_path)
  train_result.write(fn_args.model_run_dir, result)
  return result


def _num_train_examples(fn_args):
  """Train examples from fn_args.num_examples (the statistics input)."""
  if not fn_args.num_examples:
    return None
  splits = [os.path.basename(os.path.dirname(p))[len('Split-'):]
            for p in fn_args.train_files]
  counts = [fn_args.num_examples.get(s) for s in splits]
  return sum(counts) if counts and None not in counts else None
