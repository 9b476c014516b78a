"""The Role and RoleBinding `step_job.rbac` renders for the step's service
account: Kubernetes accepts them (tests/k8s_schema.py, against Kubernetes'
published OpenAPI document pinned in tests/schemas/), and they grant the
account exactly the calls the step makes (each kind's `api_calls`), which
are in turn exactly the HTTP requests `step_job.client.Cluster` sends.
Quick: no cluster, no container.
"""

import ast
import copy
import hashlib
import json
import os
import re
import urllib.parse
from typing import Any, Dict, List, Set, Tuple

import pytest

import k8s_schema
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import kinds
from generic_trainer.kubeflow.step_job import client as step_client
from generic_trainer.kubeflow.step_job.rbac import rbac

RBAC_V1 = 'rbac.authorization.k8s.io/v1'
# Kubernetes' IsDNS1123Subdomain
# (k8s.io/apimachinery/pkg/util/validation/validation.go).
DNS1123_SUBDOMAIN = re.compile(
    r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')

# The calls the step is meant to make (its design; each kind's api_calls
# must say the same, so that a new call is a decision, not a drift):
# create, read, follow (watch), delete and take over (patch its owner
# reference) its job; create, read, take over and delete a TrainJob's
# TrainingRuntime; list the job's pods and read the failing one's log;
# list the namespace's events (why pods never started).
_PODS = {('', 'pods', 'list'), ('', 'pods/log', 'get'),
         ('', 'events', 'list')}
EXPECTED = {
    'TrainJob': {('trainer.kubeflow.org', 'trainjobs', verb) for verb in (
        'create', 'get', 'watch', 'delete', 'patch')} | {
            ('trainer.kubeflow.org', 'trainingruntimes', verb)
            for verb in ('create', 'get', 'delete', 'patch')} | _PODS,
    'TFJob': {('kubeflow.org', 'tfjobs', verb) for verb in (
        'create', 'get', 'watch', 'delete', 'patch')} | _PODS,
}
KINDS = sorted(EXPECTED)


def _id(value: Any) -> str:
  """A readable test id for a long name: 'a*222-b*30'."""
  text = str(value)
  return text if len(text) <= 40 else re.sub(
      r'(.)\1{3,}', lambda m: f'{m.group(1)}*{len(m.group(0))}', text)

SERVICE_ACCOUNTS = ('pipeline-runner', 'default-editor', 'a', 'sa.with.dots',
                    '0-starts-with-a-digit', 'x' * 253)


def _grants(role: Dict[str, Any]) -> Set[Tuple[str, str, str]]:
  """What a Role lets its subjects do, as (group, resource, verb): each
  rule grants every combination of its apiGroups, resources and verbs
  (RBAC's RuleAllows, plugin/pkg/auth/authorizer/rbac/rbac.go)."""
  return {(group, resource, verb)
          for rule in role['rules']
          for group in rule.get('apiGroups', [])
          for resource in rule.get('resources', [])
          for verb in rule.get('verbs', [])}


@pytest.mark.parametrize('kind', KINDS)
def test_the_step_makes_exactly_the_designed_calls(kind):
  assert set(kinds.named(kind).api_calls) == EXPECTED[kind]
  assert len(kinds.named(kind).api_calls) == len(EXPECTED[kind])  # No repeats.


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('service_account', SERVICE_ACCOUNTS, ids=_id)
def test_kubernetes_accepts_the_role_and_binding(kind, service_account):
  objects = rbac(service_account, 'kubeflow-user', kind)
  assert [(o['apiVersion'], o['kind']) for o in objects] == [
      (RBAC_V1, 'Role'), (RBAC_V1, 'RoleBinding')]
  for obj in objects:
    assert k8s_schema.errors(obj) == [], obj['kind']


@pytest.mark.parametrize('kind', KINDS)
def test_the_role_grants_exactly_the_steps_calls(kind):
  role, _ = rbac('pipeline-runner', 'kubeflow-user', kind)
  assert _grants(role) == set(kinds.named(kind).api_calls)
  for rule in role['rules']:
    # Nothing beyond the triples: no wildcard, no URL outside the API, and
    # every key of the rule is one the expansion above reads (so no key
    # widens what it grants unseen).
    assert set(rule) <= {'apiGroups', 'resources', 'verbs'}, rule
    assert '*' not in json.dumps(rule), rule
  assert role['metadata']['namespace'] == 'kubeflow-user'


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('service_account', SERVICE_ACCOUNTS, ids=_id)
def test_the_binding_binds_the_account_to_the_role(kind, service_account):
  role, binding = rbac(service_account, 'team-a', kind)
  assert binding['metadata']['namespace'] == 'team-a'
  # A RoleBinding's roleRef names a Role in its own namespace
  # (https://kubernetes.io/docs/reference/access-authn-authz/rbac/).
  assert binding['roleRef'] == {'apiGroup': 'rbac.authorization.k8s.io',
                                'kind': 'Role',
                                'name': role['metadata']['name']}
  subject = dict(binding['subjects'][0])
  assert subject.pop('apiGroup', '') == ''  # A ServiceAccount's is core.
  assert binding['subjects'] == [binding['subjects'][0]]
  assert subject == {'kind': 'ServiceAccount', 'name': service_account,
                     'namespace': 'team-a'}


@pytest.mark.parametrize('kind', KINDS)
def test_the_names_are_dns_1123_subdomains(kind):
  """The names of both, for every account, the longest among them and
  those with a '-' or '.' wherever a cut to 253 characters may fall: any
  tool that takes them for DNS-1123 subdomains (the rule of most
  Kubernetes names; the API server asks less of RBAC names) takes them."""
  accounts = list(SERVICE_ACCOUNTS) + [
      'a' * at + separator + 'b' * (252 - at)
      for at in range(180, 252) for separator in '-.']
  bad = []
  for account in accounts:
    for obj in rbac(account, 'kubeflow', kind):
      name = obj['metadata']['name']
      if len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
        bad.append(f"{obj['kind']} {_id(name)} (account {_id(account)})")
  assert not bad, '\n'.join(bad[:10]) + f'\n({len(bad)} in all)'


@pytest.mark.parametrize('kind', KINDS)
def test_two_accounts_get_two_bindings(kind):
  """Applying the binding of one account must not replace another's
  (same name, same namespace: `kubectl apply` would overwrite its
  subjects), however long the names."""
  accounts = ['pipeline-runner', 'pipeline-runner-2', 'a' * 240 + '1',
              'a' * 240 + '2', 'a' * 252 + '1', 'a' * 252 + '2']
  names = {rbac(sa, 'kubeflow', kind)[1]['metadata']['name']
           for sa in accounts}
  assert len(names) == len(accounts), sorted(names)


@pytest.mark.parametrize('service_account', [
    'Pipeline-Runner', 'runner_1', '', '-runner', 'runner-', 'a/b', 'a..b',
    'a' * 254, None, 7], ids=_id)
def test_a_name_kubernetes_refuses_is_refused(service_account):
  """ValidateServiceAccountName: a DNS-1123 subdomain
  (pkg/apis/core/validation/validation.go)."""
  with pytest.raises(InvalidArgumentError, match='service_account'):
    rbac(service_account, 'kubeflow')


@pytest.mark.parametrize('namespace', ['Kubeflow', '', 'a.b', 'a' * 64,
                                       'ns-', None], ids=_id)
def test_a_namespace_kubernetes_refuses_is_refused(namespace):
  """A namespace's name is a DNS-1123 label (ValidateNamespaceName)."""
  with pytest.raises(InvalidArgumentError, match='namespace'):
    rbac('pipeline-runner', namespace)


def test_an_unknown_kind_is_refused():
  with pytest.raises(InvalidArgumentError, match='PyTorchJob'):
    rbac('pipeline-runner', 'kubeflow', 'PyTorchJob')


# The validator itself refuses what the API server refuses, so the tests
# above can fail.


def _binding() -> Dict[str, Any]:
  return rbac('pipeline-runner', 'kubeflow')[1]


def _role() -> Dict[str, Any]:
  return rbac('pipeline-runner', 'kubeflow')[0]


def _without(obj, *path):
  obj = copy.deepcopy(obj)
  node = obj
  for key in path[:-1]:
    node = node[key]
  del node[path[-1]]
  return obj


def _with(obj, value, *path):
  obj = copy.deepcopy(obj)
  node = obj
  for key in path[:-1]:
    node = node[key]
  node[path[-1]] = value
  return obj


@pytest.mark.parametrize('obj, expected', [
    # Misspelled fields: strict field validation refuses unknown keys.
    (lambda: _with(_without(_binding(), 'roleRef'), _binding()['roleRef'],
                   'roleref'), "'roleref' was unexpected"),
    (lambda: _with(_role(), ['get'], 'rules', 0, 'verb'),
     "rules.0: Additional properties are not allowed ('verb'"),
    (lambda: _with(_binding(), 'kubeflow', 'subjects', 0, 'namspace'),
     "subjects.0: Additional properties are not allowed ('namspace'"),
    (lambda: _with(_role(), {'a': 'b'}, 'metadata', 'label'),
     "metadata: Additional properties are not allowed ('label'"),
    (lambda: _with(_role(), [], 'spec'), "'spec' was unexpected"),
    # Missing required fields.
    (lambda: _without(_binding(), 'roleRef', 'kind'),
     "roleRef: 'kind' is a required property"),
    (lambda: _without(_binding(), 'roleRef'),
     "(root): 'roleRef' is a required property"),
    (lambda: _without(_role(), 'rules', 0, 'verbs'),
     "rules.0: 'verbs' is a required property"),
    (lambda: _without(_binding(), 'subjects', 0, 'name'),
     "subjects.0: 'name' is a required property"),
    (lambda: _without(_role(), 'kind'), 'and kind None'),
    # A wrong kind or apiVersion.
    (lambda: _with(_binding(), 'Rolebinding', 'kind'),
     "kind 'Rolebinding'"),
    (lambda: _with(_binding(), 'Role', 'kind'),
     "Additional properties are not allowed ('roleRef', 'subjects'"),
    (lambda: _with(_role(), 'rbac.authorization.k8s.io/v1beta1',
                   'apiVersion'), "apiVersion 'rbac.authorization.k8s.io"),
    (lambda: _with(_role(), 'RoleBinding', 'kind'),
     "'roleRef' is a required property"),
    # Wrong types.
    (lambda: _with(_role(), 'get', 'rules', 0, 'verbs'),
     "rules.0.verbs: 'get' is not of type 'array'"),
    (lambda: _with(_role(), 1.0, 'metadata', 'generation'),
     "metadata.generation: 1.0 is not of type 'integer'"),
    (lambda: _with(_role(), 'yesterday', 'metadata', 'creationTimestamp'),
     'is not an RFC 3339 date-time'),
    (lambda: _with(_role(), ['a', 'a'], 'metadata', 'finalizers'),
     'has non-unique elements'),
    # The API server's validation (pkg/apis/rbac/validation/validation.go).
    (lambda: _with(_binding(), 'Roles', 'roleRef', 'kind'),
     "roleRef.kind: Unsupported value: 'Roles'"),
    (lambda: _with(_binding(), 'rbac.authorization.k8s.io/v1', 'roleRef',
                   'apiGroup'), 'roleRef.apiGroup: Unsupported value'),
    (lambda: _with(_binding(), '', 'roleRef', 'name'),
     'roleRef.name: Required value'),
    (lambda: _with(_binding(), 'rbac.authorization.k8s.io', 'subjects', 0,
                   'apiGroup'), 'subjects.0.apiGroup: Unsupported value'),
    (lambda: _with(_binding(), 'Pipeline_Runner', 'subjects', 0, 'name'),
     'subjects.0.name: Invalid value'),
    (lambda: _with(_binding(), 'Serviceaccount', 'subjects', 0, 'kind'),
     "subjects.0.kind: Unsupported value: 'Serviceaccount'"),
    (lambda: _with(_role(), [], 'rules', 0, 'verbs'),
     'rules.0.verbs: Required value'),
    (lambda: _with(_role(), ['/healthz'], 'rules', 0, 'nonResourceURLs'),
     'namespaced rules cannot apply to non-resource URLs'),
    (lambda: _with(_role(), 'a/b', 'metadata', 'name'),
     "metadata.name: Invalid value: 'a/b'"),
    (lambda: _with(_role(), 'Kubeflow', 'metadata', 'namespace'),
     "metadata.namespace: Invalid value: 'Kubeflow'"),
    (lambda: _with(_role(), {'a b': 'c'}, 'metadata', 'labels'),
     "metadata.labels: Invalid value: 'a b'"),
], ids=lambda value: _id(value) if isinstance(value, str) else 'obj')
def test_the_validator_refuses_what_kubernetes_refuses(obj, expected):
  found = k8s_schema.errors(obj())
  assert any(expected in line for line in found), found


def test_the_validator_reads_kubernetes_published_document():
  """The schema is the pinned document's own: its Role has the fields
  Kubernetes publishes, and a newly pinned one keeps the keywords
  tests/k8s_schema.py knows (it raises on any other)."""
  role = k8s_schema.schema(RBAC_V1, 'Role')
  assert set(role['properties']) == {'apiVersion', 'kind', 'metadata',
                                     'rules'}
  binding = k8s_schema.schema(RBAC_V1, 'RoleBinding')
  assert binding['required'] == ['apiVersion', 'kind', 'roleRef']
  assert binding['$defs']['io.k8s.api.rbac.v1.RoleRef']['required'] == [
      'apiGroup', 'kind', 'name']
  for kind in ('Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'):
    assert (RBAC_V1, kind) in k8s_schema.kinds()


# The calls `step_job.client.Cluster` sends, as the API server authorizes
# them.


class _Response:
  """What the `kubernetes` client's REST layer returns (urllib3's)."""

  def __init__(self, data: Any):
    self.status, self.reason = 200, 'OK'
    self.data = data if isinstance(data, bytes) else json.dumps(
        data).encode()

  def getheaders(self):
    return {'content-type': 'application/json'}

  def getheader(self, name, default=None):
    return self.getheaders().get(name.lower(), default)

  def stream(self, amt=None, decode_content=False):
    del amt, decode_content  # Unused.
    yield self.data

  def close(self):
    pass

  def release_conn(self):
    pass


class _RecordingRest:
  """Stands for the client's REST layer: records each request as the
  (API group, resource, verb) the API server authorizes it as, by the rules
  of its RequestInfoFactory (staging/src/k8s.io/apiserver/pkg/endpoints/
  request/requestinfo.go): POST create, PUT update, PATCH patch, DELETE
  delete (deletecollection without a name), GET get with a name, list
  without one, watch with `watch=true`; the resource is the path's, with
  '/subresource' after it."""

  def __init__(self):
    self.calls: List[Tuple[str, str, str]] = []

  def GET(self, url, **kwargs):  # pylint: disable=invalid-name
    return self.request('GET', url, **kwargs)

  def POST(self, url, **kwargs):  # pylint: disable=invalid-name
    return self.request('POST', url, **kwargs)

  def PUT(self, url, **kwargs):  # pylint: disable=invalid-name
    return self.request('PUT', url, **kwargs)

  def PATCH(self, url, **kwargs):  # pylint: disable=invalid-name
    return self.request('PATCH', url, **kwargs)

  def DELETE(self, url, **kwargs):  # pylint: disable=invalid-name
    return self.request('DELETE', url, **kwargs)

  def request(self, method, url, query_params=None, headers=None,
              post_params=None, body=None, _preload_content=True,
              _request_timeout=None):
    del headers, post_params, body, _request_timeout
    response = self._answer(method, url, query_params)
    if _preload_content:  # As kubernetes.client.rest.RESTClientObject.
      response.data = response.data.decode('utf8')
    return response

  def _answer(self, method, url, query_params):
    parsed = urllib.parse.urlparse(url)
    query = dict(query_params or []) | dict(
        urllib.parse.parse_qsl(parsed.query))
    parts = parsed.path.strip('/').split('/')
    if parts[0] == 'api':  # /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]]
      group, rest = '', parts[2:]
    else:  # /apis/GROUP/VERSION/namespaces/NS/RESOURCE[/NAME[/SUB]]
      assert parts[0] == 'apis', url
      group, rest = parts[1], parts[3:]
    assert rest[0] == 'namespaces', f'a request outside a namespace: {url}'
    resource, name, sub = (rest[2:] + [None, None])[:3]
    verb = {'POST': 'create', 'PUT': 'update', 'PATCH': 'patch',
            'DELETE': 'delete' if name else 'deletecollection',
            'GET': 'get' if name else 'list'}[method]
    if verb == 'list' and str(query.get('watch', '')).lower() in ('true',
                                                                  '1'):
      verb = 'watch'
    self.calls.append((group, resource + (f'/{sub}' if sub else ''), verb))
    if resource == 'pods' and sub == 'log':
      return _Response(b'the last lines\n')
    if resource == 'events':
      return _Response({'items': []})
    if resource == 'pods':
      return _Response({'items': [{'metadata': {'name': 'job-worker-0'},
                                   'status': {'phase': 'Failed'}}]})
    if verb == 'watch':
      return _Response(json.dumps({'type': 'ADDED', 'object': {
          'metadata': {'name': name, 'resourceVersion': '2'}}}).encode()
                       + b'\n')
    return _Response({'metadata': {'name': name or 'made',
                                   'resourceVersion': '1'}})


def _cluster(kind: str):
  from kubernetes import client  # pylint: disable=g-import-not-at-top
  api_client = client.ApiClient(client.Configuration(host='http://k8s.test'))
  rest = _RecordingRest()
  api_client.rest_client = rest
  return step_client.Cluster(api_client, 'kubeflow', kinds.named(kind)), rest


def _sent(kind: str, method: str, plural: str) -> Set[Tuple[str, str, str]]:
  """What one call of `Cluster.<method>` on `plural` sends."""
  cluster, rest = _cluster(kind)
  if method == 'get':
    cluster.get(plural, 'job')
  elif method == 'create':
    cluster.create(plural, {'metadata': {'name': 'job'}})
  elif method == 'delete':
    cluster.delete(plural, 'job', foreground=True)
  elif method == 'own':
    cluster.own(plural, 'job', {'apiVersion': 'v1', 'kind': 'Pod',
                                'name': 'step', 'uid': 'u'})
  elif method == 'watch':
    list(cluster.watch(plural, 'job', '1'))
  elif method == 'pods_started':
    assert cluster.pods_started('job') == (False, [])
  elif method == 'warnings':
    assert cluster.warnings('job') == []
  elif method == 'failing_pod_log':
    assert cluster.failing_pod_log('job') == ('job-worker-0',
                                              'the last lines\n')
  else:
    raise AssertionError(f'step_job calls Cluster.{method}, which this test '
                         'does not drive: add it to _sent.')
  assert rest.calls, method
  return set(rest.calls)


def _cluster_calls_in_step_job() -> Set[Tuple[str, bool]]:
  """Every `cluster.<method>(...)` of the step_job package's modules, with
  whether it is called on a companion's plural (`companion.plural`: an
  object beside the job, such as a TrainJob's TrainingRuntime) rather than
  on the job's own plural (or on none)."""
  folder = os.path.dirname(step_client.__file__)
  found = set()
  for name in sorted(os.listdir(folder)):
    if not name.endswith('.py'):
      continue
    with open(os.path.join(folder, name)) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and isinstance(node.func.value, ast.Name)
          and node.func.value.id == 'cluster'):
        first = node.args[0] if node.args else None
        assert not isinstance(first, ast.Constant), (
            f'{name}:{node.lineno}: a plural spelt out; ask the kind')
        found.add((node.func.attr, isinstance(first, ast.Attribute) and
                   getattr(first.value, 'id', None) == 'companion'))
  return found


