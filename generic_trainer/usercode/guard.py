"""Running user code so that it cannot end the trainer.

User code (a module file at import, `run_fn`, a TrainSpec's members) runs
in the trainer's own process. While it runs:

- `sys.exit()`, `exit()` and `quit()` raise SystemExit, which is caught and
  reported as the user's error instead of ending the trainer (in a pipeline,
  SystemExit would escape `LocalDagRunner.run` and the script exit 0);
- `os._exit()`, which would end the process at once without an exception,
  raises `ExitCalled` instead (the real one is put back afterwards);
- a module sees `sys.argv` of its own file alone, not the trainer's command
  line, so one that parses arguments at import does not print its usage.
Either way the run fails with a message that says where the call was, and
nothing is published.
"""

import contextlib
import json
import os
import re
import sys
import threading
import traceback
from typing import Any, Dict, Optional

from generic_trainer.errors import GenericTrainerError
from generic_trainer.errors import InputArtifactError
from generic_trainer.errors import RunFnError
from generic_trainer.errors import signalled_within
from generic_trainer.errors import summarize
from generic_trainer.errors import with_traceback
from generic_trainer.system import disk_full

# Frames of GenericTrainer's own code are left out of a user's traceback.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_THREADING = os.path.dirname(threading.__file__) + os.sep + 'threading.py'


class ExitCalled(BaseException):
  """`os._exit(code)` was called by user code; raised in its place.

  A BaseException, as SystemExit is, so that `except Exception` in user
  code does not swallow it.
  """

  def __init__(self, code: int = 0):
    super().__init__(code)
    self.code = code


# The threads running guarded code, and the `os._exit` calls of the other
# threads while it ran: (thread name, code, the caller's frames). A thread
# that user code started dies of ExitCalled, which nobody sees; the guard
# reports its call when the user's code returns (`user_code`).
_guarding = []
_exits_elsewhere = []


def _exit_called(code: int = 0):
  if _guarding and threading.current_thread() not in _guarding:
    frames = [f for f in traceback.extract_stack()[:-1]
              if not f.filename.startswith((_PACKAGE_DIR, _THREADING))]
    _exits_elsewhere.append((threading.current_thread().name, code,
                             ''.join(traceback.format_list(frames))))
  raise ExitCalled(code)


@contextlib.contextmanager
def guarded(argv0: Optional[str] = None):
  """While the block runs, `os._exit` raises ExitCalled; with `argv0`,
  `sys.argv` is `[argv0]`."""
  real_exit, argv = os._exit, sys.argv  # pylint: disable=protected-access
  os._exit = _exit_called  # pylint: disable=protected-access
  _guarding.append(threading.current_thread())
  if argv0 is not None:
    sys.argv = [argv0]
  try:
    yield
  finally:
    os._exit = real_exit  # pylint: disable=protected-access
    sys.argv = argv
    _guarding.remove(threading.current_thread())


# What user code raises when it tries to end the process: `except EXITS`.
EXITS = (SystemExit, ExitCalled)



def describe_exit(e: BaseException) -> str:
  """'sys.exit(0)' or 'os._exit(3)', for messages."""
  if isinstance(e, ExitCalled):
    return f'os._exit({e.code!r})'
  return f'sys.exit({e.code!r})'


def user_traceback(e: BaseException) -> str:
  """The traceback of `e` without the frames of GenericTrainer itself."""
  frames = traceback.extract_tb(e.__traceback__)
  frames = [f for f in frames if not f.filename.startswith(
      (_PACKAGE_DIR, '<frozen'))]
  return ''.join(traceback.format_list(frames)) + f'{type(e).__name__}: {e}'


