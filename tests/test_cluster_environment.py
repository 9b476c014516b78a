"""Where a training runs is one object, found once and carried by the plan:
`launch.cluster_environment` alone reads a scheduler's variables
(`keys.SCHEDULER_ENV`), and what it found travels in the plan to every
process that trains."""

import ast
import json
import os

import pytest

from generic_trainer import keys
from generic_trainer.launch import cluster_environment
from generic_trainer.plan import cluster as cluster_lib
from generic_trainer.plan import plan as plan_lib
from generic_trainer.plan.plan import Where
from test_layout import MODULES

# The one room that reads a scheduler's variables.
READER = 'generic_trainer.launch.'
_KEYS = 'generic_trainer.keys'


def _scheduler_values(node, names):
  """The scheduler variables an expression names: a string, a tuple of
  them, or a name bound to either (`names`: this module's and `keys`'
  constants)."""
  if isinstance(node, ast.Constant) and isinstance(node.value, str):
    return {node.value} & set(keys.SCHEDULER_ENV)
  if isinstance(node, (ast.Tuple, ast.List)):
    return set().union(*[_scheduler_values(e, names) for e in node.elts])
  if isinstance(node, ast.BinOp):
    return (_scheduler_values(node.left, names) |
            _scheduler_values(node.right, names))
  if isinstance(node, ast.Name):
    return names.get(node.id, set())
  if isinstance(node, ast.Attribute):
    return names.get(node.attr, set())
  return set()


def _constant_names(tree):
  """{name: the scheduler variables it holds}, for `keys`' constants and
  this module's own module-level ones."""
  names = {}
  for name in dir(keys):
    value = getattr(keys, name)
    held = ({value} if isinstance(value, str) else
            set(value) if isinstance(value, tuple) and
            all(isinstance(v, str) for v in value) else set())
    if held & set(keys.SCHEDULER_ENV):
      names[name] = held & set(keys.SCHEDULER_ENV)
  for node in tree.body:
    targets = (node.targets if isinstance(node, ast.Assign) else [])
    for target in targets:
      for one in (target.elts if isinstance(target, ast.Tuple) else [target]):
        if isinstance(one, ast.Name):
          names.setdefault(one.id, set()).update(
              _scheduler_values(node.value, names))
  return names


def scheduler_reads(source):
  """(line, variables) of each read of a scheduler variable in `source`:
  `<environ>.get(X)`, `getenv(X)`, `<environ>[X]` and `X in <environ>`,
  where X names one, directly or through a loop over them."""
  tree = ast.parse(source)
  names = _constant_names(tree)
  for node in ast.walk(tree):  # Loop variables over scheduler variables.
    loops = ([(node.target, node.iter)] if isinstance(node, ast.For) else
             [(g.target, g.iter) for g in node.generators]
             if isinstance(node, (ast.GeneratorExp, ast.ListComp,
                                  ast.SetComp, ast.DictComp))
             else [])
    for target, over in loops:
      held = _scheduler_values(over, names)
      if held and isinstance(target, ast.Name):
        names[target.id] = names.get(target.id, set()) | held
  found = []
  for node in ast.walk(tree):
    key = None
    if isinstance(node, ast.Call) and node.args and (
        (isinstance(node.func, ast.Attribute) and
         node.func.attr in ('get', 'getenv', 'pop')) or
        (isinstance(node.func, ast.Name) and node.func.id == 'getenv')):
      key = node.args[0]
      if isinstance(node.func, ast.Attribute) and node.func.attr in (
          'get', 'pop') and 'environ' not in ast.unparse(node.func.value):
        key = None
    elif isinstance(node, ast.Subscript) and 'environ' in ast.unparse(
        node.value) and isinstance(node.ctx, ast.Load):
      key = node.slice
    elif isinstance(node, ast.Compare) and any(
        isinstance(op, ast.In) for op in node.ops) and any(
            'environ' in ast.unparse(c) for c in node.comparators):
      key = node.left
    held = _scheduler_values(key, names) if key is not None else set()
    if held:
      found.append((node.lineno, sorted(held)))
  return found


def test_a_scheduler_variable_is_read_in_launch_alone():
  """No module outside `launch/` reads TF_CONFIG, a JobSet's variables,
  KFP's pod name, the step's variables or Kubeflow Trainer's status
  endpoint: they reach the rest through the plan's environment."""
  readers = {}
  for module, path in MODULES.items():
    with open(path) as f:
      reads = scheduler_reads(f.read())
    if reads:
      readers[module] = reads
  assert readers, 'the guard found no reader at all: it is broken'
  assert {m for m in readers if not m.startswith(READER)} == set(), readers


@pytest.mark.parametrize('source', [
    "import os\nx = os.environ.get('TF_CONFIG')",
    "from generic_trainer.keys import STEP_JOB_ENV\n"
    "def f(environ):\n  return environ[STEP_JOB_ENV]",
    "from generic_trainer.keys import TRAINER_STATUS_ENV\n"
    "def f(environ):\n  return [environ.get(n) for n in TRAINER_STATUS_ENV]",
    "URL = 'KUBEFLOW_TRAINER_SERVER_URL'\nENV = (URL,)\n"
    "def f(environ):\n  return [environ.get(n) for n in ENV]",
    "import os\nfrom generic_trainer import keys\n"
    "x = keys.KFP_POD_UID_ENV in os.environ",
])
def test_the_guard_finds_each_way_of_reading(source):
  """The guard catches a read spelt directly, through `keys`, through a
  loop over a tuple of them, or through a local alias (as the fit loop's
  progress handler and the step's job read them before)."""
  assert scheduler_reads(source)


