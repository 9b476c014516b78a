"""The command's eval data (a held-out hash split of the input, by
default), and the steps a run_fn gets when no flag sets them.

Without `--eval-data`, `generic-trainer` holds out a third of the train data
for evaluation, as CsvExampleGen's default split does (hash buckets 2:1,
train then eval): each record goes to bucket `hash % 3`, bucket 2 to eval.
The hash is SHA-256 of the tf.Example serialized deterministically (map
keys sorted), so the same rows are held out on every run and every machine;
CsvExampleGen hashes with farmhash, so its rows are not these, only the
proportion. `--eval-data train` evaluates on the train data on purpose;
`--eval-data FILES` on those files.

`evaluation` describes the choice; it goes to the command's output and to
`train_result.json` (its `evaluation` entry).

A `run_fn` given no `--eval-steps` gets a finite `fn_args.eval_steps`
(`run_fn_eval_steps`): TFX's tutorial `run_fn`s repeat their eval dataset
(TFXIO's `num_epochs=None`, or `.repeat()`) and pass
`validation_steps=fn_args.eval_steps`, which None would make an
evaluation that never ends. The batch size the `run_fn` reads the eval
data in is its own, unknown before it runs; the steps are the eval rows
once in batches of `DEFAULT_BATCH`, Keras's own default. A TrainSpec, whose
eval dataset ends, evaluates on all the eval data.

Likewise a `run_fn` given no `--steps` gets a finite `fn_args.train_steps`
(`run_fn_train_steps`): the tutorials pass
`steps_per_epoch=fn_args.train_steps` with a train dataset that repeats,
which None makes a training that never ends under Keras 3 (and refused
as an "infinite dataset" under tf_keras). The steps are the train rows
once in batches of `DEFAULT_BATCH`: one pass over the train data per
epoch for a run_fn that batches by 32, more or fewer passes for one
that batches otherwise. A TrainSpec, whose train dataset ends, reads its
train data once per epoch.
"""

import hashlib
import os
from typing import Any, Dict, List, NamedTuple

from generic_trainer.errors import InputArtifactError
from generic_trainer.data import tfrecords
from generic_trainer.data import local_files
from generic_trainer.system import atomic_files
from generic_trainer.plan import settings
from generic_trainer.plan.entry_points import COMMAND
from generic_trainer.system.lazy import tf
from generic_trainer.keys import SPLIT_DATA_FILE

# Keras's batch size when none is given (`Model.fit`, `Model.evaluate`):
# the batches a run_fn's default eval steps are counted in.
DEFAULT_BATCH = 32
# CsvExampleGen's default output config: {train: 2, eval: 1} hash buckets.
TRAIN_BUCKETS, EVAL_BUCKETS = 2, 1
HELD_OUT = 'held_out'
TRAIN = 'train'
FILES = 'files'


class Split(NamedTuple):
  """The two split files `split` wrote, and their row counts."""
  train_files: List[str]
  eval_files: List[str]
  train_rows: int
  eval_rows: int


def bucket(serialized_example: bytes) -> int:
  """The hash bucket, 0-2, of a deterministically serialized tf.Example."""
  digest = hashlib.sha256(serialized_example).digest()
  return int.from_bytes(digest[:8], 'big') % (TRAIN_BUCKETS + EVAL_BUCKETS)


def is_held_out(serialized_example: bytes) -> bool:
  """Whether the record goes to eval (the last buckets, as in TFX)."""
  return bucket(serialized_example) >= TRAIN_BUCKETS


def split(files: List[str], train_dir: str, eval_dir: str) -> Split:
  """Writes the tf.Examples of `files` into `train_dir/data.gz` and
  `eval_dir/data.gz` by `is_held_out`.

  Raises:
    InputArtifactError: one of the splits would be empty (too few rows).
  """
  outs = [os.path.join(train_dir, SPLIT_DATA_FILE),
          os.path.join(eval_dir, SPLIT_DATA_FILE)]
  counts = [0, 0]
  for folder in (train_dir, eval_dir):
    atomic_files.make_folders(folder)
  mode = local_files.common_mode(files)  # The rows stay as private.
  with tfrecords.writer(outs[0], mode) as train, tfrecords.writer(
      outs[1], mode) as held:
    for path in files:
      for record in tfrecords.records(path):
        example = tf.train.Example.FromString(record)
        side = int(is_held_out(example.SerializeToString(deterministic=True)))
        (held if side else train).write(record)
        counts[side] += 1
  local_files.stamp_like(outs, files)  # The same rows: the same files.
  if not all(counts):
    raise InputArtifactError(
        f'The held-out split of the train data left {counts[0]} train and '
        f'{counts[1]} eval rows: too few rows to hold a third out. Expected '
        'at least one row on each side (a few dozen rows, in practice). '
        f'Received: {sum(counts)} rows in {", ".join(files)}. Pass '
        '--eval-data FILES to evaluate on other data, or --eval-data train '
        'to evaluate on the train data.')
  return Split([outs[0]], [outs[1]], counts[0], counts[1])


