"""What a person running GenericTrainer on this machine sees.

One rule for both consoles: show what runs and how it goes, keep the rest
(TensorFlow's, absl's, Google clients' and setuptools' lines) out of sight.

- `command_lines()`: the `generic-trainer` command prints the progress log
  (`generic_trainer.system.progress`) as plain lines and warnings with their
  level; other INFO lines are dropped.
- `pipeline_console(log_path)`: a pipeline run with LocalDagRunner shows one
  line as each component starts and one as it finishes (with its time),
  the trainer's progress (the progress log; Keras's end-of-epoch lines)
  and what the caller prints; everything, those lines included, goes to
  `log_path`, whose path the caller prints. Output is captured at the file
  descriptors, so the lines of TensorFlow's C++ code and of child
  processes (a Keras child, local workers) land in the log too.
"""

import contextlib
import logging
import os
import re
import sys
import threading
import time
import traceback
from typing import Callable, Dict, Iterator, Optional, TextIO
import tempfile
import warnings

from generic_trainer.system import progress
from generic_trainer.errors import GenericTrainerError, reason, summarize
from generic_trainer.system.lazy import absl_logging

# The lines of TFX's LocalDagRunner that say a component started or ended.
_COMPONENT_RUNNING = 'Component %s is running.'
_COMPONENT_FINISHED = 'Component %s is finished.'
# Keras's progress bar, redrawn with \r, ANSI colours and backspaces; its
# last drawing of an epoch reads "100/100 ━━━━ 1s 5ms/step - loss: 0.41 -
# val_loss: 0.39" (numerator = denominator).
_KERAS_EPOCH_END = re.compile(r'^(\[worker \d+\] )?(\d+)/(\2) .*\bloss: ')
_ANSI = re.compile(r'\x1b\[[0-9;]*m|\x08')
_BAR = re.compile(r'\s*[━─=>.]{4,}\s*')


class _Formatter(logging.Formatter):
  """The message alone for INFO; with its level for the others."""

  def format(self, record) -> str:
    message = record.getMessage()
    if record.levelno == logging.INFO:
      return message
    return f'{record.levelname}: {message}'


# TensorFlow's start-up lines at ERROR level (TF_CPP_MIN_LOG_LEVEL=2 keeps
# them): XLA's CUDA plugins registered twice, on any machine, GPU or not.
_START_UP_LINES = re.compile(
    r'Unable to register cu(FFT|DNN|BLAS) factory: Attempting to register '
    r'factory for plugin cu\w+ when one has already been registered')


def import_tensorflow() -> None:
  """Imports TensorFlow, dropping its start-up lines from stderr
  (`_START_UP_LINES`) unless TF_CPP_MIN_LOG_LEVEL asks for its INFO or
  WARNING lines (0 or 1); every other line is written as it came.

  Call it once the environment that TensorFlow reads at import
  (TF_USE_LEGACY_KERAS, KERAS_BACKEND) is set.
  """
  with _start_up_lines_dropped():
    # Inside: importing TensorFlow now, once the caller has set what it
    # reads at import, is what this function is for.
    import tensorflow  # pylint: disable=g-import-not-at-top,unused-import


@contextlib.contextmanager
def _start_up_lines_dropped() -> Iterator[None]:
  """While in it, stderr (the file descriptor) goes to a temporary file;
  at its end, every line but `_START_UP_LINES` is written to stderr.
  Nothing is captured when TensorFlow is imported already, when
  TF_CPP_MIN_LOG_LEVEL asks for its INFO or WARNING lines, or when there
  is no stderr."""
  if 'tensorflow' in sys.modules or os.environ.get(
      'TF_CPP_MIN_LOG_LEVEL', '0') in ('0', '1'):
    yield
    return
  sys.stderr.flush()
  try:
    saved = os.dup(2)
  except OSError:  # No stderr to filter.
    yield
    return
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      for line in captured.read().decode(errors='replace').splitlines(True):
        if not _START_UP_LINES.search(line):
          sys.stderr.write(line)
      sys.stderr.flush()


@contextlib.contextmanager
def quiet_warnings() -> Iterator[None]:
  """While the command runs, Python's FutureWarnings (Google clients'
  'non-supported Python version', TFX's and Keras's deprecations) are not
  shown, unless the user chose warnings (-W, PYTHONWARNINGS)."""
  with warnings.catch_warnings():
    if not sys.warnoptions:
      warnings.simplefilter('ignore', FutureWarning)
    yield