@contextlib.contextmanager
def user_code(what: str, source: str, wrap: bool = True,
              hparams: Optional[Dict[str, Any]] = None,
              hparams_setting: str = '--hparams',
              custom_config: Optional[Dict[str, Any]] = None):
  """Runs the block as user code (see the module docstring); raises what it
  raises as a RunFnError with the user's traceback.

  `hparams` are the hyperparameters the code was given, and
  `hparams_setting` where they came from (`--hparams`): a number written
  as a JSON string there is named when Keras refuses it.

  Our own errors pass unchanged: they already say what is wrong (a
  TrainSpec check, a NaN loss...); so do a SIGTERM's PreemptedError and a
  stall's TrainingProcessError that a library re-raised as its own
  (`errors.signalled_within`). TensorFlow's DataLossError (a data file
  cut short or damaged past its first records) becomes an
  InputArtifactError. With `wrap` False (a notebook, which shows the
  user's traceback itself), the user's exceptions pass unchanged too; an
  exit still becomes a RunFnError.
  """
  with guarded():
    elsewhere = len(_exits_elsewhere)
    try:
      yield
      if len(_exits_elsewhere) > elsewhere:
        name, code, frames = _exits_elsewhere[elsewhere]
        del _exits_elsewhere[elsewhere:]
        raise RunFnError(with_traceback(
            f'{what} ({source}) called os._exit({code!r}) in the thread '
            f"{name!r}, which would end the trainer's process; the trainer "
            f'ended that thread there instead, and {what} went on without '
            'it. Expected user code (and the threads it starts) to return '
            'when done, or raise to fail the run. Received: '
            f'os._exit({code!r}) in thread {name!r}. Replace the call with a '
            'return or a raise (its traceback shows where it was called). '
            'Nothing was published.', frames + f'ExitCalled: {code!r}'))
    except GenericTrainerError:
      raise
    except EXITS as e:
      raise RunFnError(with_traceback(
          f'{what} ({source}) called {describe_exit(e)}, which would end the '
          "trainer's process. User code must return when it is done, or "
          'raise an exception to fail the run. Received: '
          f'{describe_exit(e)}. Replace the call with a return or a raise '
          '(its traceback shows where it was called). The trainer stopped '
          'it there and published nothing.', user_traceback(e))) from e
    except Exception as e:  # pylint: disable=broad-except
      signalled = signalled_within(e)
      if signalled is not None:  # Ours, wrapped by a library on its way.
        raise signalled from None
      if not wrap:
        raise
      full = disk_full.error_for(e, f'{what} ({source})')
      if full is not None:
        raise full from e
      if _is_data_loss(e):
        raise InputArtifactError(
            f'Reading the data failed while {what} ({source}) trained: '
            f'{summarize(e)}. A data file is corrupt or truncated (its first '
            'records read, so it was damaged or cut short further on). '
            'Expected whole TFRecord files. Received: the error above. '
            'Re-run the component that produced the examples (or re-write '
            'the files). Nothing was published.') from e
      idiom = (keras2_idiom(e) or sequential_idiom(e) or
               infinite_dataset_idiom(e) or parse_type_idiom(e) or
               string_hparam_idiom(e, hparams, hparams_setting) or
               custom_config_idiom(e, custom_config))
      if idiom is not None:
        raise RunFnError(with_traceback(
            f'{what} ({source}) raised {type(e).__name__}: '
            f'{summarize(e).rstrip(".")}. '
            f'{idiom}', user_traceback(e))) from e
      raise RunFnError(with_traceback(
          f'{what} ({source}) raised {type(e).__name__}: '
          f'{summarize(e).rstrip(".")}. '
          'Expected it to return once it has exported the model. Received: '
          f'{type(e).__name__}, whose traceback ends this message. Fix the '
          'code where its traceback points. Nothing was published.',
          user_traceback(e))) from e


# Keras 3's refusals of tf.keras 2's ways of saving (the way TFX's docs and
# templates save): (words of Keras's message, what was expected).
_KERAS2_SAVING = (
    ('save_format', 'Keras 3 takes no save_format'),
    ('Invalid filepath extension for saving',
     'Keras 3 saves a .keras or .h5 file with model.save(), not a folder'),
)


def keras2_idiom(e: BaseException) -> Optional[str]:
  """For Keras 3 refusing a tf.keras 2 way of saving a model
  (`model.save(dir, save_format='tf')`, `model.save(dir)`): what was
  expected and what to do; None for any other error."""
  text = str(e)
  for words, why in _KERAS2_SAVING:
    if words in text:
      return (
          f'This is tf.keras 2\'s way of saving a SavedModel; {why}. Expected '
          'a SavedModel in fn_args.serving_model_dir whose serving_default '
          'takes serialized tf.Example (one string input, `examples`), which '
          "is what Evaluator (TFMA) sends; Keras 3's model.export(dir) alone "
          'writes a signature of raw tensors, which TF Serving can call but '
          'Evaluator cannot. Received: the call in the traceback. Replace '
          'the call with an export that parses tf.Examples: a tf.function '
          'taking tf.TensorSpec([None], tf.string, "examples") that parses '
          "them with the schema's feature spec and calls the model, added "
          "as 'serving_default' to keras.export.ExportArchive "
          "(module_files/penguin_keras.py's _export; "
          'docs/guides/calling-the-model.md); or write the module as a '
          'TrainSpec, whose export has that signature; or run it under '
          "tf.keras 2 (keras_version='tf_keras', the command's "
          '--keras-version tf_keras), where TFX\'s model.save(dir, '
          "save_format='tf', signatures=...) works. Nothing was published.")
  return None


