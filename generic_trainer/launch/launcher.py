"""The one launcher: every training runs through `train(request, entry)`.

The attempt (`training.attempt`) calls it, for the executor, the command,
the notebook `Estimator`, a child process and each local worker alike;
none of them asks where it trains. The plan decided that
(`plan.plan.Where`), and it names the launcher:

  - `LOCAL_WORKERS`: `num_workers` local processes (`local_cluster`);
  - `KUBEFLOW_JOB`: the pods of a job a Kubeflow step launches
    (`kubeflow.step_job`): the step launches it, follows it and takes what
    its chief recorded, which the chief's own attempt validated and
    published into the step's Model artifact;
  - `KERAS_CHILD`, `BACKEND_CHILD`: one child process under the plan's
    tf.keras or Keras backend (`child_process`): a tf.keras 2 module in a
    Keras 3 pipeline, a JAX training in a TensorFlow process;
  - `HERE`: this process, below: FnArgs built, the entry point called.

A TrainSpec trains here through `loop.runner` on FnArgs from local files
(`fnargs.local`, no TFX: the command's and the notebook's trainings) or
from the artifacts (`fnargs.fn_args`); a `run_fn` gets TFX's FnArgs from
the artifacts, its data accessor keeping parsed rows where a store is set
(`data.kept`). Every call into user code is guarded (`usercode.guard`)
and the threads it leaves cannot hold the process (`stray_threads`); a
training here that no parent watches is watched for a stall
(`stall_watch.watching_here`), and a SIGTERM says what trained and its
last resume checkpoint (`preemption.training`).
While it trains, the process has what its cluster needs set
(`cluster_environment.entered`: TF_CONFIG, the shared stop file); the
chief of a TrainJob reports its progress to Kubeflow Trainer's status
endpoint (`loop.handlers.trainjob_progress`), which the plan's
environment names.

Validation and publication stay with the caller (`training.attempt`).
"""

import sys
import threading
from typing import Any, Callable, Dict, List, Optional

from absl import logging

from generic_trainer.data import input_pipeline
from generic_trainer.data.kept import factory as kept_factory
from generic_trainer.data.kept import store as kept_store
from generic_trainer.fnargs import local
from generic_trainer.keys import RUN_FN_KEY
from generic_trainer.kubeflow.step_job import bound
from generic_trainer.kubeflow.step_job import record as step_job_record
from generic_trainer.kubeflow.step_job import step as step_job
from generic_trainer.launch import child_process
from generic_trainer.launch import cluster_environment
from generic_trainer.launch import local_cluster
from generic_trainer.launch import stall_watch
from generic_trainer.loop import train_result
from generic_trainer.loop.handlers.trainjob_progress import TrainJobProgress
from generic_trainer.plan import plan as plan_lib
from generic_trainer.plan.plan import Where
from generic_trainer.plan.request import TrainingRequest
from generic_trainer import resume
from generic_trainer.system import keras_env
from generic_trainer.system import preemption
from generic_trainer.system import progress
from generic_trainer.trainspec import member_checks
from generic_trainer.usercode import stray_threads
from generic_trainer.usercode.guard import user_code


def train(request: TrainingRequest,
          entry: Optional[Callable[[Any], None]] = None
          ) -> Optional[Dict[str, Any]]:
  """Trains `request` with the launcher its plan names; returns the
  training record it wrote (`loop.train_result`), or None (a `run_fn`
  that wrote none).

  `entry` is the entry point, when the caller's process loaded it (the
  plan resolved here); otherwise the process that trains loads it
  (`plan.complete`).

  Raises:
    UserModuleError, InvalidArgumentError, InputArtifactError: see their
      docs.
    RunFnError: the user's code raised, or tried to end the process (see
      `usercode.guard`); the user's exception is its `__cause__` and its
      traceback is in the message.
    TrainingProcessError: a child process cannot give what the plan says,
      or died without reporting an error.
    What the training raised, in whichever process it ran.
  """
  with cluster_environment.entered(request.plan):
    _LAUNCHERS[request.plan.where](request, entry)
  return train_result.read(request.model_run_dir())


