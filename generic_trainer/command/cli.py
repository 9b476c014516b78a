"""generic-trainer: train a module file on local data, outside a pipeline.

    generic-trainer --module-file module_files/penguin_spec.py \\
        --train-data penguins.csv --output-dir /tmp/penguin --steps 100

(or `python -m generic_trainer ...`). It runs the module (a TrainSpec or a
`run_fn`) on local CSV or TFRecord files as GenericTrainer runs it in a
pipeline, validates the export with the component's checks, publishes it to
`OUTPUT_DIR/model/` and prints the final metrics (layout: `command.layout`).

The command line is checked before TensorFlow is imported; a TrainSpec
module then trains without importing TFX's pipeline code or Apache Beam, so
the first training step comes soon after TensorFlow's own import
(benchmark (d) measures how soon). The line
`first training step after X.XX s` (seconds since the process started) says
when.

A training that did not finish (killed, Ctrl-C, or failed after a
checkpoint) resumes from its last epoch checkpoint when the same command
runs again on unchanged data: TrainSpec modules always, a `run_fn` that
uses `resume.keras_callback` or `resume.checkpoint_manager`. `--no-resume`
starts over.

SIGTERM (a preemption) stops the training at the next step, saves that
step in the resume checkpoint and exits with 143; the same command resumes
there (`generic_trainer.system.preemption`). Anywhere else (a `run_fn`'s
own loop, reading the data, the export) it stops the run where it is and
exits 143 too. Either way the last line of stderr says where the run was,
whether a resume checkpoint holds it and the command that resumes.

Exit status: 0 trained, validated and published; 1 the run failed (the
module, the data, the spec, the training or the export; the message says
what to do); 2 the command line is wrong; 130 interrupted (Ctrl-C); 143
stopped by SIGTERM, the step saved.
"""

import os  # Loaded with the interpreter: importing it costs nothing.
import time


def _process_start() -> float:
  """`time.monotonic()` when this process started (now, if unknown)."""
  now = time.monotonic()
  try:
    with open('/proc/self/stat') as f:  # Field 22: start, in ticks since boot.
      start_ticks = int(f.read().rsplit(')', 1)[1].split()[19])
    with open('/proc/uptime') as f:
      uptime = float(f.read().split()[0])
    age = uptime - start_ticks / os.sysconf('SC_CLK_TCK')
  except (OSError, ValueError, IndexError):
    return now
  return now - max(age, 0.0)


_STARTED = _process_start()  # Before any other import.

# pylint: disable=g-import-not-at-top,wrong-import-position
import contextlib
import shlex
import sys
import tempfile
import traceback
from typing import Optional, Sequence

