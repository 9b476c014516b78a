"""One attempt: stage, train, validate, gate, publish. The one sequence the
executor, the `generic-trainer` command and the notebook `Estimator` run.

    stage     `StagedExport.attempt`: a clean staging folder; whatever the
              block raises, what it staged is moved aside, never published
    train     `launch.launcher.train`, the one launcher: the plan's
              launcher trains the request, which exports into
              `staged.serving_dir`
    validate  the export loads (once), serves eval examples, finite outputs
              (`export_validation`), and answers TF Serving's Classify,
              Regress and Predict requests without labels (`serving_check`)
    gate      with a base model, its clients' signatures still hold
              (`signature_gate`), unless `allow_signature_change`
    publish   `StagedExport.publish`: the commit point

A failure at any step raises before `publish`, so no model reaches a place
a Pusher (or the command's `model/`) reads.
"""

import functools
from typing import Any, Callable, Dict, List, Optional

import attr

from generic_trainer.checks import export_validation
from generic_trainer.checks import signature_gate
from generic_trainer.checks.publish import StagedExport
from generic_trainer.launch import launcher
from generic_trainer.plan.request import TrainingRequest


@attr.s(frozen=True)
class ExportChecks:
  """What the export is checked against.

  Attributes:
    eval_files: File patterns of the eval examples fed to the export.
    schema_path: The schema the examples follow, or None.
    transform_graph_path: The Transform graph, or None.
    base_model: The serving SavedModel folder of the model this one
      replaces (`fnargs.inputs.base_model_path`), or None.
    allow_signature_change: Publish even if `base_model`'s signatures
      change.
  """
  eval_files = attr.ib(type=List[str])
  schema_path = attr.ib(type=Optional[str], default=None)
  transform_graph_path = attr.ib(type=Optional[str], default=None)
  base_model = attr.ib(type=Optional[str], default=None)
  allow_signature_change = attr.ib(type=bool, default=False)


@attr.s(frozen=True)
class Published:
  """What a successful attempt published.

  Attributes:
    serving_dir: The published serving SavedModel.
    report: What `validate_export` checked.
    trained: The training record (train_result.json), or None (a
      `run_fn` that wrote none).
  """
  serving_dir = attr.ib(type=str)
  report = attr.ib(type=Dict[str, Any])
  trained = attr.ib(default=None)


def run(staged: StagedExport, request: TrainingRequest,
        entry: Optional[Callable[[Any], None]],
        checks: Callable[[], ExportChecks]) -> Published:
  """Runs the attempt (see the module docstring): trains `request` with
  `entry` (None: the process that trains loads it) into
  `staged.serving_dir`, through the one launcher. `checks` gives what the
  export is checked against; it is called once training is done, so that
  the inputs' own errors come from the training's checks first.

  Raises:
    What the training raises; ExportValidationError or SignatureChangeError
      on the export. Nothing is published then; `staged` keeps the rejected
      export for inspection.
  """
  return _attempt(staged, functools.partial(launcher.train, request, entry),
                  checks)


def export(staged: StagedExport, write: Callable[[], None],
           checks: Callable[[], ExportChecks]) -> Published:
  """The attempt of a model trained already (the notebook's `export`):
  `write()` exports it into `staged.serving_dir` in place of the training
  step; the rest as `run`."""
  return _attempt(staged, write, checks)


def _attempt(staged: StagedExport, train: Callable[[], Any],
             checks: Callable[[], ExportChecks]) -> Published:
  with staged.attempt():
    trained = train()
    checks = checks()
    loaded = export_validation.load_export(staged.serving_dir)
    report = export_validation.validate_export(
        staged.serving_dir, checks.eval_files, checks.schema_path,
        checks.transform_graph_path, loaded=loaded)
    if checks.base_model and not checks.allow_signature_change:
      signature_gate.check(checks.base_model, staged.serving_dir, loaded)
  return Published(staged.publish(), report, trained)