def _here(request: TrainingRequest, entry) -> None:
  """Trains in this process with `entry` (loaded here when None), the
  user's `run_fn` or the run_fn of their TrainSpec (`loop.runner.SpecRun`,
  whose `train_spec` is the class), which exports into
  `request.serving_dir`. A TrainSpec's training record
  (train_result.json) is written once, by its `SpecRun`, with
  `request.record`'s entries."""
  if entry is None:
    plan, entry = plan_lib.complete(request.plan)
    request = request.with_plan(plan)
  source = request.plan.describe_source()
  spec = getattr(entry, 'train_spec', None)
  low, high = request.plan.worker_bounds()
  if spec is not None and low < high:  # Every size the group may take.
    member_checks.check_batch_split(getattr(spec, 'batch_size', None),
                                    range(low, high + 1))
  what = f'TrainSpec {spec.__name__}' if spec is not None else (
      f'the {RUN_FN_KEY}')
  checkpoint_dir = request.plan.checkpoint_dir
  # A pod of a step's job deletes its job once the step has ended.
  with stall_watch.watching_here(what) as watch, preemption.training(
      what, lambda: _where_saved(checkpoint_dir)), bound.watching(
          request.plan.cluster.step_record):
    fn_args = (local.from_request(request)
               if spec is not None and request.local_inputs is not None
               else _fn_args_from_artifacts(request))
    if watch is not None:
      watch.reads(getattr(fn_args, 'train_files', None))
    keras_used = keras_env.trained_on()
    progress.log().info('Training %s on %s.', what, keras_used)
    hparams = {'hparams': getattr(fn_args, 'hyperparameters', None),
               'hparams_setting': request.plan.entry_point.hparams,
               'custom_config': getattr(fn_args, 'custom_config', None)}
    threads = set(threading.enumerate())
    try:
      if spec is not None:  # Its runner keeps its parsed rows itself.
        with user_code(what, source, wrap=request.plan.wraps_user_errors,
                       **hparams):
          entry(fn_args, interactive=request.interactive,
                started=request.started,
                record={**(request.record or {}), 'keras': keras_used},
                handlers=_cluster_handlers(request.plan))
      else:
        with kept_store.store(fn_args) as kept, user_code(RUN_FN_KEY, source,
                                                           **hparams):
          entry(_keeping(fn_args, kept))
        if kept is not None:
          kept.log_decisions()
    finally:  # Failed or not, its threads cannot hold the process.
      stray_threads.release(threads, source)


def _cluster_handlers(plan: plan_lib.TrainingPlan) -> List[Any]:
  """The handlers the plan's cluster adds to a TrainSpec's loop: the
  chief of a TrainJob reports its progress into the TrainJob's status."""
  endpoint = plan.cluster.status_endpoint
  if endpoint is None:
    return []
  reporter = TrainJobProgress(endpoint, is_chief=plan.role.is_chief)
  return [reporter] if reporter.reports else []


def _where_saved(checkpoint_dir: Optional[str]) -> str:
  """'step 7 (epoch 2, batch 2) in /ckpt' (the end of epoch 2, for a
  run_fn's Keras BackupAndRestore), or '' when none was saved."""
  try:
    point = resume.describe(checkpoint_dir)
  except Exception:  # pylint: disable=broad-except
    return ''  # Said while the process ends: never a second error.
  return f'{point} in {checkpoint_dir}' if point else ''


def _fn_args_from_artifacts(request: TrainingRequest):
  # Inside: TFX's FnArgs module imports Apache Beam (seconds) at its top:
  # only a training from artifacts pays for it, not the command's or the
  # notebook's TrainSpec.
  from generic_trainer.fnargs import fn_args as fn_args_lib  # pylint: disable=g-import-not-at-top
  return fn_args_lib.build_fn_args(request)


def _keeping(fn_args, kept):
  """`fn_args`, its data accessor's tf.Example datasets reading and keeping
  parsed rows through `kept` (a `data.kept.cache.SpanCache`, or None)."""
  factory = fn_args.data_accessor.tf_dataset_factory
  if kept is None or not isinstance(factory, input_pipeline.DatasetFactory):
    return fn_args
  fn_args.data_accessor = fn_args.data_accessor._replace(
      tf_dataset_factory=kept_factory.KeptRowsFactory(
          kept, fn_args.transform_graph_path,
          getattr(fn_args, 'num_workers', 1), factory.telemetry_descriptors))
  return fn_args


def _kubeflow_job(request: TrainingRequest, entry) -> None:
  """Launches the job of the step (`plan.cluster.KubeflowStep`), follows
  it to its end and puts what its chief attached on this step's output
  artifacts (`kubeflow.step_job`); its pods load the module."""
  del entry
  cluster = request.plan.cluster
  record = step_job.run(
      {'kind': cluster.kind, 'image': cluster.image,
       'resources': cluster.resources}, request.exec_properties,
      request.model_uri(),
      request.model_run_dir(), sys.argv, cluster.owner,
      service_account=cluster.service_account)
  step_job_record.apply_record(record, request.output_dict)


def _local_workers(request: TrainingRequest, entry) -> None:
  del entry  # Each worker loads the module itself.
  local_cluster.run(request)


def _keras_child(request: TrainingRequest, entry) -> None:
  del entry  # The child loads the module under its own tf.keras.
  _in_child(request, request.plan.keras_version)


def _backend_child(request: TrainingRequest, entry) -> None:
  del entry  # The child loads the module on its own backend.
  _in_child(request, f'{request.plan.backend} backend')


def _in_child(request: TrainingRequest, what: str) -> None:
  logging.info('Training in a child process with %s.', what)
  child_process.train_in_child(request.in_child(), request.plan.child_env(),
                               what)


_LAUNCHERS = {Where.HERE: _here, Where.LOCAL_WORKERS: _local_workers,
              Where.KERAS_CHILD: _keras_child,
              Where.BACKEND_CHILD: _backend_child,
              Where.KUBEFLOW_JOB: _kubeflow_job}
