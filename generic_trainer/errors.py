"""Errors a GenericTrainer user can cause, and how their messages are made.

Each class subclasses the built-in exception that fits, so callers may catch
either ours or the built-in. Messages say what is wrong, what was expected,
what was received and what to do.
"""


class GenericTrainerError(Exception):
  """Base class of every error GenericTrainer raises on purpose."""


class InvalidArgumentError(GenericTrainerError, ValueError):
  """A component argument or execution property is wrong."""


class UserModuleError(GenericTrainerError, ImportError):
  """The user module cannot be found, imported, or lacks a usable `run_fn`."""


class RunFnError(GenericTrainerError, RuntimeError):
  """The user's `run_fn` raised; the original exception is the `__cause__`."""


class InputArtifactError(GenericTrainerError, ValueError):
  """An input artifact (examples, schema, hyperparameters...) is unusable."""


class ExportValidationError(GenericTrainerError, RuntimeError):
  """What `run_fn` exported is not a usable SavedModel; nothing was published."""


class SignatureChangeError(ExportValidationError):
  """The new export would break the clients of the base model's signatures;
  nothing was published."""


class ServingCheckError(ExportValidationError):
  """A signature of the export would fail the TF Serving clients that call
  it (a label required, a wrong input key, classes that are not strings...);
  nothing was published."""


class TrainingProcessError(GenericTrainerError, RuntimeError):
  """The child process that ran training died without reporting an error,
  or a training stalled (no progress for the stall limit) and was ended."""


class SpecError(GenericTrainerError, ValueError):
  """A TrainSpec does not fit the data: label, features, outputs, schedule."""


class NonFiniteLossError(GenericTrainerError, ArithmeticError):
  """The training loss became NaN or Inf; training stopped, nothing exported."""


class CheckpointError(GenericTrainerError, RuntimeError):
  """A resume checkpoint cannot be written or read, or does not fit this
  training (a handler's state that cannot be saved, a damaged file)."""


class PreemptedError(GenericTrainerError, RuntimeError):
  """SIGTERM stopped the training at a step boundary; a resume checkpoint
  of that step was written and nothing was published. The same run, started
  again, resumes there.

  Attributes:
    reached: Where the run was ('at step 7 (epoch 2, batch 2)', 'at epoch
      1, evaluating batch 812 of the run_fn's Keras fit'), or None.
  """

  def __init__(self, message: str = '', reached=None):
    super().__init__(message)
    self.reached = reached


class StorageError(GenericTrainerError, OSError):
  """A file could not be written where training writes: the disk is full
  (or over quota); nothing was published."""


class FolderInUseError(GenericTrainerError, BlockingIOError):
  """Another run holds the output folder: one run per folder at a time."""


class UnsafeFolderError(InvalidArgumentError):
  """A folder the run would write is not this user's alone (another owner,
  or writable by group or others), or a path that cannot be taken
  literally."""


class ModelFolderError(GenericTrainerError, OSError):
  """`model/` cannot be replaced safely: a mount point, or a link or file
  that no run made."""


# Where the traceback a message carries begins (the user's code that
# raised, as `usercode.guard.user_traceback` writes it). What precedes it is
# the reason, in four parts; a console that shows the reason alone (a
# local pipeline script's) leaves the traceback to its log.
TRACEBACK_HEADER = '\nIts traceback:\n'


def with_traceback(reason: str, traceback_text: str) -> str:
  """A message: `reason` (what is wrong, expected, received, what to do),
  then the traceback, last."""
  return f'{reason}{TRACEBACK_HEADER}{traceback_text}'


def signalled_within(error: BaseException):
  """The PreemptedError or TrainingProcessError that `error` wraps, or
  None. Those two are raised by our signal handlers (SIGTERM, the stall
  watch's SIGALRM) wherever the main thread is, and a library's `except
  Exception` on the way out may re-raise them as its own: TensorFlow's
  tf.function binding raises a TypeError `from` whatever interrupted it.
  The chain is followed through `__cause__` and `__context__`."""
  seen = set()
  inner = error.__cause__ or error.__context__
  while inner is not None and id(inner) not in seen:
    if isinstance(inner, (PreemptedError, TrainingProcessError)):
      return inner
    seen.add(id(inner))
    inner = inner.__cause__ or inner.__context__
  return None


def reason(error: BaseException) -> str:
  """The message of `error` without the traceback it carries, if any."""
  return str(error).split(TRACEBACK_HEADER, 1)[0]


_NOISE = ('Graph execution error', 'Detected at node', '<stack traces',
          '[[', 'File "', 'Traceback', 'Function call stack')


def summarize(e: BaseException) -> str:
  """The line of an error that says what went wrong.

  TensorFlow's errors open with 'Graph execution error:' and node names; the
  line that matters (e.g. 'Feature: fare ... is required') comes later.
  """
  text = getattr(e, 'message', None) or str(e)
  lines = [l.strip() for l in str(text).strip().splitlines() if l.strip()]
  useful = [l for l in lines if not l.startswith(_NOISE)]
  line = (useful or lines or [type(e).__name__])[0]
  # '{{function_node __wrapped__MakeIterator_device_/job:...}} Cast string
  # to float is not supported': the node says nothing to a user.
  if line.startswith('{{function_node') and '}} ' in line:
    line = line.split('}} ', 1)[1]
  return line


class StepJobError(GenericTrainerError, RuntimeError):
  """The TrainJob or TFJob a Kubeflow pipeline step launched for its workers
  failed, could not be made, or was deleted by someone else; the step
  published nothing (`kubeflow.step_job`)."""