@contextlib.contextmanager
def command_lines(stream: Optional[TextIO] = None) -> Iterator[None]:
  """While the command runs, the progress log and absl's warnings go to
  `stream` (stderr) as plain lines; other INFO lines are dropped. When
  stdout is not a terminal (a file, a pipe, a CI log), what Python code
  writes there loses its ANSI codes and Keras's export dump (`_PlainText`).
  """
  stream = stream or sys.stderr
  saved_stdout = sys.stdout
  if not _is_terminal(saved_stdout):
    sys.stdout = _PlainText(saved_stdout)
  loggers = [(progress.log(), logging.INFO), (logging.getLogger('absl'),
                                              logging.WARNING)]
  saved = [(logger, logger.propagate) for logger, _ in loggers]
  handlers = []
  for logger, level in loggers:
    handler = logging.StreamHandler(stream)
    handler.setLevel(level)
    handler.setFormatter(_Formatter())
    logger.addHandler(handler)
    logger.propagate = False
    handlers.append((logger, handler))
  try:
    yield
  finally:  # As it was: main() may be called in a process that goes on.
    sys.stdout = saved_stdout
    for logger, handler in handlers:
      logger.removeHandler(handler)
    for logger, propagate in saved:
      logger.propagate = propagate


def _is_terminal(stream) -> bool:
  try:
    return stream.isatty()
  except (AttributeError, ValueError):
    return False


# Keras's `model.export(dir)` prints the path and every endpoint's
# signature in one write (keras/src/export/saved_model.py, verbose=True):
# the command says where the model is.
_EXPORT_DUMP = re.compile(r"^Saved artifact at '")
_ANSI_CODE = re.compile(r'\x1b\[[0-9;?]*[A-Za-z]')


class _PlainText:
  """A text stream for a file or a pipe: drops Keras's export dump and the
  ANSI codes (colours, bold) written to it; anything else is written as it
  is, through to the stream it wraps."""

  def __init__(self, stream: TextIO):
    self._stream = stream

  def write(self, text: str) -> int:
    if _EXPORT_DUMP.match(text):
      return len(text)
    self._stream.write(_ANSI_CODE.sub('', text))
    return len(text)

  def isatty(self) -> bool:
    return False

  def __getattr__(self, name):
    return getattr(self._stream, name)


def progress_line(line: str) -> Optional[str]:
  """The line to show for a line of captured output, or None to hide it.

  Keras's end-of-epoch progress lines are shown without the bar; the
  progress log's own lines reach the console as records, not through here,
  except a child training process's epoch lines (`progress.print_plain`).
  """
  line = _ANSI.sub('', line).strip()
  if _KERAS_EPOCH_END.match(line):
    return '    ' + _BAR.sub(' ', line)
  if progress.EPOCH_LINE.match(line):  # A child training's LogLines.
    return '    ' + line
  return None


class _PipelineLines(logging.Handler):
  """Writes component start/finish lines and the progress log to the
  terminal."""

  def __init__(self, write: Callable[[str], None]):
    super().__init__(logging.INFO)
    self._write = write
    self._started = {}

  def emit(self, record) -> None:
    if record.name == progress.LOGGER:
      self._write('    ' + record.getMessage())
    elif record.msg == _COMPONENT_RUNNING and record.args:
      name = record.args[0]
      self._started[name] = time.monotonic()
      self._write(f'  {name} ...')
    elif record.msg == _COMPONENT_FINISHED and record.args:
      name = record.args[0]
      seconds = time.monotonic() - self._started.pop(name, time.monotonic())
      self._write(f'  {name} done in {seconds:.1f} s')


@contextlib.contextmanager
def pipeline_console(log_path: str,
                     verbose: bool = False) -> Iterator[Callable[[str], None]]:
  """Runs the block with its output in `log_path`; yields `say(line)`,
  which writes a line to the terminal (and the log).

  With `verbose`, nothing is hidden and no log is written: `say` prints.

  A terminal that closes (the reader of a pipe went away) never ends the
  block: the first line it refuses is replaced by a line in the log saying
  so and where the rest is (this log), and every line after goes to the
  log only.
  """
  if verbose:
    yield lambda line: print(line, flush=True)
    return
  os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
  log = open(log_path, 'ab', buffering=0)  # pylint: disable=consider-using-with
  terminal = os.fdopen(os.dup(1), 'w', buffering=1)
  lock = threading.Lock()
  closed = []

  def show(line: str) -> None:
    with lock:
      if closed:
        return
      try:
        terminal.write(line + '\n')
        terminal.flush()
      except (OSError, ValueError) as e:
        closed.append(e)
        log.write(f"The terminal's output closed ({type(e).__name__}); what "
                  f'follows is written to this log only: '
                  f'{os.path.abspath(log_path)}\n'.encode())

  def say(line: str) -> None:
    show(line)
    log.write(line.encode() + b'\n')

  sys.stdout.flush()
  sys.stderr.flush()
  saved = os.dup(1), os.dup(2)
  read_end, write_end = os.pipe()
  os.dup2(write_end, 1)
  os.dup2(write_end, 2)
  os.close(write_end)
  reader = threading.Thread(target=_tee, args=(read_end, log, show),
                            daemon=True)
  reader.start()
  handler = _PipelineLines(show)
  root = logging.getLogger()
  root.addHandler(handler)
  verbosity = absl_logging.get_verbosity()
  absl_logging.set_verbosity(absl_logging.INFO)  # TFX's component lines.
  fallback = None
  if root.handlers == [handler]:  # Nothing else would write records.
    fallback = logging.StreamHandler(sys.stderr)  # Into the log.
    fallback.setFormatter(logging.Formatter(
        '%(levelname)s %(name)s: %(message)s'))
    root.addHandler(fallback)
  try:
    yield say
  except BaseException:  # Its traceback in the log, whatever logs where.
    log.write(('The pipeline failed:\n' + traceback.format_exc()).encode())
    raise
  finally:
    absl_logging.set_verbosity(verbosity)
    root.removeHandler(handler)
    if fallback is not None:
      root.removeHandler(fallback)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)  # Closes the pipe's write ends: the reader ends.
    os.dup2(saved[1], 2)
    os.close(saved[0])
    os.close(saved[1])
    reader.join(timeout=10)
    try:
      terminal.close()
    except OSError:  # Closed: the log said so.
      pass
    log.close()