def test_writing_a_variable_into_a_pod_is_not_a_read():
  """Rendering a pod's environment names the variables without reading
  them."""
  assert not scheduler_reads(
      "from generic_trainer.keys import STEP_JOB_RECORD_ENV\n"
      "env = [{'name': STEP_JOB_RECORD_ENV, 'value': 'x'}]")


_STEP = {keys.STEP_JOB_ENV: json.dumps({'kind': 'TrainJob', 'image': 'img',
                                        'resources': None}),
         keys.KFP_POD_NAME_ENV: 'step-pod', keys.KFP_POD_UID_ENV: 'uid-1'}
_JOB_POD = {'JOBSET_NAME': 'gt-1', 'REPLICATED_JOB_NAME': 'node',
            'JOB_INDEX': '0', 'JOB_COMPLETION_INDEX': '0',
            'GENERIC_TRAINER_NUM_NODES': '2',
            keys.STEP_JOB_RECORD_ENV: '{"path": "/r"}',
            'KUBEFLOW_TRAINER_SERVER_URL': 'https://ts:8443/p',
            'KUBEFLOW_TRAINER_SERVER_CA_CERT': '/ca',
            'KUBEFLOW_TRAINER_SERVER_TOKEN': '/token'}


def test_a_kubeflow_step_is_an_environment_whose_job_trains():
  """The step compiled to launch a job is found as such, owned by KFP's
  pod; with several workers its plan's launcher is the job's, with one it
  trains in its pod."""
  step = cluster_environment.detect(_STEP)
  assert isinstance(step, cluster_lib.KubeflowStep)
  assert step.owner == {'apiVersion': 'v1', 'kind': 'Pod',
                        'name': 'step-pod', 'uid': 'uid-1'}
  plan = plan_lib.from_settings({'module_file': 'm.py', 'num_workers': 3},
                                cluster=step)
  assert (plan.where, plan.num_workers, plan.role.is_chief) == (
      Where.KUBEFLOW_JOB, 3, True)
  one = plan_lib.from_settings({'module_file': 'm.py'}, cluster=step)
  assert one.where == Where.HERE


def _jwt(claims):
  import base64  # pylint: disable=g-import-not-at-top

  def part(value):
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode(
        ).rstrip('=')
  return f'{part({"alg": "RS256"})}.{part(claims)}.c2ln'


@pytest.mark.parametrize('token,expected', [
    (_jwt({'sub': 'system:serviceaccount:team-a:default-editor',
           'kubernetes.io': {'namespace': 'team-a'}}), 'default-editor'),
    (_jwt({'sub': 'system:serviceaccount:kubeflow:pipeline-runner'}),
     'pipeline-runner'),
    (_jwt({'sub': 'someone'}), None),
    ('not a token', None),
    (None, None)])
def test_the_steps_service_account_is_read_from_its_token(tmp_path, token,
                                                           expected):
  """The subject the API server writes into a service account's token
  (serviceaccount/claims.go); None without a token or another subject."""
  token_file = tmp_path / 'token'
  if token is not None:
    token_file.write_text(token + '\n')
  assert cluster_environment.step_service_account(str(token_file)) == \
      expected


def test_a_pod_of_the_steps_job_carries_its_record_and_status_endpoint():
  """A pod the job placed trains (the step's variable does not make it
  launch again), and its environment names where its chief records what
  it published and where it reports progress."""
  pod = cluster_environment.detect({**_STEP, **_JOB_POD})
  assert isinstance(pod, cluster_lib.JobSet)
  assert pod.step_record == '{"path": "/r"}'
  assert pod.status_endpoint == cluster_lib.StatusEndpoint(
      'https://ts:8443/p', '/ca', '/token')
  assert pod.role().is_chief and pod.role().num_workers == 2


def test_an_entry_point_that_trains_alone_still_reports_in_a_trainjob():
  """The command and the notebook never join a cluster, but alone in a
  TrainJob's pod they report to its status endpoint."""
  alone = cluster_environment.detect(_JOB_POD, joins=False)
  assert isinstance(alone, cluster_lib.Alone)
  assert alone.status_endpoint.url == 'https://ts:8443/p'
  assert alone.role() == cluster_lib.ClusterRole()


@pytest.mark.parametrize('environment', [
    cluster_lib.Alone(),
    cluster_lib.LocalGroup([4001, 4002], '/group').member(1),
    cluster_lib.TFConfig(json.dumps({'cluster': {'worker': ['a:1', 'b:1']},
                                     'task': {'type': 'worker',
                                              'index': 1}})),
    cluster_environment.detect(_JOB_POD),
    cluster_environment.detect(_STEP),
])
def test_a_child_receives_the_environment_its_parent_found(environment):
  """The plan carries the environment to a child process through JSON:
  the same object, never found again there."""
  plan = plan_lib.TrainingPlan('module_file', '/m.py', cluster=environment)
  again = plan_lib.TrainingPlan.from_json(json.loads(json.dumps(
      plan.to_json())))
  assert again.cluster == environment
  assert again.role == environment.role()


def test_a_local_group_gives_its_members_their_roles_and_topology():
  """A local group owns its members' roles, TF_CONFIG and stop file."""
  group = cluster_lib.LocalGroup([4001, 4002, 4003], '/group')
  roles = [member.role() for member in group.members()]
  assert [(r.worker_index, r.is_chief, r.num_workers) for r in roles] == [
      (0, True, 3), (1, False, 3), (2, False, 3)]
  third = group.member(2)
  assert cluster_lib.role_from_tf_config(third.tf_config) == third.role()
  assert cluster_environment.member_environ(third) == {
      'TF_CONFIG': third.tf_config,
      'GENERIC_TRAINER_STOP_FILE': os.path.join('/group', 'stop-step')}