@pytest.mark.parametrize('kind', KINDS)
def test_api_calls_are_the_requests_the_step_sends(kind):
  """The kind's `api_calls` are what the step's `Cluster` sends, by the
  method each place in the step_job package calls and the resource it
  calls it on (the job's, or each of its companions'); so the Role grants
  no more than the step uses, and no less."""
  calls = _cluster_calls_in_step_job()
  assert calls, 'step_job calls no cluster method?'
  job_kind = kinds.named(kind)
  sent = set()
  for method, on_companion in calls:
    plurals = ([c.plural for c in job_kind.companions] if on_companion
               else [job_kind.plural])
    for plural in plurals:
      sent |= _sent(kind, method, plural)
  assert sent == set(job_kind.api_calls)
  role, _ = rbac('pipeline-runner', 'kubeflow', kind)
  assert sent == _grants(role)


def test_the_pinned_document_is_the_recorded_one():
  """The document's SHA-256 is the one tests/schemas/README.md records, so
  an edited copy is noticed."""
  with open(k8s_schema.RBAC_V1, 'rb') as f:
    digest = hashlib.sha256(f.read()).hexdigest()
  readme = os.path.join(os.path.dirname(k8s_schema.RBAC_V1), 'README.md')
  with open(readme) as f:
    rows = [line for line in f
            if os.path.basename(k8s_schema.RBAC_V1) in line and '|' in line]
  assert len(rows) == 1 and rows[0].rstrip().endswith(f'| {digest} |'), (
      digest, rows)


@pytest.mark.parametrize('namespace', ['kubeflow', '1team', '2024-ml',
                                       'a' * 63], ids=_id)
def test_a_namespace_kubernetes_accepts_is_accepted(namespace):
  """A namespace's name is a DNS-1123 label, which may start with a digit
  (ValidateNamespaceName, pkg/apis/core/validation/validation.go, is
  apimachinery's ValidateNamespaceName: IsDNS1123Label)."""
  for obj in rbac('pipeline-runner', namespace):
    assert obj['metadata']['namespace'] == namespace
    assert k8s_schema.errors(obj) == []