def evaluation(kind: str, **details: Any) -> Dict[str, Any]:
  """The `evaluation` entry of train_result.json: what the eval figures
  were measured on (`kind` is HELD_OUT, TRAIN or FILES)."""
  described = {
      HELD_OUT: ('a held-out third of the train data (hash split, as '
                 "CsvExampleGen's default 2:1)"),
      TRAIN: ('the train data itself (--eval-data train): training-set '
              'figures, not a measure of how the model does on new data'),
      FILES: 'the --eval-data files',
  }[kind]
  return {'data': kind, 'description': described, **details}


def describe(entry: Dict[str, Any]) -> str:
  """One line for the command's output, from an `evaluation` entry."""
  text = entry['description']
  if entry['data'] == HELD_OUT:
    text += (f': {entry["eval_rows"]} of '
             f'{entry["eval_rows"] + entry["train_rows"]} rows')
  return text


def plan(eval_files, eval_on_train: bool) -> str:
  """The line the command prints before it trains: what eval will be."""
  if eval_files:
    return f'Eval data: {", ".join(eval_files)}.'
  if eval_on_train:
    return settings.eval_on_train_line(COMMAND)
  return ('Eval data: a third of the train data, held out from training (a '
          "hash split of the rows, as CsvExampleGen's default 2:1; the same "
          'rows every run). --eval-data FILES evaluates on other files, '
          '--eval-data train on the train data.')


def eval_rows(entry: Dict[str, Any], eval_files: List[str]) -> int:
  """The rows of the eval split: known for a held-out split (`entry`, from
  `evaluation`), else counted in `eval_files` (TFRecords)."""
  if entry.get('eval_rows') is not None:
    return entry['eval_rows']
  return tfrecords.count(eval_files)


def train_rows(entry: Dict[str, Any], train_files: List[str]) -> int:
  """The rows of the train split: known for a held-out split (`entry`),
  else counted in `train_files` (TFRecords)."""
  if entry.get('train_rows') is not None:
    return entry['train_rows']
  return tfrecords.count(train_files)


def run_fn_eval_steps(rows: int) -> int:
  """A run_fn's `fn_args.eval_steps` without --eval-steps: the `rows` eval
  rows once, in batches of `DEFAULT_BATCH` (at least one step)."""
  return max(1, -(-rows // DEFAULT_BATCH))


def run_fn_train_steps(rows: int) -> int:
  """A run_fn's `fn_args.train_steps` without --steps: the `rows` train
  rows once, in batches of `DEFAULT_BATCH` (at least one step)."""
  return run_fn_eval_steps(rows)


def train_steps_line(steps: int, rows: int) -> str:
  """What the command says of the train steps it gave a run_fn."""
  return (f'Train steps of a run_fn: fn_args.train_steps={steps}, as '
          f'--steps was not given: the {rows} train rows once in batches of '
          f"{DEFAULT_BATCH}, Keras's default batch size (a run_fn reading "
          'other batch sizes trains on more or fewer rows per epoch; a '
          'repeating train dataset would never end with None). --steps N '
          'sets it.')


def eval_steps_line(steps: int, rows: int) -> str:
  """What the command says of the eval steps it gave a run_fn."""
  return (f'Eval steps of a run_fn: fn_args.eval_steps={steps}, as '
          f'--eval-steps was not given: the {rows} eval rows once in '
          f"batches of {DEFAULT_BATCH}, Keras's default batch size (a run_fn "
          'reading other batch sizes evaluates on more or fewer rows; a '
          'repeating eval dataset would never end with None). --eval-steps '
          'N sets it.')
