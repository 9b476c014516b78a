"""The generic-trainer command line, checked before anything heavy loads.

`parse` turns the arguments into a `Request`, or raises
`InvalidArgumentError` with a message that names the flag, says what was
expected and received, and what to do; `cli.main` prints it and exits 2.
Nothing here imports TensorFlow.
"""

import argparse
import difflib
import json
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence

import attr

from generic_trainer.system import paths
from generic_trainer.plan import settings
from generic_trainer.plan.entry_points import COMMAND
from generic_trainer.usercode import module_loader
from generic_trainer.usercode import static_spec
from generic_trainer.errors import InputArtifactError
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import UserModuleError
from generic_trainer.data import csv_dialect
from generic_trainer.data import local_files
from generic_trainer.data import tfrecords
from generic_trainer.command.layout import Layout
from generic_trainer.command.layout import DATA, HYPERPARAMETERS, MODEL, RUN, SCHEMA  # pylint: disable=g-multiple-import
from generic_trainer.system import output_folder
from generic_trainer.data.kept import settings as kept_settings
from generic_trainer.version import __version__
from generic_trainer.keys import SAVED_MODEL_FILE
from generic_trainer.keys import SCHEMA_FILE

PROG = 'generic-trainer'
EVAL_ON_TRAIN = 'train'  # `--eval-data train`: evaluate on the train data.
PROGRESS = {'auto': None, 'bar': True, 'lines': False}
_JSON_NUMBER = re.compile(r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?')
_DATA_KINDS = ('a CSV file (*.csv) or TFRecord files of tf.Example '
               '(*.tfrecord, *.gz)')


class _Parser(argparse.ArgumentParser):

  def error(self, message):
    self.print_usage(sys.stderr)
    self.exit(2, f'{PROG}: error: {message}. Run `{PROG} --help` for the '
                 'arguments.\n')


_EPILOG = f"""example:
  {PROG} --module-file penguin_spec.py --train-data 'data/*.csv' \\
      --output-dir out --steps 100

exit status:
  0    trained, validated and published to OUTPUT_DIR/{MODEL}
  1    the run failed (module, data, spec, training or export); the message
       says what to do, and an earlier model stays as it was
  2    the command line is wrong
  130  interrupted (Ctrl-C); nothing published, the same command resumes
  143  stopped by SIGTERM (a preemption); the last line says where, what
       was saved and the command that resumes

OUTPUT_DIR gets {MODEL}/ (only once validated), {RUN}/ (history.json,
tensorboard/, train_result.json), {DATA}/ and {SCHEMA}/{SCHEMA_FILE}; a run
replaces what an earlier run wrote there. A training that did not finish
resumes from its last checkpoint when the same command runs again (a run_fn
only if it uses the resume helpers of generic_trainer.resume)."""


@attr.s(frozen=True)
class Request:
  """A checked command line.

  Attributes:
    module_file: Absolute path of the module file.
    train_data: Train files (CSV, or TFRecords of tf.Example).
    eval_data: Eval files; None means a held-out third of the train data
      (`command.holdout`), or the train data itself with `eval_on_train`.
    schema: A schema.pbtxt to use, or None to infer one.
    output_dir: Absolute path of the output folder.
    steps, eval_steps: Train and eval steps, or None.
    hparams: Hyperparameters (a dict), or None.
    run_fn: The module's entry point by name, or None to find it.
    keras_version: 'keras3', 'tf_keras', or None.
    backend: 'tensorflow', 'jax', or None (the TrainSpec's, else TensorFlow).
    num_workers: Local worker processes: N, a range 'MIN:MAX', or None
      (one process). Not part of `resume_key`: the data order does not
      depend on it, so a run resumed with another count is still exact.
    interactive: True for a progress bar, False for log lines, None for a
      bar on a terminal.
    resume: Whether to resume from the checkpoint an unfinished run with
      the same `resume_key` left (False: remove it and start over).
    base_model: A SavedModel folder to warm-start from, or None; the new
      model must keep its signatures unless `allow_signature_change`.
    allow_signature_change: Publish though the base model's signatures differ.
    started: `time.monotonic()` when the process started.
    csv_delimiter: What separates the fields of CSV data; None: commas.
    parsed_rows: `kept_settings.KeptRows`, or None: nothing kept.
  """
  module_file = attr.ib(type=str)
  train_data = attr.ib(type=List[str])
  output_dir = attr.ib(type=str)
  started = attr.ib(type=float)
  eval_data = attr.ib(type=Optional[List[str]], default=None)
  schema = attr.ib(type=Optional[str], default=None)
  steps = attr.ib(type=Optional[int], default=None)
  eval_steps = attr.ib(type=Optional[int], default=None)
  hparams = attr.ib(type=Optional[Dict[str, Any]], default=None)
  run_fn = attr.ib(type=Optional[str], default=None)
  keras_version = attr.ib(type=Optional[str], default=None)
  backend = attr.ib(type=Optional[str], default=None)
  num_workers = attr.ib(type=Any, default=None)
  interactive = attr.ib(type=Optional[bool], default=None)
  resume = attr.ib(type=bool, default=True)
  base_model = attr.ib(type=Optional[str], default=None)
  allow_signature_change = attr.ib(type=bool, default=False)
  eval_on_train = attr.ib(type=bool, default=False)
  csv_delimiter = attr.ib(type=Optional[str], default=None)
  parsed_rows = attr.ib(default=None)


def _parser() -> argparse.ArgumentParser:
  parser = _Parser(
      prog=PROG, allow_abbrev=False,  # --step is not taken for --steps.
      formatter_class=argparse.RawDescriptionHelpFormatter,
      description='Train a module file (a TrainSpec or a run_fn) on local '
      'CSV or TFRecord data as\nGenericTrainer does in a pipeline; validate '
      'the export with its checks and publish\nit to OUTPUT_DIR/model.',
      epilog=_EPILOG)
  parser.add_argument('--version', action='version',
                      version=f'{PROG} {__version__}',
                      help='print the version and exit')
  add = parser.add_argument_group('data').add_argument
  add('--train-data', required=True, action='append', metavar='PATH',
      help='train data: a CSV file, TFRecord files of tf.Example, a folder '
      "of either, or a quoted glob ('data/*.csv'); may repeat")
  add('--eval-data', action='append', metavar='PATH',
      help='eval data, like --train-data; `train` evaluates on the train '
      'data itself (default: a held-out third of the train data, a hash '
      "split of the rows as CsvExampleGen's default 2:1)")
  add('--schema', metavar='SCHEMA.PBTXT',
      help='the schema (default: inferred from the train data)')
  add('--csv-delimiter', metavar='D',
      help="what separates the fields of CSV data: ',' (default), ';', "
      "'|' or tab; a file separated by another than this is refused")
  add = parser.add_argument_group('training').add_argument
  add('--module-file', required=True, metavar='M',
      help='the module file: a TrainSpec subclass or a run_fn(fn_args)')
  add('--run-fn', metavar='NAME', help='the entry point: a top-level '
      'function or TrainSpec class of the module (default: its run_fn or '
      'its TrainSpec)')
  add('--steps', metavar='N', help='train steps (default, or 0 as in TFX: '
      "one pass over the train data per epoch for a TrainSpec; a run_fn's "
      'fn_args.train_steps is the train rows / 32, Keras\'s default batch '
      'size, and the command says how many)')
  add('--eval-steps', metavar='N', help='eval steps (default, or 0 as in '
      "TFX: all the eval data for a TrainSpec; a run_fn's fn_args.eval_steps is the eval rows "
      "/ 32, Keras's default batch size, and the command says how many)")
  add('--hparams', metavar='JSON', help="hyperparameters, a JSON object: "
      "'{\"learning_rate\": 0.01}' (fn_args.hyperparameters, spec.hparams)")
  add('--keras-version', metavar='{keras3,tf_keras}',
      help='what tf.keras means (default: as TensorFlow decides)')
  add('--backend', metavar='{tensorflow,jax}',
      help="the Keras backend to train on (default: the TrainSpec's "
      'backend, else tensorflow)')
  add('--base-model', metavar='DIR',
      help='a SavedModel folder (an earlier run\'s OUTPUT_DIR/model) to '
      'warm-start from (fn_args.base_model); the new model must keep its '
      'signatures')
  add('--allow-signature-change', action='store_true',
      help='publish even if the signatures differ from --base-model\'s')
  add('--no-resume', action='store_true',
      help='start over, even where an unfinished run of the same module, '
      'data and flags left a checkpoint in OUTPUT_DIR (default: resume '
      'from it)')
  add = parser.add_argument_group('outputs').add_argument
  add('--output-dir', required=True, metavar='DIR',
      help='where the model and the run outputs go')
  add('--progress', default='auto', metavar='{auto,bar,lines}',
      help='a progress bar or log lines (default auto: a bar on a terminal)')
  add = parser.add_argument_group('workers').add_argument
  add('--num-workers', metavar='N|MIN:MAX',
      help='train with N local worker processes (MultiWorkerMirroredStrategy)'
      ', or a range MIN:MAX: a group that restarts smaller when a worker '
      'cannot come back and grows back (default: one process)')
  kept_settings.add(parser.add_argument_group('cache').add_argument)
  return parser


def _check_flag_names(parser: argparse.ArgumentParser,
                      argv: Sequence[str]) -> None:
  """Every `--name` of `argv` is one of the parser's, spelled out whole; an
  unknown one is named with the nearest known one, before argparse would
  answer a typo of a required flag with "required: --train-data"."""
  known = sorted(o for action in parser._actions  # pylint: disable=protected-access
                 for o in action.option_strings if o.startswith('--'))
  for arg in argv:
    if arg == '--':
      return
    name = arg.split('=', 1)[0]
    if not name.startswith('--') or name in known:
      continue
    _check_foreign_flag(name, arg, argv)
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    starts = [k for k in known if k.startswith(name)]
    guess = near[0] if near else (starts[0] if len(starts) == 1 else None)
    raise InvalidArgumentError(
        f'{name} is not a flag of {PROG}'
        + (f'; did you mean {guess}?' if guess else '.')
        + ' Expected flags spelled out whole (abbreviations are not taken). '
        f'Received: {arg!r}. '
        + (f'Write {guess}' if guess else f'Run `{PROG} --help` for the flags')
        + '.')


# Flags a TFX or Keras user brings, which generic-trainer spells otherwise
# or sets elsewhere: (flags, what it is here, what to write: '{value}' is
# the value given, or N). Said before the nearest spelling, which for
# `--train-steps` would be `--train-data`.
_STEPS = ('the train steps are --steps here (TFX: '
          'TrainArgs(num_steps=...), fn_args.train_steps)', '--steps {value}')
_EVAL_STEPS = ('the eval steps are --eval-steps here (TFX: '
               'EvalArgs(num_steps=...), fn_args.eval_steps)',
               '--eval-steps {value}')
_EPOCHS = ('the number of epochs belongs to the module. A TrainSpec '
           'sets its class attribute `epochs = {value}` (--steps N then '
           'spreads N steps over those epochs); a run_fn passes epochs to '
           'its own model.fit(...), and may read them from --hparams '
           '\'{{"epochs": {value}}}\' as fn_args.hyperparameters["epochs"]',
           'epochs = {value} in the TrainSpec, or --hparams '
           '\'{{"epochs": {value}}}\' for a run_fn that reads it')
_BATCH_SIZE = ('the batch size belongs to the module. A TrainSpec sets '
               'its class attribute `batch_size = {value}`; a run_fn passes '
               'it to its own input_fn, and may read it from --hparams '
               '\'{{"batch_size": {value}}}\' as '
               'fn_args.hyperparameters["batch_size"]',
               'batch_size = {value} in the TrainSpec, or --hparams '
               '\'{{"batch_size": {value}}}\' for a run_fn that reads it')
_LEARNING_RATE = ('the learning rate belongs to the optimizer of the module. '
                  "A TrainSpec's build_optimizer() sets it (keras.optimizers."
                  'Adam(self.hparams.get("learning_rate", 1e-2)); a canned '
                  'spec: its class attribute `learning_rate = {value}`); a '
                  'run_fn builds its own optimizer. Each can read --hparams '
                  '\'{{"learning_rate": {value}}}\' (spec.hparams, '
                  'fn_args.hyperparameters; a canned spec takes it as is)',
                  '--hparams \'{{"learning_rate": {value}}}\'')
_FOREIGN = {
    **dict.fromkeys(('--batch-size', '--batch_size', '--train-batch-size',
                     '--train_batch_size'), _BATCH_SIZE),
    **dict.fromkeys(('--learning-rate', '--learning_rate', '--lr'),
                    _LEARNING_RATE),
    **dict.fromkeys(('--train-steps', '--train_steps', '--num-steps',
                     '--num_steps', '--train-num-steps', '--max-steps',
                     '--max_steps'), _STEPS),
    **dict.fromkeys(('--num-eval-steps', '--eval-num-steps', '--eval_steps',
                     '--validation-steps', '--validation_steps'),
                    _EVAL_STEPS),
    **dict.fromkeys(('--epochs', '--num-epochs', '--num_epochs',
                     '--train-epochs', '--train_epochs'), _EPOCHS),
}


def _check_foreign_flag(name: str, arg: str, argv: Sequence[str]) -> None:
  """A flag of TFX's or Keras's vocabulary (`_FOREIGN`) is told where it
  is set here."""
  if name not in _FOREIGN:
    return
  where, todo = _FOREIGN[name]
  value = arg.split('=', 1)[1] if '=' in arg else None
  received = arg
  following = list(argv)[list(argv).index(arg) + 1:]
  if value is None and following and not following[0].startswith('--'):
    value = following[0]
    received = f'{arg} {value}'
  value = value or 'N'
  raise InvalidArgumentError(
      f'{name} is not a flag of {PROG}: {where.format(value=value)}. '
      f'Expected flags of {PROG} (`{PROG} --help` lists them). Received: '
      f'{received}. Write {todo.format(value=value)}.')


def _check_strays(strays: List[str], argv: Sequence[str]) -> None:
  """Words no flag takes: most often the files of a glob the shell expanded
  (`--train-data data/*.csv` unquoted), each after the first a stray."""
  if not strays:
    return
  files = [s for s in strays if os.path.exists(s)]
  if files:
    raise InvalidArgumentError(
        f'{len(strays)} path(s) follow a flag that takes one: {strays[:3]!r}'
        f'{" and more" if len(strays) > 3 else ""}. The shell expands an '
        'unquoted glob into one word per file. Expected one path or a '
        "quoted glob per --train-data or --eval-data. Received: {strays!r}. "
        "Quote the glob (--train-data 'data/*.csv'), pass the folder "
        '(--train-data data), or repeat the flag for each file.')
  raise InvalidArgumentError(
      f'unrecognized arguments: {" ".join(strays)}. Expected flags and their '
      f'values only. Received: {list(argv)!r}. Remove them, or put the flag '
      'they belong to before them.')


def parse(argv: Optional[Sequence[str]],
          started: float) -> Request:
  """Checks the command line; `started` is the process's start.

  Raises:
    InvalidArgumentError: an argument is wrong; the message names it.
    SystemExit: argparse's own errors (a missing or unknown argument).
  """
  parser = _parser()
  args = list(sys.argv[1:] if argv is None else argv)
  _check_flag_names(parser, args)
  ns, strays = parser.parse_known_args(args)
  _check_strays(strays, args)
  module_file = _module_file(ns.module_file)
  output_dir = _output_dir(ns.output_dir)
  train_data = _data_files('--train-data', ns.train_data)
  eval_on_train = _eval_on_train(ns.eval_data)
  eval_data = (_data_files('--eval-data', ns.eval_data)
               if ns.eval_data and not eval_on_train else None)
  schema = _existing('--schema', ns.schema, f'a {SCHEMA_FILE} (a TFMD Schema in '
                     'text format, as SchemaGen writes it)', ', or leave '
                     '--schema out to infer the schema from the train data'
                     ) if ns.schema else None
  base_model = _base_model(ns.base_model) if ns.base_model else None
  inputs = {'--module-file': [module_file], '--train-data': train_data,
            '--eval-data': eval_data or [], '--schema': [schema] if schema
            else []}
  _check_outside_outputs(inputs, output_dir)
  num_workers = _num_workers(ns.num_workers)
  settings.check_settings(COMMAND, keras_version=ns.keras_version,
                      backend=ns.backend, num_workers=num_workers)
  if ns.progress not in PROGRESS:
    raise InvalidArgumentError(
        '--progress must be auto, bar or lines. Received: '
        f'--progress={ns.progress!r}. Use bar for Keras\'s progress bar, '
        'lines for a log line per epoch.')
  if ns.run_fn is not None:
    _check_run_fn(ns.run_fn, module_file)
  static_spec.check_heads_on_jax(module_file, ns.backend,
                                 f'--backend={ns.backend}', ns.run_fn)
  return Request(
      module_file=module_file, train_data=train_data, eval_data=eval_data,
      schema=schema, output_dir=output_dir,
      steps=_steps('--steps', ns.steps),
      eval_steps=_steps('--eval-steps', ns.eval_steps),
      hparams=_hparams(ns.hparams), run_fn=ns.run_fn,
      keras_version=ns.keras_version, backend=ns.backend,
      num_workers=num_workers, interactive=PROGRESS[ns.progress],
      resume=not ns.no_resume, started=started, base_model=base_model,
      allow_signature_change=ns.allow_signature_change,
      eval_on_train=eval_on_train,
      csv_delimiter=csv_dialect.parse_delimiter(ns.csv_delimiter),
      parsed_rows=kept_settings.kept_rows(
          ns.parsed_rows_cache, ns.parsed_rows_budget, output_dir,
          [p for paths_ in inputs.values() for p in paths_] + [base_model]))


def _eval_on_train(values: Optional[List[str]]) -> bool:
  """Whether `--eval-data train` asks for the train data itself."""
  if not values or EVAL_ON_TRAIN not in values:
    return False
  if len(values) > 1:
    raise InvalidArgumentError(
        f'--eval-data {EVAL_ON_TRAIN} means the train data itself and takes '
        'no other --eval-data. Expected either `--eval-data train` alone or '
        f'eval files. Received: --eval-data={values!r}. Pass one or the '
        'other (a file named train: ./train).')
  return True


def _existing(flag: str, path: str, expected: str, todo: str) -> str:
  if not os.path.isfile(path):
    if os.path.isdir(path):
      what = 'is a folder'
    elif os.path.exists(path):  # A FIFO, a device, a socket.
      what = 'is not a regular file (a FIFO, a device or a socket)'
    else:
      what = 'does not exist'
    raise InvalidArgumentError(
        f'{flag} {what}. Expected {expected}. Received: '
        f'{flag}={path!r}{paths.cwd_note(path)}. Check the path{todo}.')
  return os.path.abspath(path)


def _base_model(path: str) -> str:
  if not os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
    what = ('does not exist' if not os.path.exists(path) else
            f'holds no {SAVED_MODEL_FILE}')
    raise InvalidArgumentError(
        f'--base-model {what}. Expected a SavedModel folder, such as the '
        f'model/ of an earlier run. Received: --base-model={path!r}'
        f'{paths.cwd_note(path)}. Check the path, or leave --base-model out '
        'to train from scratch.')
  return os.path.abspath(path)


def _module_file(path: str) -> str:
  path = _existing('--module-file', path, 'a Python file (.py) that defines '
                   'a TrainSpec or a run_fn', '; an absolute path avoids '
                   'surprises')
  if not path.endswith('.py'):
    raise InvalidArgumentError(
        '--module-file must be a Python source file, ending in .py. '
        f'Received: --module-file={path!r}. Pass the module\'s .py file.')
  return path


def _output_dir(path: str) -> str:
  if not path.strip():
    raise InvalidArgumentError(
        '--output-dir is empty. Expected a folder for the model and the run '
        "outputs (created if missing). Received: --output-dir=''. Pass a "
        'path, e.g. --output-dir=out.')
  if '://' in path:
    raise InvalidArgumentError(
        '--output-dir must be a local folder. Received: '
        f'--output-dir={path!r}. Write locally, then copy model/ where it '
        'is served from.')
  if os.path.exists(path) and not os.path.isdir(path):
    raise InvalidArgumentError(
        '--output-dir is a file. Expected a folder (created if missing). '
        f'Received: --output-dir={path!r}. Choose another path.')
  _check_writable(path)
  output_folder.check(os.path.abspath(path))
  foreign = Layout(os.path.abspath(path)).foreign()
  if foreign:
    names = ', '.join(os.path.basename(p) + '/' for p in foreign)
    raise InvalidArgumentError(
        f'--output-dir already holds {names}, which generic-trainer did not '
        'write and a run would replace. Expected a new or empty folder, or '
        f'one an earlier run wrote. Received: --output-dir={path!r}. Choose '
        'another --output-dir.')
  return os.path.abspath(path)


def _check_writable(path: str) -> None:
  """The folder, or the nearest existing folder above it, can be written."""
  existing = os.path.abspath(path)
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.access(existing, os.W_OK | os.X_OK):
    where = ('it' if existing == os.path.abspath(path) else
             f'{existing}, where it would be created,')
    raise InvalidArgumentError(
        f'--output-dir cannot be written: {where} is not writable by this '
        'user. Expected a folder the command can write the model and the run '
        f'outputs to. Received: --output-dir={path!r}. Choose another '
        'folder, or change its permissions.')


def _data_files(flag: str, patterns: List[str]) -> List[str]:
  files = []
  for pattern in patterns:
    try:
      matched = (_folder_files(flag, pattern) if os.path.isdir(pattern)
                 else local_files.resolve_files(pattern))
    except InputArtifactError:
      raise InvalidArgumentError(
          f'{flag} matched no file. Expected {_DATA_KINDS}, a glob, or '
          f'several {flag}. Received: {flag}={pattern!r}'
          f'{paths.cwd_note(pattern)}. '
          "Check the path; quote a glob ('data/*.csv') so that the shell "
          'passes it as it is.') from None
    files += [f for f in map(os.path.abspath, matched) if f not in files]
  csv_files = [f for f in files if f.endswith('.csv')]
  if csv_files and len(csv_files) < len(files):
    raise InvalidArgumentError(
        f'{flag} mixes CSV and TFRecord files. Expected CSV files only or '
        f'TFRecord files only. Received: {flag}={patterns!r}, matching '
        f'{len(csv_files)} CSV and {len(files) - len(csv_files)} other '
        'file(s). Pass one kind of file.')
  return files


def _folder_files(flag: str, folder: str) -> List[str]:
  """The data files of a folder: its CSV files, else its TFRecord files
  (*.tfrecord*, *.gz); says which were taken."""
  names = sorted(n for n in os.listdir(folder)
                 if os.path.isfile(os.path.join(folder, n)))
  csv_files = [n for n in names if n.endswith('.csv')]
  records = [n for n in names
             if '.tfrecord' in n or tfrecords.compression(n)]
  taken, kind = (csv_files, 'CSV') if csv_files else (records, 'TFRecord')
  if not taken:
    raise InvalidArgumentError(
        f'{flag} is a folder with no data file. Expected {_DATA_KINDS} in '
        f'it. Received: {flag}={folder!r}{paths.cwd_note(folder)}, holding '
        f'{len(names)} other file(s). Pass the data files, or the folder '
        'that holds them.')
  shown = ', '.join(taken[:5]) + (f' and {len(taken) - 5} more'
                                  if len(taken) > 5 else '')
  print(f'{flag} {folder}: taking its {len(taken)} {kind} file(s): {shown}'
        + (f' (not its {len(records)} TFRecord file(s))'
           if csv_files and records else ''), file=sys.stderr)
  return [os.path.join(folder, n) for n in taken]


def _check_outside_outputs(inputs: Dict[str, List[str]],
                           output_dir: str) -> None:
  """An input inside a folder the run rewrites would be deleted."""
  managed = Layout(output_dir).managed()
  for flag, paths in inputs.items():
    for path in paths:
      real = os.path.realpath(path)
      for folder in managed:
        if os.path.commonpath([real, os.path.realpath(folder)]) == (
            os.path.realpath(folder)):
          raise InvalidArgumentError(
              f'{flag} {path} lies in {folder}, which a run clears first. '
              'Expected inputs outside the folders the run writes '
              f'({MODEL}/, {RUN}/, {DATA}/, {SCHEMA}/, {HYPERPARAMETERS}/). '
              'Received: '
              f'{flag}={path!r}, --output-dir={output_dir!r}. Move the '
              'file, or choose another --output-dir.')


def _num_workers(value: Optional[str]):
  """--num-workers as the component's setting: N as an int, a range as
  its text (`settings.check_settings` checks both)."""
  if value is not None and value.strip().isdigit():
    return int(value)
  return value


def _steps(flag: str, value: Optional[str]) -> Optional[int]:
  """--steps or --eval-steps, by the component's rule (`settings.steps`:
  0 is unset, as in TFX)."""
  try:
    number = int(value) if value is not None else None
  except ValueError:
    number = value  # Not a number: refused by the rule, as typed.
  return settings.steps(number, flag, f'{flag}={value!r}')


def _hparams(value: Optional[str]) -> Optional[Dict[str, Any]]:
  if value is None:
    return None
  example = '\'{"learning_rate": 0.01}\''
  try:
    parsed = json.loads(value)
  except ValueError as e:
    raise InvalidArgumentError(
        f'--hparams must be a JSON object such as {example}. Received: '
        f'--hparams={value!r}, which is not JSON ({e}). Quote the whole '
        'object for the shell and use double quotes inside it.') from None
  if not isinstance(parsed, dict):
    raise InvalidArgumentError(
        f'--hparams must be a JSON object such as {example}. Received: '
        f'--hparams={value!r}, a JSON {type(parsed).__name__}. Wrap the '
        'values in an object that names them.')
  quoted = [k for k, v in parsed.items() if isinstance(v, str) and
            _JSON_NUMBER.fullmatch(v.strip())]
  if quoted:  # Maybe meant as text; said now, named again if it fails.
    print(f'--hparams: {", ".join(quoted)} given as text ('
          + ', '.join(f'"{k}": {json.dumps(parsed[k])}' for k in quoted)
          + '), which the code receives as a str; a number is written '
          'without quotes in JSON.', file=sys.stderr, flush=True)
  return parsed


def _check_run_fn(name: str, module_file: str) -> None:
  """The name is a top-level definition of the module (when it parses)."""
  if not name.isidentifier():
    raise InvalidArgumentError(
        '--run-fn must be the name of a top-level function or TrainSpec '
        'class of the module file, such as run_fn or PenguinSpec. Received: '
        f'--run-fn={name!r}. Pass a plain name, without the module.')
  try:
    kinds = module_loader.top_level_names(module_file)
  except UserModuleError:
    return  # Loading the module reports it, with the line.
  if kinds is None:
    return  # A star import: cannot know statically.
  if name not in kinds:
    public = sorted(n for n in kinds if not n.startswith('_'))
    raise InvalidArgumentError(
        f'--run-fn names `{name}`, which {module_file} does not define at '
        f'top level. Expected a function taking fn_args or a TrainSpec '
        f'class. Received: --run-fn={name!r}; the module defines: '
        f'{", ".join(public) or "nothing public"}. Pass one of those.')