from generic_trainer.system import preemption
from generic_trainer.usercode import module_loader
from generic_trainer.errors import GenericTrainerError
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import PreemptedError
from generic_trainer.errors import signalled_within
from generic_trainer.errors import summarize
from generic_trainer.system import disk_full
from generic_trainer.keys import PREEMPTED_EXIT_CODE
from generic_trainer.command import cli_args
from generic_trainer.system import console
from generic_trainer.system import collector
from generic_trainer.usercode import stray_threads
from generic_trainer.command import holdout
from generic_trainer.command.cli_args import Request
from generic_trainer.command.layout import Layout
from generic_trainer.command.layout import DATA, MODEL, RUN, SCHEMA  # pylint: disable=g-multiple-import
from generic_trainer.system import keras_env
from generic_trainer.command.cli_args import PROG
from generic_trainer.launch import stall_watch
from generic_trainer.data import first_look
from generic_trainer.data import local_files
from generic_trainer.usercode import static_spec
# pylint: enable=g-import-not-at-top,wrong-import-position


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs the command; returns the exit status.

  Called as the program (`argv` None), it ends the process once done even
  if user code left threads running, which would otherwise keep it alive
  (see `stray_threads.exit_despite_threads`).
  """
  with preemption.handling():
    status = _main(argv)
  if argv is None:
    stray_threads.exit_despite_threads(status)
  return status


def _main(argv: Optional[Sequence[str]]) -> int:
  try:
    request = cli_args.parse(argv, started=_STARTED)
    stall_watch.limit()  # A wrong GENERIC_TRAINER_STALL_S, refused now.
  except InvalidArgumentError as e:
    print(f'{PROG}: error: {e}', file=sys.stderr)
    return 2
  # TensorFlow's C++ INFO and WARNING lines (end of data at each eval...),
  # unless the user asked for them; its start-up lines: see
  # console.import_tensorflow.
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  checkpoint, resuming = None, False

  def starting(plan) -> None:
    """Once the folder is held and the plan chose the checkpoint folder
    (`command.run.run`), before anything else is said: whether it resumes
    (`checkpoint` and `resuming` then say it in the messages below)."""
    nonlocal checkpoint, resuming
    checkpoint = plan.checkpoint_dir
    resuming = request.resume and Layout.holds_checkpoint(checkpoint)
    if resuming:
      print(f'Resuming from the checkpoint an earlier run left in '
            f'{checkpoint} (--no-resume starts over).', flush=True)
    print(holdout.plan(request.eval_data, request.eval_on_train), flush=True)

  try:
    with preemption.stopping_anywhere():  # SIGTERM anywhere: 143, said.
      if request.run_fn is None:
        module_loader.check_module_source(request.module_file)
      _first_look(request)
      # The training's modules import TensorFlow: they load once the flags
      # and the module's source are checked (`--help`, `--version`, a
      # wrong flag and a module that does not parse stay light);
      # TensorFlow first, in the Keras the flags chose, without its
      # start-up lines, and none of them with the FutureWarnings their
      # imports print (a Google client's).
      keras_env.choose_before_import(request.keras_version, request.backend)
      if 'tensorflow' not in sys.modules:  # Else nothing slow loads.
        print(LOADING, flush=True)
      # As the program, without the collector's full passes over what the
      # imports make (`system.collector`); `main` called by a test or a
      # notebook leaves their process's collector as it was.
      paused = (collector.imports_paused() if argv is None
                else contextlib.nullcontext())
      with console.quiet_warnings(), paused:
        console.import_tensorflow()
        # Inside: the training's modules, above, once the flags are checked.
        from generic_trainer.command import run as command_run

      with console.command_lines(), console.quiet_warnings(), \
          _signals_unwrapped():
        outcome = command_run.run(request, starting)
  except PreemptedError as e:
    print(f'{PROG}: {type(e).__name__}: {e}', file=sys.stderr)
    _say_earlier_model_kept(request)
    print(_stopped_line(request, checkpoint, e, argv), file=sys.stderr)
    return PREEMPTED_EXIT_CODE
  except GenericTrainerError as e:
    print(f'{PROG}: {type(e).__name__}: {e}', file=sys.stderr)
    _say_earlier_model_kept(request)
    if resuming:
      print(f'{PROG}: this run resumed from the checkpoint in {checkpoint}. '
            'If the error comes from it (a module that this one imports '
            'changed the model, say), run again with --no-resume.',
            file=sys.stderr)
    return 1
  except Exception as e:  # pylint: disable=broad-except
    # No traceback on the user: a full disk is said as such (the data
    # conversion, the publication); a cause we could not name is still said
    # in four parts, with the traceback in a file for a bug report.
    full = disk_full.error_for(e, PROG, request.output_dir)
    if full is not None:
      print(f'{PROG}: {type(full).__name__}: {full}', file=sys.stderr)
    else:
      print(f'{PROG}: {type(e).__name__}: {_unnamed(e)}', file=sys.stderr)
    _say_earlier_model_kept(request)
    return 1
  except KeyboardInterrupt:
    print(f'{PROG}: interrupted; nothing was published.' +
          _resume_hint(request, checkpoint), file=sys.stderr)
    _say_earlier_model_kept(request)
    return 130
  _print_outcome(request, outcome)
  return 0


@contextlib.contextmanager
def _signals_unwrapped():
  """A SIGTERM's PreemptedError or a stall's TrainingProcessError that a
  library re-raised as its own error (`errors.signalled_within`) leaves the
  block as itself, to be said as such."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except
    signalled = signalled_within(e)
    if signalled is None:
      raise
    raise signalled from None


LOADING = ('Loading TensorFlow and the training\'s modules (seconds to a '
           'minute); the flags, the module\'s source and the CSV data\'s '
           'header and first rows are checked.')


def _first_look(request: Request) -> None:
  """The header and first rows of the CSV data, checked against what the
  module's TrainSpec declares, before TensorFlow loads (`data.first_look`);
  a canned spec's blanks, said to be filled."""
  declared = static_spec.declared(request.module_file, request.run_fn)
  required = None
  if declared is None and not request.schema and static_spec.is_run_fn(
      request.module_file, request.run_fn):
    required = local_files.run_fn_required()  # As the conversion's.
  splits = [request.train_data, request.eval_data or []]
  first_look.check(splits, request.csv_delimiter, declared, required)
  line = first_look.filled(request.train_data, request.csv_delimiter,
                           declared)
  if line:
    print(line, file=sys.stderr, flush=True)


