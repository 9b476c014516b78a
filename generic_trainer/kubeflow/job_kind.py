"""What a kind of Kubeflow job answers, so that the step that launches one
(`step_job`) and the component that renders one ask the same questions of
each: its API (group, version, plural), the label on its pods, its
training container, the conditions that end it, the operator that runs
it, the objects beside it, and how it is rendered and named.

One class names the questions (`JobKind`); each kind answers them in its
own module (`trainjob.JOB_KIND`, `tfjob.JOB_KIND`), and `kinds` lists
them. Adding a kind is one module and one line of `kinds.KINDS`.
"""

from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple

# What the step does with its job (create, read, follow, delete, take over)
# and with an object beside it (create, read, take over, delete); and its
# pods: list them, read the failing one's log, and the namespace's events,
# which say why pods that never started did not (`step_job.follow`).
JOB_VERBS = ('create', 'get', 'watch', 'delete', 'patch')
COMPANION_VERBS = ('create', 'get', 'delete', 'patch')
POD_CALLS = (('', 'pods', 'list'), ('', 'pods/log', 'get'),
             ('', 'events', 'list'))


class Companion(NamedTuple):
  """An object a job needs beside it (a TrainJob's TrainingRuntime): made
  before the job, removed after it.

  Attributes:
    key: Its key among `JobKind.render`'s objects.
    plural: Its resource, in the kind's API group and version.
    suffix: Its name is the job's followed by this.
  """
  key: str
  plural: str
  suffix: str


class JobKind:
  """A kind of Kubeflow job that trains the step's workers on several
  pods. Each kind's module answers these.

  Attributes:
    name: The kind, as the API and `--step-job` spell it ('TrainJob').
    api_version: Its API group and version ('trainer.kubeflow.org/v1alpha1').
    plural: Its resource ('trainjobs').
    job_key: The job's key among `render`'s objects.
    companions: The objects beside it (`Companion`).
    pod_selector: The label its pods carry with the job's name.
    container: The name of its pods' training container.
    complete: The condition type of a job that succeeded.
    failed: The condition type of a job that failed.
    operator: What runs the kind, as an error names it when the cluster
      serves no such API.
  """
  name: str
  api_version: str
  plural: str
  job_key: str
  companions: Tuple[Companion, ...] = ()
  pod_selector: str
  container: str
  complete: str
  failed: str = 'Failed'
  operator: str

  def __init_subclass__(cls, **kwargs):
    """A kind that leaves a question unanswered is refused when defined."""
    super().__init_subclass__(**kwargs)
    missing = [name for name in JobKind.__annotations__
               if not hasattr(cls, name)]
    if missing:
      raise TypeError(
          f'{cls.__name__} must set {missing}, as every JobKind does. '
          'Received: a class without them. Set them in the class body.')

  @property
  def group(self) -> str:
    return self.api_version.split('/')[0]

  @property
  def api_calls(self) -> Tuple[Tuple[str, str, str], ...]:
    """(API group, resource, verb) of every call the step makes for a job
    of this kind: what `step_job.rbac` grants."""
    return (tuple((self.group, self.plural, verb) for verb in JOB_VERBS)
            + tuple((self.group, companion.plural, verb)
                    for companion in self.companions
                    for verb in COMPANION_VERBS)
            + POD_CALLS)

  def ended(self, job: Mapping[str, Any]) -> Tuple[str, str, str]:
    """('done' | 'failed' | '', reason, message) from the job's
    conditions."""
    for condition in (job.get('status') or {}).get('conditions') or ():
      if condition.get('status') != 'True':
        continue
      if condition.get('type') == self.failed:
        return 'failed', condition.get('reason', ''), condition.get(
            'message', '')
      if condition.get('type') == self.complete:
        return 'done', condition.get('reason', ''), condition.get(
            'message', '')
    return '', '', ''

  def render(self, name: str, num_workers: int,
             max_restarts: Optional[int], env: Dict[str, str],
             **kwargs) -> Dict[str, Dict[str, Any]]:
    """The job's objects for `num_workers` pods ({job_key: the job, and
    each companion's key: it}), restarted as a group up to `max_restarts`
    times, with `env` in every pod; `kwargs` are the kind's module's
    `render`'s (image, command, args, namespace, resources,
    pod_settings)."""
    raise NotImplementedError

  def render_for_step(self, job: Dict[str, Any],
                      executor_input: Dict[str, Any], name: str,
                      task: Optional[str] = None,
                      num_workers: Optional[int] = None,
                      max_restarts: Optional[int] = None,
                      **kwargs) -> Dict[str, Any]:
    """What runs a compiled pipeline's trainer step (`job`) on
    `num_workers` pods (default: the step's)."""
    raise NotImplementedError

  def render_for_component(self, component, name: str, image: str,
                           executor_input: Dict[str, Any],
                           **kwargs) -> Dict[str, Any]:
    """What runs a GenericTrainer on its `num_workers` pods."""
    raise NotImplementedError

  def longest_name(self, num_workers: int) -> int:
    """The longest job name the kind's controllers accept for
    `num_workers` pods."""
    raise NotImplementedError

  def check_name(self, name: str, num_workers: int) -> None:
    """Raises InvalidArgumentError for a name the API server or the kind's
    webhooks refuse for `num_workers` pods."""
    raise NotImplementedError

  def sdk_available(self) -> bool:
    """Whether the kind's own API models are installed (manifests are
    rebuilt through them)."""
    raise NotImplementedError
