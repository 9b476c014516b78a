"""The record of a finished training, and its place in ML Metadata.

The record, `model_run/train_result.json`, is a JSON object:
    {"train": {"loss": 0.3, ...},          # final train metrics, numbers
     "eval": {"loss": 0.28, ...},          # final eval metrics, numbers
     "steps": 100, "epochs": 5, "training_time_s": 12.5,
     "resumed_from_epoch": 0, "resumed_from_batch": 0,   # optional: where
     "resumed_from_step": 0,                             # it resumed
     "warm_start": {"base": "...", "loaded": ["dense", ...],
                    "not_loaded": {"layer": "why"}}}   # optional

The TrainSpec runner (`loop.runner.SpecRun`) writes `train_result.json`
into model_run, once, with the entries its caller adds (the command's
`evaluation`, what it read as missing; every entry point's
`time_to_first_step_s` when it asked); after publication
the executor copies it onto the Model and ModelRun artifacts as custom
properties (`train_loss`, `eval_sparse_categorical_accuracy`, ...,
`train_steps`, `epochs`, `training_time_s`, `warm_start_layers`), so runs
can be compared with an MLMD query and no file reading. A `run_fn` module
may write the same file.
"""

import json
import os
from typing import Any, Dict, Iterable, Optional
from generic_trainer.system import atomic_files
from generic_trainer.errors import InputArtifactError

from generic_trainer.keys import RESULT_FILE  # pylint: disable=g-bad-import-order


def write(model_run_dir: str, result: Dict[str, Any]) -> str:
  return atomic_files.write_json(os.path.join(model_run_dir, RESULT_FILE),
                                 result, indent=1, sort_keys=True)


def read(model_run_dir: str) -> Optional[Dict[str, Any]]:
  """The record in `model_run_dir`, checked; None if there is none.

  Raises:
    InputArtifactError: the file is not a record as described above.
  """
  path = os.path.join(model_run_dir, RESULT_FILE)
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      result = json.load(f)
    custom_properties(result)
  except (ValueError, TypeError, AttributeError) as e:
    raise InputArtifactError(
        f'{path} is not a training record: {e}. Expected a JSON object with '
        '"train" and "eval" dicts of numbers and numeric "steps", "epochs" '
        'and "training_time_s" (docs/guides/run-fn-modules.md, "The training '
        'record"), or no '
        f'such file. Received: {type(e).__name__}. Fix what the run_fn '
        'writes there, or write no such file.') from e
  return result


def custom_properties(result: Dict[str, Any]) -> Dict[str, Any]:
  """Flat `{name: number}` of a result record."""
  properties = {}
  for split in ('train', 'eval'):
    for name, value in (result.get(split) or {}).items():
      properties[f'{split}_{name}'] = float(value)
  properties['train_steps'] = int(result.get('steps', 0))
  properties['epochs'] = int(result.get('epochs', 0))
  properties['training_time_s'] = float(result.get('training_time_s', 0.0))
  if result.get('warm_start'):
    properties['warm_start_layers'] = len(result['warm_start']['loaded'])
  return properties


def attach(artifacts: Iterable[Any], result: Dict[str, Any]) -> None:
  """Sets the result's numbers as custom properties of each artifact."""
  for name, value in custom_properties(result).items():
    for artifact in artifacts:
      if isinstance(value, int):
        artifact.set_int_custom_property(name, value)
      else:
        artifact.set_float_custom_property(name, value)