def infinite_dataset_idiom(e: BaseException) -> Optional[str]:
  """For tf_keras refusing `fit` on a dataset that repeats without a
  number of steps (`steps_per_epoch=fn_args.train_steps` with None, as
  TFX's tutorials write it): that the fix is the train steps, and where
  each entry point sets them; None for any other error."""
  if 'When providing an infinite dataset, you must specify' not in str(e):
    return None
  return (
      'The train (or eval) dataset repeats, as TFXIO\'s datasets do unless '
      'num_epochs is set, and tf.keras 2 will not read an endless dataset '
      'without a number of steps. Expected fn_args.train_steps (and '
      'fn_args.eval_steps) set, which a run_fn passes to model.fit as '
      'steps_per_epoch (and validation_steps). Received: steps None '
      '(fn_args.train_steps or fn_args.eval_steps unset, or the run_fn '
      'passed None). Set the steps: the command\'s --steps N (and '
      '--eval-steps N), the component\'s '
      'train_args=trainer_pb2.TrainArgs(num_steps=N) (and eval_args); or '
      'pass steps_per_epoch to model.fit. Nothing was published.')


# tf.io.parse_example's refusal of a feature parsed as another type than
# the one its tf.Example list holds (tensorflow/core/util/example_proto_fast_parsing.cc).
_PARSE_TYPE = re.compile(
    r"Key: ([^,]+), Index: \d+\.\s+Data types don't match\. Data type: "
    r'(\w+) but expected type: (\w+)')
_TF_DTYPES = {'int64': 'tf.int64', 'float': 'tf.float32', 'string': 'tf.string'}
_WRITTEN = {'int64': 'whole numbers (an int64_list: INT in the schema)',
            'float': 'numbers with decimals (a float_list: FLOAT in the schema)',
            'string': 'words (a bytes_list: BYTES in the schema)'}


def parse_type_idiom(e: BaseException) -> Optional[str]:
  """For a run_fn that parses a feature as another type than the data's
  (TFX's tutorial writes `tf.io.FixedLenFeature([1], tf.float32)` for
  every penguin column, and the data has ints): the feature, both types,
  and the spec line to write; None for any other error."""
  found = _PARSE_TYPE.search(str(e))
  if found is None:
    return None
  key, written, parsed = found.groups()
  dtype = _TF_DTYPES.get(written, written)
  return (
      f'The data holds {key!r} as {_WRITTEN.get(written, written)}, and the '
      f'run_fn parses it as {_TF_DTYPES.get(parsed, parsed)}: a feature spec '
      'or schema of its own (tf.io.FixedLenFeature(..., dtype=...) turned '
      'into a schema, as TFX\'s tutorials write) that differs from the '
      f'data\'s. Expected {key!r} parsed as {dtype}, as the data writes it. '
      f'Received: {key!r} parsed as {_TF_DTYPES.get(parsed, parsed)}. Write '
      f"{key!r}: tf.io.FixedLenFeature([1], {dtype}) in the spec (and cast "
      'it to float32 in the model where it needs floats), or parse with '
      "the data's own schema (fn_args.schema_path, which the command writes "
      'from the data or from --schema). Nothing was published.')


