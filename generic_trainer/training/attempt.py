"""One attempt at a training: the sequence every entry point runs.

The executor, the `generic-trainer` command, the notebook `Estimator`, a
child process and each local worker run it, in these steps:

    plan      `resolve`: the artifacts are where this process can open
              them (`system.paths.check_openable`), which cluster this
              process is in
              (`launch.cluster_environment`), then the plan
              (`plan.plan.resolve`)
    role      a member of a cluster that is not its chief trains with the
              others, into scratch, and publishes nothing; so does a
              training whose caller publishes (no `Publication`: a child
              process, a local worker, the notebook's `train`)
    stage     `StagedExport.attempt`: a clean staging folder; whatever the
              block raises, what it staged is moved aside, never published
    train     `launch.launcher.train`, the one launcher: the plan's
              launcher trains the request, which exports into
              `staged.serving_dir`. A Kubeflow step's job is launched
              there too; its chief runs this attempt in its pod and
              publishes, and the step takes what it published
    validate  the export loads (once), serves eval examples, finite outputs
              (`export_checks.export_validation`), and answers TF
              Serving's Classify, Regress and Predict requests without
              labels (`export_checks.serving_check`)
    gate      with a base model, its clients' signatures still hold
              (`export_checks.signature_gate`), unless
              `allow_signature_change`
    publish   `StagedExport.publish`: the commit point (then the command
              puts the model in `model/`: `Publication.commit`)
    resume    the published training's resume checkpoint is removed
              (`resume.remove`: renamed aside, then deleted), by the chief
              of a training that published, whatever the entry point

A failure at any step raises before `publish`, so no model reaches a place
a Pusher (or the command's `model/`) reads, and the checkpoint stays for
the next attempt.
"""

import functools
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from absl import logging
import attr

from generic_trainer import resume
from generic_trainer.export_checks import export_validation
from generic_trainer.export_checks import signature_gate
from generic_trainer.launch import cluster_environment
from generic_trainer.launch import launcher
from generic_trainer.plan import plan as plan_lib
from generic_trainer.plan.entry_points import EntryPoint
from generic_trainer.plan.plan import Where
from generic_trainer.plan.request import TrainingRequest
from generic_trainer.publication.staged_export import StagedExport
from generic_trainer.system import bytecode
from generic_trainer.system import paths
from generic_trainer.system import scratch


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
class Publication:
  """Where the chief's export is staged and published, and what it is
  checked against.

  Attributes:
    staged: The staging and final places (`StagedExport`); the request's
      `serving_dir` is `staged.serving_dir`.
    checks: Gives the `ExportChecks`; called once training is done, so
      that the inputs' own errors come from the training's checks first.
    commit: Called once the export is published, to put it where its
      readers look (the command's `model/`: `command.layout.Layout.
      take_model`); None: `staged`'s final place is that.
  """
  staged = attr.ib(type=StagedExport)
  checks = attr.ib(type=Callable[[], ExportChecks])
  commit = attr.ib(type=Optional[Callable[[], None]], default=None)


@attr.s(frozen=True)
class Published:
  """What an attempt published.

  Attributes:
    serving_dir: The published serving SavedModel; None when this attempt
      publishes nothing (a member that is not the chief, or no
      `Publication`).
    report: What `validate_export` checked ({} when nothing was).
    trained: The training record (train_result.json), or None (a
      `run_fn` that wrote none).
  """
  serving_dir = attr.ib(type=Optional[str])
  report = attr.ib(type=Dict[str, Any], factory=dict)
  trained = attr.ib(default=None)


def resolve(settings: Dict[str, Any], entry_point: EntryPoint,
            storage: Optional[Dict[str, str]] = None, **kwargs
            ) -> Tuple[plan_lib.TrainingPlan, Optional[Callable[[Any], None]]]:
  """The plan step: the artifacts `storage` names (what each is, to its
  URI) are where this process's file systems open them, at once (a
  Kubeflow run given no pipeline root writes under minio://, which TFX
  cannot open); then which cluster this process is in (for an entry point
  that joins one, `EntryPoint.joins_cluster`), then the plan of the
  training `settings` describe (`plan.plan.resolve`, whose other arguments
  `kwargs` are).

  Raises:
    InvalidArgumentError: an artifact no file system here opens
      (`system.paths.check_openable`).
    What `plan.plan.resolve` and `cluster_environment.detect` raise.
  """
  paths.check_openable(storage or {})
  cluster = cluster_environment.detect(os.environ, entry_point.joins_cluster)
  return plan_lib.resolve(settings, entry_point, cluster, **kwargs)


def run(request: TrainingRequest,
        entry: Optional[Callable[[Any], None]] = None,
        publication: Optional[Publication] = None) -> Published:
  """Runs the attempt (see the module docstring): trains `request` with
  `entry` (None: the process that trains loads it) through the one
  launcher and, for the chief of a training with a `publication`,
  validates, gates and publishes its export, then removes its resume
  checkpoint (the last step).

  Raises:
    What the training raises; ExportValidationError or SignatureChangeError
      on the export. Nothing is published then; `publication.staged` keeps
      the rejected export for inspection.
  """
  with bytecode.none_written():  # Autograph's would stay in TMPDIR.
    role = request.plan.role
    if not role.is_chief:
      return _train_as_member(request, entry)
    if request.plan.where == Where.KUBEFLOW_JOB:
      return _taken_from_job(request, publication)
    if publication is None:
      return Published(None, {}, launcher.train(request, entry))
    published = _attempt(publication.staged,
                         functools.partial(launcher.train, request, entry),
                         publication.checks)
    if publication.commit is not None:
      publication.commit()
    resume.remove(request.plan.checkpoint_dir)  # The training is done.
    return published


def export(staged: StagedExport, write: Callable[[], None],
           checks: Callable[[], ExportChecks]) -> Published:
  """The attempt of a model trained already (the notebook's `export`):
  `write()` exports it into `staged.serving_dir` in place of the training
  step; the rest as `run`."""
  with bytecode.none_written():
    return _attempt(staged, write, checks)


def _taken_from_job(request: TrainingRequest,
                    publication: Optional[Publication]) -> Published:
  """A Kubeflow step's job: its chief runs this attempt in its pod (train,
  validate, gate, publish into this step's Model artifact); the step's
  launcher follows it and takes what the chief attached
  (`launch.launcher`)."""
  trained = launcher.train(request)
  return Published(publication.staged.final_serving_dir if publication
                   else None, {}, trained)


def _train_as_member(request: TrainingRequest, entry) -> Published:
  """A member that is not the chief: its export and logs go to a scratch
  folder, removed afterwards; only the chief's export is validated and
  published."""
  role = request.plan.role
  logging.info('%s: training as worker %d of %d (%s %d); the chief '
               'publishes the model.', request.plan.cluster.describe(),
               role.worker_index,
               role.num_workers, role.task_type, role.task_index)
  with scratch.folder('worker') as root:
    launcher.train(request.with_scratch_outputs(root), entry)
  return Published(None)


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