def _tee(read_end: int, log, show: Callable[[str], None]) -> None:
  """Copies the captured output to the log; shows the progress lines."""
  pending = b''
  with os.fdopen(read_end, 'rb', buffering=0) as pipe:
    while True:
      chunk = pipe.read(1 << 16)
      if not chunk:
        break
      log.write(chunk)
      pending += chunk
      *lines, pending = re.split(rb'[\r\n]', pending)
      for line in lines:
        shown = progress_line(line.decode(errors='replace'))
        if shown is not None:
          show(shown)


LOG_FILE = 'pipeline.log'


def run_pipeline(title: str, output_dir: str, verbose: bool,
                 body: Callable[[Callable[[str], None], Optional[str]],
                                None]) -> bool:
  """The main of a local pipeline script: runs `body(say, log_path)` under
  `pipeline_console` (the log in OUTPUT_DIR/pipeline.log), after a title
  line. Returns True; or, when it raised, prints `failure_message` and
  returns False."""
  log_path = None if verbose else os.path.join(os.path.abspath(output_dir),
                                               LOG_FILE)
  try:
    with pipeline_console(log_path, verbose) as say:
      say(f'== {title}' + (f'; full log: {log_path}' if log_path else ''))
      body(say, log_path)
  except Exception as e:  # pylint: disable=broad-except
    try:
      print(failure_message(e, log_path), file=sys.stderr, flush=True)
    except OSError:  # A closed terminal: the log holds the failure.
      pass
    return False
  return True


def failure_message(error: BaseException, log_path: Optional[str]) -> str:
  """What to print when a pipeline run fails: the reason first (our
  error's message, the first in the chain of causes, which says what to
  do; else the error's useful line), then where the log is, which holds
  the tracebacks. With no log (`--verbose`, every line shown) the message
  keeps the user's traceback it carries."""
  chain, seen = error, set()
  ours = None
  while chain is not None and id(chain) not in seen:
    seen.add(id(chain))
    if isinstance(chain, GenericTrainerError):
      ours = chain
    chain = chain.__cause__ or chain.__context__
  if ours is not None:
    text = f'{type(ours).__name__}: ' + (str(ours) if log_path is None
                                          else reason(ours))
  else:
    text = f'{type(error).__name__}: {summarize(error)}'
  if log_path is None:
    return f'The pipeline failed: {text}'
  return (f'The pipeline failed: {text}\nThe tracebacks and every line of '
          f'the run are in the log: {log_path} (--verbose prints them here '
          'instead).')


def validated_line(examples_checked: int, apis: Dict[str, str],
                   requests: int) -> str:
  """What the export checks validated before publication, in one line
  (the command's summary, a local pipeline's): `apis` is {signature: TF
  Serving API} of the serving check, which sent `requests` requests."""
  line = ('export validated: loads, has serving_default, predicts finite '
          'values' + (f' on {examples_checked} eval examples'
                       if examples_checked else ''))
  if apis:
    line += ('; answered TF Serving\'s requests on every signature ('
             + ', '.join(f'{name}: {api}' for name, api in sorted(
                 apis.items())) + f'; {requests} requests)')
  return line


def report_line(report: Optional[Dict]) -> str:
  """`validated_line` of an export checks' report (`examples_checked`, and
  each signature's TF Serving API and requests under `serving`): the
  command's summary, the executor's line on success."""
  report = report or {}
  signatures = (report.get('serving') or {}).get('signatures', {})
  return validated_line(
      report.get('examples_checked', 0),
      {name: s['api'] for name, s in signatures.items()},
      sum(s['requests'] for s in signatures.values()))