def sequential_idiom(e: BaseException) -> Optional[str]:
  """For a keras.Sequential called on a dict of features (what a
  tf.Example dataset yields): what it takes and how to write the model;
  None for any other error."""
  text = str(e)
  if 'when calling Sequential.call()' not in text or (
      'inputs={' not in text):
    return None
  return (
      'A keras.Sequential takes one tensor, and the dataset gives the model '
      'a dict of features (the parsed tf.Examples, by name). Expected a '
      'model that takes the dict: one keras.Input per feature, named after '
      'it. Received: a dict of features (the inputs Keras lists in the '
      'traceback). Build a functional model with named inputs: inputs = '
      '{k: keras.Input(shape=(1,), name=k) for k in FEATURE_KEYS}; x = '
      'keras.layers.Concatenate()(list(inputs.values())); then the layers '
      'on x; keras.Model(inputs, outputs). Or map the dataset to one tensor '
      '(dataset.map(lambda f, y: (tf.concat([f[k] for k in FEATURE_KEYS], '
      '-1), y))) and concatenate the same way in the serving signature. '
      'Nothing was published.')


_NUMBER = re.compile(r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?')


def string_hparam_idiom(e: BaseException,
                        hparams: Optional[Dict[str, Any]],
                        setting: str) -> Optional[str]:
  """For an error about a hyperparameter given as a JSON string that reads
  as a number (`{"learning_rate": "0.01"}`: Keras says "should be float
  ... Received instead: learning_rate=0.01", which hides the quotes): what
  was expected and how to write it; None for any other error."""
  if not hparams:
    return None
  if isinstance(hparams.get('values'), dict):
    hparams = hparams['values']  # keras_tuner.HyperParameters config.
  text = str(e)
  quoted = [(k, v) for k, v in hparams.items() if isinstance(v, str) and
            _NUMBER.fullmatch(v.strip())]
  # Named with its value (Keras: "learning_rate=0.01"), or the one such
  # value where Python refuses a str ("... 'float' and 'str'").
  named = [(k, v) for k, v in quoted if k in text and v.strip() in text]
  if not named and len(quoted) == 1 and "'str'" in text:
    named = quoted
  if not named:
    return None
  key, value = named[0]
  number = (int(value) if re.fullmatch(r'\s*[-+]?\d+\s*', value)
            else float(value))
  fixed = json.dumps({**hparams, key: number})
  written = f"{setting} '{fixed}'" if setting.startswith('--') else fixed
  return (
      f'{key} is the string {value!r} from {setting}, not a number: JSON '
      'keeps a quoted value as text, and the code passed it on as it was. '
      f'Expected a JSON number for {key}: {number}, without quotes. Received: '
      f'"{key}": {json.dumps(value)} (a string) in {setting}. Write the '
      f'number without quotes: {written}. Nothing was published.')


_CUSTOM_CONFIG_KEY = re.compile(
    r"custom_config\s*(?:\[\s*(['\"])(?P<index>[^'\"]+)\1\s*\]|"
    r"\.get\(\s*(['\"])(?P<get>[^'\"]+)\3)")


def custom_config_idiom(e: BaseException,
                        custom_config: Optional[Dict[str, Any]]
                        ) -> Optional[str]:
  """For user code that reads a key of `fn_args.custom_config` it was not
  given (a KeyError, or None subscripted): the key, what the training was
  given and how to pass it; None for any other error."""
  frames = traceback.extract_tb(e.__traceback__)
  line = frames[-1].line if frames else ''
  if not isinstance(e, (KeyError, TypeError, AttributeError)) or (
      'custom_config' not in (line or '')):
    return None
  if isinstance(e, KeyError):
    key = e.args[0] if e.args else None
  else:
    if custom_config is not None:
      return None  # Not the missing dict: another mistake on that line.
    found = _CUSTOM_CONFIG_KEY.search(line)
    key = (found.group('index') or found.group('get')) if found else None
  received = ('custom_config=None (none was given)' if custom_config is None
              else f'custom_config with the keys {sorted(custom_config)}')
  name = repr(key) if key is not None else 'a key'
  return (
      f'The code reads {name} of fn_args.custom_config, which this training '
      f'was not given. Expected custom_config to hold {name}. Received: '
      f'{received}. Pass it in the pipeline: GenericTrainer(custom_config='
      f'{{{name if key is not None else "KEY"}: ...}}) (as TFX\'s Trainer '
      'takes it); where none can be passed (the command, a notebook), read '
      'it with a default: (fn_args.custom_config or {}).get('
      f'{name if key is not None else "KEY"}, DEFAULT). Nothing was '
      'published.')


def _is_data_loss(e: BaseException) -> bool:
  tf = sys.modules.get('tensorflow')
  errors = getattr(tf, 'errors', None)
  return errors is not None and isinstance(e, errors.DataLossError)