def _unnamed(e: Exception) -> str:
  """The message of an error that is not ours, with the four parts; its
  traceback goes to a file in the temporary directory, named there."""
  try:
    fd, path = tempfile.mkstemp(prefix='generic-trainer-traceback-',
                                suffix='.txt')
    with os.fdopen(fd, 'w') as f:
      traceback.print_exception(type(e), e, e.__traceback__, file=f)
    where = f'Its traceback is in {path}'
  except OSError:
    where = 'Its traceback could not be written'
  return (f'{summarize(e)}. This error has no message of ours. Expected the '
          'run to train, or to stop with an error that says what to do. '
          f'Received: {type(e).__name__}. {where}. Check the module and the '
          'data against it, and report it as a bug of generic-trainer if it '
          'comes from there; nothing was published.')


def schedule_text(steps: Optional[int], epochs: Optional[int]) -> str:
  """'20 steps in 5 epochs of 4 steps', '20000 steps in one epoch
  (evaluated once, at the end)': what the steps and epochs were, in words
  that do not make 20000 steps of a canned spec (`epochs=1`) read as one
  pass over the data."""
  if epochs == 1:
    return f'{steps} steps in one epoch (evaluated once, at the end)'
  if steps and epochs and steps % epochs == 0:
    return f'{steps} steps in {epochs} epochs of {steps // epochs} steps'
  return f'{steps} steps in {epochs} epochs'


def _say_earlier_model_kept(request: Request) -> None:
  model = Layout(request.output_dir).model
  if os.path.isdir(model):
    print(f'{PROG}: the model an earlier run published in {model} is '
          'unchanged.', file=sys.stderr)


def _stopped_line(request: Request, checkpoint: Optional[str],
                  error: PreemptedError,
                  argv: Optional[Sequence[str]]) -> str:
  """The last line after a SIGTERM: where the run was, whether a resume
  checkpoint holds it, and the command that resumes (this one, without
  --no-resume)."""
  reached = error.reached or 'during the run'
  args = list(sys.argv[1:] if argv is None else argv)
  command = shlex.join([PROG] + [a for a in args if a != '--no-resume'])
  point = None
  if checkpoint and Layout.holds_checkpoint(checkpoint):
    # Inside: the checkpoint's reader imports TensorFlow, which a run that
    # left a checkpoint has imported already; --help stays light.
    from generic_trainer import resume  # pylint: disable=g-import-not-at-top
    try:
      point = resume.describe(checkpoint) or 'what the run_fn saved'
    except GenericTrainerError:
      point = None
  if point:
    return (f'{PROG}: stopped by SIGTERM {reached}; the resume checkpoint '
            f'in {checkpoint} holds {point}. To resume there, run the same '
            f'command: {command}')
  return (f'{PROG}: stopped by SIGTERM {reached}; no resume checkpoint '
          'holds it (a run_fn writes one with generic_trainer.resume.'
          'keras_callback). To start again, run the same command: '
          f'{command}')


def _resume_hint(request: Request, checkpoint: Optional[str]) -> str:
  if not checkpoint or not Layout.holds_checkpoint(checkpoint):
    return ''
  if request.resume:
    return f' The same command resumes from the checkpoint in {checkpoint}.'
  return (f' The same command without --no-resume resumes from the '
          f'checkpoint in {checkpoint}.')


def _print_outcome(request: Request,
                   outcome) -> None:
  """Prints what a run produced (`command.run.Outcome`)."""
  layout, result = outcome.layout, outcome.result
  lines = [f'== Trained {outcome.entry_point} of {request.module_file}']
  if result:
    lines[0] += (f': {schedule_text(result.get("steps"), result.get("epochs"))}'
                 f', {result.get("training_time_s", 0):.1f} s of training')
    if result.get('keras'):
      lines[0] += f' on {result["keras"]}'
    if result.get('resumed_from_batch'):
      lines[0] += (f' (resumed at step {result["resumed_from_step"]}: epoch '
                   f'{result["resumed_from_epoch"] + 1}, batch '
                   f'{result["resumed_from_batch"]})')
    elif result.get('resumed_from_epoch'):
      lines[0] += f' (resumed after epoch {result["resumed_from_epoch"]})'
    for split in ('train', 'eval'):
      metrics = result.get(split) or {}
      lines.append(f'  {split + ":":6} ' + (' '.join(
          f'{k}={v:.4g}' for k, v in sorted(metrics.items())) or 'none'))
    if outcome.evaluation:
      lines.append(f'  eval on {holdout.describe(outcome.evaluation)}')
  else:
    lines.append('  metrics: none recorded (a run_fn may write them to '
                 'train_result.json in fn_args.model_run_dir: "The training '
                 'record" in docs/guides/run-fn-modules.md)')
  lines.append('  ' + console.report_line(outcome.report))
  lines += [f'  {name + ":":7} {path}' for name, path in (
      (MODEL, layout.model), (RUN, layout.run), (DATA, layout.data),
      (SCHEMA, layout.schema)) if os.path.exists(path)]  # What is there.
  print('\n'.join(lines), flush=True)


if __name__ == '__main__':
  sys.exit(main())
