"""The stand-in API server (tests/kube_api.py) refuses what the real one
refuses, answers with its Status bodies, and serves every call the product
makes through the real `kubernetes` client (26.1.0)."""

import threading
import time

import pytest
from kubernetes import client, watch

import kube_api
from generic_trainer.launch import cluster_environment

GROUP, VERSION = 'trainer.kubeflow.org', 'v1alpha1'
NS = 'team-a'
RULES = [
    {'apiGroups': [GROUP], 'resources': ['trainjobs'],
     'verbs': ['create', 'get', 'watch', 'delete', 'patch']},
    {'apiGroups': [GROUP], 'resources': ['trainingruntimes'],
     'verbs': ['create', 'get', 'delete']},
    {'apiGroups': [''], 'resources': ['pods'], 'verbs': ['list']},
    {'apiGroups': [''], 'resources': ['pods/log'], 'verbs': ['get']},
]
USER = f'system:serviceaccount:{NS}:pipeline-runner'


def runtime(name='rt', max_restarts=1):
  return {
      'apiVersion': f'{GROUP}/{VERSION}', 'kind': 'TrainingRuntime',
      'metadata': {'name': name},
      'spec': {'mlPolicy': {'numNodes': 2}, 'template': {'spec': {
          'failurePolicy': {'maxRestarts': max_restarts},
          'replicatedJobs': [{'name': 'node', 'template': {'spec': {
              'backoffLimit': 0, 'template': {'spec': {
                  'restartPolicy': 'Never',
                  'containers': [{'name': 'node', 'image': 'busybox'}]}}}}}]
      }}}}


def trainjob(name='tj', **trainer):
  return {'apiVersion': f'{GROUP}/{VERSION}', 'kind': 'TrainJob',
          'metadata': {'name': name},
          'spec': {'runtimeRef': {'name': 'rt', 'kind': 'TrainingRuntime',
                                  'apiGroup': GROUP},
                   'trainer': {'numNodes': 2, **trainer}}}


@pytest.fixture
def api(tmp_path):
  with kube_api.KubeAPI(str(tmp_path), RULES, namespace=NS) as server:
    yield server


@pytest.fixture
def custom(api):
  return client.CustomObjectsApi(api.api_client())


def _create(custom, plural, body):
  return custom.create_namespaced_custom_object(GROUP, VERSION, NS, plural,
                                                body)


def _refusal(call, *args, **kwargs):
  with pytest.raises(client.ApiException) as caught:
    call(*args, **kwargs)
  import json  # pylint: disable=g-import-not-at-top
  return caught.value.status, json.loads(caught.value.body)


def pod(api, name, owner=None, **spec):
  body = {'apiVersion': 'v1', 'kind': 'Pod',
          'metadata': {'name': name, 'labels': {'app': 'x'}},
          'spec': {'containers': [{'name': 'node', 'image': 'busybox'}],
                   **spec}}
  if owner:
    body['metadata']['ownerReferences'] = [{
        'apiVersion': owner['apiVersion'], 'kind': owner['kind'],
        'name': owner['metadata']['name'], 'uid': owner['metadata']['uid'],
        'controller': True, 'blockOwnerDeletion': True}]
  return api.store.create('pods', NS, body)


def test_create_get_list_delete_round_trip(api, custom):
  """A created TrainJob is read back with the fields the server sets,
  listed, and deleted (a Success Status naming it)."""
  _create(custom, 'trainingruntimes', runtime())
  created = _create(custom, 'trainjobs',
                    {**trainjob(), 'status': {'conditions': []}})
  meta = created['metadata']
  assert meta['generation'] == 1 and meta['uid'] and meta[
      'creationTimestamp'].endswith('Z')
  assert int(meta['resourceVersion']) > 1000
  assert 'status' not in created  # The status subresource: dropped.
  read = custom.get_namespaced_custom_object(GROUP, VERSION, NS, 'trainjobs',
                                             'tj')
  assert read == created
  listed = api.store.list('trainjobs', NS, field_selector='metadata.name=tj')
  assert [o['metadata']['name'] for o in listed['items']] == ['tj']
  assert listed['kind'] == 'TrainJobList'
  answer = custom.delete_namespaced_custom_object(
      GROUP, VERSION, NS, 'trainjobs', 'tj',
      body=client.V1DeleteOptions(propagation_policy='Background'))
  assert answer == {'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
                    'status': 'Success',
                    'details': {'name': 'tj', 'group': GROUP,
                                'kind': 'trainjobs', 'uid': meta['uid']}}
  assert [(c.verb, c.resource, c.name, c.code) for c in api.calls] == [
      ('create', 'trainingruntimes', 'rt', 201),
      ('create', 'trainjobs', 'tj', 201), ('get', 'trainjobs', 'tj', 200),
      ('delete', 'trainjobs', 'tj', 200)]


def test_second_create_is_409(api, custom):
  """A name taken is 409 AlreadyExists."""
  _create(custom, 'trainingruntimes', runtime())
  code, status = _refusal(_create, custom, 'trainingruntimes', runtime())
  assert code == 409 and status['reason'] == 'AlreadyExists'
  assert status['message'] == (
      'trainingruntimes.trainer.kubeflow.org "rt" already exists')


def test_get_and_delete_absent_are_404(custom):
  """Reading or deleting what is not there is 404 NotFound, with details."""
  for call in (custom.get_namespaced_custom_object,
               custom.delete_namespaced_custom_object):
    code, status = _refusal(call, GROUP, VERSION, NS, 'trainjobs', 'gone')
    assert code == 404, call
    assert status['message'] == 'trainjobs.trainer.kubeflow.org "gone" not found'
    assert status['details'] == {'name': 'gone', 'group': GROUP,
                                 'kind': 'trainjobs'}


def test_unknown_field_is_refused(custom):
  """An unknown field is refused as strict field validation refuses it."""
  _create(custom, 'trainingruntimes', runtime())
  code, status = _refusal(_create, custom, 'trainjobs', trainjob(bogus=1))
  assert code == 400 and status['reason'] == 'BadRequest'
  assert status['message'] == (
      'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: '
      'strict decoding error: unknown field "spec.trainer.bogus"')


def test_crd_rule_is_422(custom):
  """A name breaking the CRD's CEL rule is 422 Invalid, with its cause."""
  _create(custom, 'trainingruntimes', runtime())
  code, status = _refusal(_create, custom, 'trainjobs', trainjob('Bad_Name'))
  assert code == 422 and status['reason'] == 'Invalid'
  assert status['message'].startswith(
      'TrainJob.trainer.kubeflow.org "Bad_Name" is invalid: <nil>: Invalid '
      'value: "object": metadata.name must match RFC 1035 DNS label format')
  assert [c['field'] for c in status['details']['causes']] == ['<nil>']


def test_namespace_and_version_mismatch_are_400(custom):
  """The body's namespace and apiVersion must be the request's."""
  body = runtime()
  body['metadata']['namespace'] = 'elsewhere'
  code, status = _refusal(_create, custom, 'trainingruntimes', body)
  assert (code, status['message']) == (400, (
      'the namespace of the provided object does not match the namespace '
      'sent on the request'))
  body = runtime()
  body['apiVersion'] = 'trainer.kubeflow.org/v1'
  code, status = _refusal(_create, custom, 'trainingruntimes', body)
  assert (code, status['message']) == (400, (
      'the API version in the data (trainer.kubeflow.org/v1) does not match '
      'the expected API version (trainer.kubeflow.org/v1alpha1)'))


def test_trainjob_without_runtime_is_denied_by_the_webhook(custom):
  """Trainer's webhook refuses a TrainJob whose runtime is absent."""
  code, status = _refusal(_create, custom, 'trainjobs', trainjob())
  assert code == 403
  assert status['message'].startswith(
      'admission webhook "validator.trainjob.trainer.kubeflow.org" denied '
      'the request: spec.runtimeRef: Invalid value: ')
  assert status['message'].endswith(
      'trainingruntimes.trainer.kubeflow.org "rt" not found: specified '
      'trainingRuntime must be created before the TrainJob is created')


def test_verb_not_granted_is_403(api, custom):
  """A verb the Role does not grant is 403 with Kubernetes' message."""
  core = client.CoreV1Api(api.api_client())
  code, status = _refusal(core.read_namespaced_pod, 'p', NS)
  assert code == 403 and status['reason'] == 'Forbidden'
  assert status['message'] == (
      f'pods "p" is forbidden: User "{USER}" cannot get resource "pods" in '
      f'API group "" in the namespace "{NS}"')
  code, status = _refusal(custom.list_namespaced_custom_object, GROUP,
                          VERSION, NS, 'trainjobs')
  assert status['message'] == (
      f'trainjobs.trainer.kubeflow.org is forbidden: User "{USER}" cannot '
      f'list resource "trainjobs" in API group "{GROUP}" in the namespace '
      f'"{NS}"')
  code, status = _refusal(custom.get_namespaced_custom_object, GROUP,
                          VERSION, 'other', 'trainjobs', 'tj')
  assert code == 403 and status['message'].endswith(
      'in the namespace "other"')
  assert ('get', '', 'pods', 'p', 403) in api.calls


def test_without_token_is_401(api):
  """No bearer token, or a wrong one, is 401 Unauthorized."""
  wrong = api.api_client()
  wrong.configuration.api_key = {'authorization': 'Bearer nope'}
  code, status = _refusal(client.CustomObjectsApi(wrong)
                          .get_namespaced_custom_object, GROUP, VERSION, NS,
                          'trainjobs', 'tj')
  assert (code, status['reason'], status['message']) == (
      401, 'Unauthorized', 'Unauthorized')
  wrong.configuration.api_key = {}
  code, _ = _refusal(client.CustomObjectsApi(wrong)
                     .get_namespaced_custom_object, GROUP, VERSION, NS,
                     'trainjobs', 'tj')
  assert code == 401


def test_watch_sees_added_modified_deleted_in_order(api, custom):
  """A watch from a resourceVersion sees the job's events after it, in
  order, with the field selector the product uses."""
  _create(custom, 'trainingruntimes', runtime())
  start = api.store.resource_version
  _create(custom, 'trainjobs', trainjob())
  _create(custom, 'trainjobs', trainjob('other'))
  api.store.update_status('trainjobs', NS, 'tj', {'conditions': [{
      'type': 'Complete', 'status': 'True', 'reason': 'AllJobsCompleted',
      'message': 'jobset completed successfully',
      'lastTransitionTime': kube_api.now_rfc3339()}]})
  custom.delete_namespaced_custom_object(GROUP, VERSION, NS, 'trainjobs',
                                         'tj')
  seen = [(e['type'], e['object']['metadata']['name'],
           int(e['object']['metadata']['resourceVersion']))
          for e in watch.Watch().stream(
              custom.list_namespaced_custom_object, GROUP, VERSION, NS,
              'trainjobs', field_selector='metadata.name=tj',
              resource_version=str(start), timeout_seconds=1)]
  assert [(t, n) for t, n, _ in seen] == [
      ('ADDED', 'tj'), ('MODIFIED', 'tj'), ('DELETED', 'tj')]
  versions = [v for _, _, v in seen]
  assert versions == sorted(versions) and versions[0] > start


def test_watch_follows_changes_made_while_it_runs(api, custom):
  """A watch from "now" receives a status written after it started."""
  _create(custom, 'trainingruntimes', runtime())
  created = _create(custom, 'trainjobs', trainjob())

  def later():
    time.sleep(0.3)
    api.store.update_status('trainjobs', NS, 'tj', {'conditions': []})
  threading.Thread(target=later).start()
  stream = watch.Watch().stream(
      custom.list_namespaced_custom_object, GROUP, VERSION, NS, 'trainjobs',
      field_selector='metadata.name=tj',
      resource_version=created['metadata']['resourceVersion'],
      timeout_seconds=2)
  event = next(stream)
  assert event['type'] == 'MODIFIED' and event['object']['status'] == {
      'conditions': []}
  stream.close()


def test_too_old_resource_version_is_410(api, custom):
  """A watch from before the kept history is an ERROR event, 410 Expired,
  which the client raises when a timeout is given."""
  api.store.set_window(2)
  _create(custom, 'trainingruntimes', runtime())
  start = api.store.resource_version
  for i in range(3):
    api.store.create('pods', NS, {'apiVersion': 'v1', 'kind': 'Pod',
                                  'metadata': {'name': f'p{i}'},
                                  'spec': {'containers': [{'name': 'c'}]}})
  with pytest.raises(client.ApiException) as caught:
    list(watch.Watch().stream(
        custom.list_namespaced_custom_object, GROUP, VERSION, NS,
        'trainjobs', resource_version=str(start), timeout_seconds=1))
  assert caught.value.status == 410
  oldest = api.store.resource_version - 1
  assert caught.value.reason == (
      f'Expired: too old resource version: {start} ({oldest - 1})')


def test_foreground_delete_waits_for_dependents(api, custom):
  """Foreground: the owner stays, with deletionTimestamp and the
  foregroundDeletion finalizer, until its blocking dependents are gone;
  a bound running pod goes only when the kubelet deletes it."""
  _create(custom, 'trainingruntimes', runtime())
  owner = _create(custom, 'trainjobs', trainjob())
  pod(api, 'tj-node-0-0-abcde', owner, nodeName='node-1')
  api.store.modify('pods', NS, 'tj-node-0-0-abcde',
                   lambda p: p.__setitem__('status', {'phase': 'Running'}))
  pending = custom.delete_namespaced_custom_object(
      GROUP, VERSION, NS, 'trainjobs', 'tj',
      body=client.V1DeleteOptions(propagation_policy='Foreground'))
  assert pending['metadata']['finalizers'] == ['foregroundDeletion']
  assert 'deletionTimestamp' in pending['metadata']
  kept = api.store.get('trainjobs', NS, 'tj')
  assert kept['metadata']['finalizers'] == ['foregroundDeletion']
  terminating = api.store.get('pods', NS, 'tj-node-0-0-abcde')
  assert terminating['metadata']['deletionGracePeriodSeconds'] == 30
  api.store.delete('pods', NS, 'tj-node-0-0-abcde', grace_period_seconds=0)
  code, _ = _refusal(custom.get_namespaced_custom_object, GROUP, VERSION,
                     NS, 'trainjobs', 'tj')
  assert code == 404


def test_background_delete_collects_dependents(api, custom):
  """Background: the owner goes at once and the garbage collector deletes
  its dependents; an object whose owner is absent is collected too."""
  _create(custom, 'trainingruntimes', runtime())
  owner = _create(custom, 'trainjobs', trainjob())
  pod(api, 'a', owner)
  custom.delete_namespaced_custom_object(GROUP, VERSION, NS, 'trainjobs',
                                         'tj')
  assert api.store.list('pods', NS)['items'] == []
  pod(api, 'b', {'apiVersion': 'v1', 'kind': 'Pod',
                 'metadata': {'name': 'step', 'uid': 'no-such-uid'}})
  assert api.store.list('pods', NS)['items'] == []


def test_merge_patch_sets_owner(api, custom):
  """A merge patch of metadata is applied; an owner reference without a
  uid is 422."""
  _create(custom, 'trainingruntimes', runtime())
  _create(custom, 'trainjobs', trainjob())
  step = pod(api, 'step')
  ref = {'apiVersion': 'v1', 'kind': 'Pod', 'name': 'step',
         'uid': step['metadata']['uid'], 'controller': True}
  patched = custom.patch_namespaced_custom_object(
      GROUP, VERSION, NS, 'trainjobs', 'tj',
      {'metadata': {'ownerReferences': [ref]}})
  assert patched['metadata']['ownerReferences'] == [ref]
  assert patched['metadata']['generation'] == 1
  code, status = _refusal(
      custom.patch_namespaced_custom_object, GROUP, VERSION, NS, 'trainjobs',
      'tj', {'metadata': {'ownerReferences': [dict(ref, uid='')]}})
  assert code == 422 and status['details']['causes'][0]['field'] == (
      'metadata.ownerReferences[0].uid')


def test_pod_list_and_log_tail(api):
  """Pods are listed by label; a log is served with tailLines, refused for
  an unknown container or pod."""
  core = client.CoreV1Api(api.api_client())
  pod(api, 'p', restartPolicy='Never')
  api.store.set_log(NS, 'p', ''.join(f'line {i}\n' for i in range(10)))
  listed = core.list_namespaced_pod(NS, label_selector='app=x')
  assert [p.metadata.name for p in listed.items] == ['p']
  assert core.list_namespaced_pod(NS, label_selector='app=y').items == []
  assert core.read_namespaced_pod_log('p', NS, container='node',
                                      tail_lines=2) == 'line 8\nline 9\n'
  code, status = _refusal(core.read_namespaced_pod_log, 'p', NS,
                          container='tensorflow')
  assert (code, status['message']) == (
      400, 'container tensorflow is not valid for pod p')
  code, status = _refusal(core.read_namespaced_pod_log, 'q', NS,
                          container='node')
  assert (code, status['message']) == (404, 'pods "q" not found')


@pytest.fixture
def controller(api, tmp_path):
  import subprocess  # pylint: disable=g-import-not-at-top
  import containers  # pylint: disable=g-import-not-at-top
  import kube_controller  # pylint: disable=g-import-not-at-top
  if subprocess.run([containers.ENGINE, 'image', 'exists', containers.IMAGE],
                    check=False, capture_output=True).returncode != 0:
    containers.build_image()  # Skips, saying why, where no engine is.
  logs = tmp_path / 'pod-logs'
  logs.mkdir()
  with kube_controller.Controller(api.store, NS, containers.IMAGE,
                                  str(logs)) as running:
    yield running


@pytest.mark.slow
def test_controller_runs_pods_that_resolve_each_other(api, custom,
                                                      controller):
  """Two pods of a TrainJob find each other at `<host>.<subdomain>`, and
  the TrainJob is Complete as Trainer copies it from the JobSet."""
  _create(custom, 'trainingruntimes', runtime())
  _create(custom, 'trainjobs', trainjob(image=controller.image, command=[
      'sh', '-c', 'getent hosts tj-node-0-$((1 - JOB_COMPLETION_INDEX)).tj '
      '&& hostname']))
  done = controller.wait('tj', timeout_s=180)
  (condition,) = done['status']['conditions']
  assert {k: condition[k] for k in ('type', 'status', 'reason', 'message')
          } == {'type': 'Complete', 'status': 'True',
                'reason': 'AllJobsCompleted',
                'message': 'jobset completed successfully'}
  core = client.CoreV1Api(api.api_client())
  pods = core.list_namespaced_pod(
      NS, label_selector='jobset.sigs.k8s.io/jobset-name=tj').items
  assert sorted(p.metadata.labels[
      'batch.kubernetes.io/job-completion-index'] for p in pods) == ['0', '1']
  for p in pods:
    index = int(p.metadata.labels['batch.kubernetes.io/job-completion-index'])
    log = core.read_namespaced_pod_log(p.metadata.name, NS, container='node')
    assert f'tj-node-0-{1 - index}.tj' in log, log
    assert log.strip().endswith(f'tj-node-0-{index}'), log
    assert p.status.container_statuses[0].state.terminated.exit_code == 0
  printed = controller.printed('tj').splitlines()
  assert printed[0].split() == ['NAME', 'STATE', 'AGE']
  assert printed[1].split()[:2] == ['tj', 'Complete']


@pytest.mark.slow
def test_controller_restarts_then_fails(api, custom, controller):
  """A pod exiting 1 with maxRestarts 1: the JobSet restarts once, then the
  TrainJob is Failed with JobSet's reason, and the failed pod's log is
  read through the API."""
  _create(custom, 'trainingruntimes', runtime(max_restarts=1))
  _create(custom, 'trainjobs', trainjob(
      numNodes=1, image=controller.image, command=['sh', '-c', 'echo boom; exit 1']))
  done = controller.wait('tj', timeout_s=180)
  (condition,) = done['status']['conditions']
  assert (condition['type'], condition['reason'], condition['message']) == (
      'Failed', 'ReachedMaxRestarts', 'jobset failed due to reaching max '
      'number of restarts (first failed job: tj-node-0)')
  core = client.CoreV1Api(api.api_client())
  (failed,) = core.list_namespaced_pod(
      NS, label_selector='jobset.sigs.k8s.io/jobset-name=tj').items
  assert failed.metadata.labels['jobset.sigs.k8s.io/restart-attempt'] == '1'
  assert failed.status.phase == 'Failed'
  assert core.read_namespaced_pod_log(failed.metadata.name, NS,
                                      container='node', tail_lines=1) == (
                                          'boom\n')


@pytest.mark.slow
def test_in_cluster_config_from_a_container(api, controller):
  """A container with the service-account folder mounted where the kubelet
  mounts it, and KUBERNETES_SERVICE_HOST/PORT, reaches the server through
  `load_incluster_config` (host network)."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import containers  # pylint: disable=g-import-not-at-top
  env = [f'{k}={v}' for k, v in api.environ.items()]
  result = subprocess.run(
      [containers.ENGINE, 'run', '--rm', '--network', 'host', '--pull',
       'never', '--user', '1000680000:0', '--read-only', '-v',
       f'{api.service_account_dir}:/var/run/secrets/kubernetes.io/'
       'serviceaccount:ro', '-e', env[0], '-e', env[1], '--entrypoint',
       'python', controller.image, '-c',
       'from kubernetes import client, config; '
       'config.load_incluster_config(); '
       'print(client.CustomObjectsApi().get_namespaced_custom_object('
       f'"{GROUP}", "{VERSION}", "{NS}", "trainjobs", "none"))'],
      capture_output=True, text=True, timeout=300, check=False)
  assert 'Reason: Not Found' in result.stderr, result.stderr[-2000:]
  assert ('get', GROUP, 'trainjobs', 'none', 404) in api.calls


def _post(server, ns, name, body, token):
  import json as _json, ssl as _ssl, urllib.error, urllib.request
  context = _ssl.create_default_context(cafile=server.tls['ca.crt'])
  request = urllib.request.Request(
      server.url(ns, name), data=body if isinstance(body, bytes) else
      _json.dumps(body).encode(), method='POST',
      headers={'Content-Type': 'application/json',
               **({'Authorization': f'Bearer {token}'} if token else {})})
  opener = urllib.request.build_opener(
      urllib.request.ProxyHandler({}),
      urllib.request.HTTPSHandler(context=context))
  try:
    with opener.open(request, timeout=10) as response:
      return response.status, _json.loads(response.read())
  except urllib.error.HTTPError as e:
    return e.code, _json.loads(e.read())


def test_status_server_writes_trainer_status(api, custom, tmp_path):
  import kube_controller
  from generic_trainer.loop.handlers import trainjob_progress
  _create(custom, 'trainingruntimes', runtime())
  _create(custom, 'trainjobs', trainjob('tj'))
  _create(custom, 'trainjobs', trainjob('other'))
  ns = api.namespace
  api.store.update_status('trainjobs', ns, 'tj', {'jobsStatus': [
      {'name': 'node', 'active': 1}]})
  server = kube_controller.StatusServer(api.store, str(tmp_path / 'ss'),
                                        '127.0.0.1').start()
  try:
    folder = server.mount(ns, 'tj')
    server.mount(ns, 'other')
    environ = dict(server.environ(ns, 'tj'),
                   KUBEFLOW_TRAINER_SERVER_CA_CERT=f'{folder}/ca.crt',
                   KUBEFLOW_TRAINER_SERVER_TOKEN=f'{folder}/token')
    handler = trainjob_progress.TrainJobProgress(
        cluster_environment.status_endpoint(environ))
    assert handler.reports
    sender = trainjob_progress._Sender(handler)
    sender.offer(trainjob_progress.update(40, 12, {'loss': 0.5}))
    sender.close(10)
    assert handler.sent == 1
    status = api.store.get('trainjobs', ns, 'tj')['status']
    assert status['jobsStatus'] == [{'name': 'node', 'active': 1}]
    assert status['trainerStatus']['progressPercentage'] == 40
    assert status['trainerStatus']['estimatedRemainingSeconds'] == 12
    assert status['trainerStatus']['metrics'] == [
        {'name': 'loss', 'value': '0.5'}]
    # A later update replaces it (server-side apply of the whole field).
    code, _ = _post(server, ns, 'tj', {'trainerStatus': {
        'progressPercentage': 100,
        'lastUpdatedTime': '2026-01-02T03:04:05.6+01:00'}},
                    server.token(ns, 'tj'))
    assert code == 200
    assert api.store.get('trainjobs', ns, 'tj')['status']['trainerStatus'] \
        == {'progressPercentage': 100, 'lastUpdatedTime': '2026-01-02T02:04:05Z'}
    good = {'trainerStatus': {'progressPercentage': 1,
                              'lastUpdatedTime': '2026-01-02T03:04:05Z'}}
    assert _post(server, ns, 'tj', good, server.token(ns, 'other'))[0] == 403
    assert _post(server, ns, 'tj', good, None)[0] == 403  # auth.go: no 401.
    assert _post(server, ns, 'tj', good, 'forged')[0] == 403
    token = server.token(ns, 'tj')
    assert _post(server, ns, 'tj', b'{"trainerStatus": ', token) == (
        422, {'metadata': {}, 'status': 'Failure', 'message':
              'Invalid payload', 'reason': 'Invalid', 'code': 422})
    assert _post(server, ns, 'tj', {'trainerStatus': {
        'progressPercentage': 1.5}}, token)[0] == 422
    code, body = _post(server, ns, 'tj', {'trainerStatus': {
        'progressPercentage': 101, 'lastUpdatedTime': '2026-01-02T03:04:05Z'}},
                       token)
    assert code == 422 and 'less than or equal to 100' in body['message']
    code, body = _post(server, ns, 'tj', {'trainerStatus': {
        'progressPercentage': 5}}, token)
    assert code == 422 and 'lastUpdatedTime is required' in body['message']
    assert _post(server, ns, 'tj', {'unknown': 1}, token) == (200, {})
    assert api.store.get('trainjobs', ns, 'tj')['status']['trainerStatus'][
        'progressPercentage'] == 100
    server.token(ns, 'gone')
    assert _post(server, ns, 'gone', good, server.token(ns, 'gone'))[0] == 404
  finally:
    server.stop()


# Admission on pods: Pod Security and ResourceQuota.

RESTRICTED = {'pod-security.kubernetes.io/enforce': 'restricted'}


def _pod_from_template(name, template):
  return {'apiVersion': 'v1', 'kind': 'Pod',
          'metadata': {**template.get('metadata', {}), 'name': name},
          'spec': template['spec']}


def test_a_restricted_namespace_refuses_a_pod_without_the_restricted_fields(
    api):
  """The refusal of pod-security-admission: every failed check, by ID, with
  its reason and detail, in its 403."""
  api.store.label_namespace(NS, RESTRICTED)
  with pytest.raises(kube_api.StatusError) as refused:
    pod(api, 'bare')
  code, status = refused.value.code, refused.value.status
  assert (code, status['reason']) == (403, 'Forbidden')
  assert status['message'] == (
      'pods "bare" is forbidden: violates PodSecurity "restricted:latest": '
      'allowPrivilegeEscalation != false (container "node" must set '
      'securityContext.allowPrivilegeEscalation=false), unrestricted '
      'capabilities (container "node" must set securityContext.capabilities.'
      'drop=["ALL"]), runAsNonRoot != true (pod or container "node" must set '
      'securityContext.runAsNonRoot=true), seccompProfile (pod or container '
      '"node" must set securityContext.seccompProfile.type to '
      '"RuntimeDefault" or "Localhost")')
  assert not api.store.list('pods', NS)['items']


def test_a_baseline_namespace_refuses_privileged_and_host_paths(api):
  api.store.label_namespace(NS, {
      'pod-security.kubernetes.io/enforce': 'baseline'})
  with pytest.raises(kube_api.StatusError) as refused:
    pod(api, 'bare', volumes=[{'name': 'h', 'hostPath': {'path': '/'}}])
  assert refused.value.status['message'] == (
      'pods "bare" is forbidden: violates PodSecurity "baseline:latest": '
      'hostPath volumes (volume "h")')
  pod(api, 'q')  # Baseline asks nothing of a plain pod.


@pytest.mark.parametrize('kind', ['TrainJob', 'TFJob'])
def test_a_restricted_namespace_admits_the_pods_we_render(api, kind):
  """Every pod of a TrainJob's runtime and of a TFJob, as rendered with no
  settings and with a team's, passes "restricted"; the user can still ask
  for less, and is then refused."""
  from compiled_steps import ARGS, COMMAND, IMAGE, SETTINGS  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import tfjob, trainjob  # pylint: disable=g-import-not-at-top
  api.store.label_namespace(NS, RESTRICTED)

  def templates(settings):
    if kind == 'TrainJob':
      rendered = trainjob.render('tj', IMAGE, COMMAND, ARGS, 2,
                                 pod_settings=settings)
      (rjob,) = rendered['runtime']['spec']['template']['spec'][
          'replicatedJobs']
      return [rjob['template']['spec']['template']]
    rendered = tfjob.render('tf', IMAGE, COMMAND, ARGS, num_workers=2,
                            pod_settings=settings)
    return [r['template'] for r in rendered['spec']['tfReplicaSpecs'].values()]

  settings = {k: v for k, v in SETTINGS.items() if k != 'service_account'}
  for i, template in enumerate(templates(None) + templates(settings)):
    api.store.create('pods', NS, _pod_from_template(f'ours-{i}', template))
  (less,) = templates({'security_context': {
      'allowPrivilegeEscalation': True}})[:1]
  with pytest.raises(kube_api.StatusError, match=(
      r'violates PodSecurity "restricted:latest": allowPrivilegeEscalation '
      r'!= false \(container "(node|tensorflow)" must set')):
    api.store.create('pods', NS, _pod_from_template('less', less))


def test_a_quota_on_pods_refuses_the_pod_past_it(api):
  """count/pods and requests.cpu as the ResourceQuota plugin counts them:
  finished pods do not count; a pod without a request a quota tracks is
  refused."""
  api.store.set_quota(NS, 'compute', {'count/pods': '2', 'requests.cpu': '3'})
  cpu = lambda n: [{'name': 'node', 'image': 'busybox',
                    'resources': {'requests': {'cpu': n}}}]
  pod(api, 'a', containers=cpu('1'))
  pod(api, 'b', containers=cpu('1500m'))
  with pytest.raises(kube_api.StatusError) as refused:
    pod(api, 'c', containers=cpu('1'))
  assert refused.value.code == 403
  assert refused.value.status['message'] == (
      'pods "c" is forbidden: exceeded quota: compute, requested: '
      'count/pods=1,requests.cpu=1, used: count/pods=2,requests.cpu=2500m, '
      'limited: count/pods=2,requests.cpu=3')
  with pytest.raises(kube_api.StatusError) as refused:
    pod(api, 'd')
  assert refused.value.status['message'] == (
      'pods "d" is forbidden: failed quota: compute: must specify '
      'requests.cpu')
  api.store.modify('pods', NS, 'a', lambda p: p.__setitem__(
      'status', {'phase': 'Succeeded'}))
  pod(api, 'c', containers=cpu('500m'))


def test_the_kubelet_runs_a_pod_as_its_spec_declares_and_adds_nothing():
  """The stand-in kubelet's container arguments come from the pod spec
  alone: a bare pod gets none (no /tmp of its own); the TrainJob's pod its
  restricted securityContext and its /tmp emptyDir."""
  import kube_controller  # pylint: disable=g-import-not-at-top
  from compiled_steps import ARGS, COMMAND, IMAGE  # pylint: disable=g-import-not-at-top
  from generic_trainer.kubeflow import trainjob  # pylint: disable=g-import-not-at-top
  bare = {'containers': [{'name': 'node', 'image': 'busybox'}]}
  assert kube_controller.pod_run_args(bare, bare['containers'][0]) == []
  rendered = trainjob.render('tj', IMAGE, COMMAND, ARGS, 2, pod_settings={
      'security_context': {'runAsUser': 1000680000, 'runAsGroup': 0}})
  (rjob,) = rendered['runtime']['spec']['template']['spec']['replicatedJobs']
  spec = rjob['template']['spec']['template']['spec']
  assert kube_controller.pod_run_args(spec, spec['containers'][0]) == [
      '--user', '1000680000:0', '--read-only', '--read-only-tmpfs=false',
      '--security-opt', 'no-new-privileges', '--cap-drop', 'ALL',
      '--tmpfs', '/tmp:rw,exec,mode=1777']


def test_in_a_restricted_namespace_restricted_checks_replace_baseline_ones(
    api):
  """restrictedVolumes overrides hostPathVolumes (registry.go): a hostPath
  volume is named once, as a restricted volume type."""
  from generic_trainer.kubeflow import pod_settings as settings_lib  # pylint: disable=g-import-not-at-top
  api.store.label_namespace(NS, RESTRICTED)
  restricted = [{'name': 'node', 'image': 'busybox',
                 'securityContext': settings_lib.RESTRICTED_CONTAINER}]
  with pytest.raises(kube_api.StatusError) as refused:
    pod(api, 'h', containers=restricted,
        volumes=[{'name': 'h', 'hostPath': {'path': '/'}}])
  assert refused.value.status['message'] == (
      'pods "h" is forbidden: violates PodSecurity "restricted:latest": '
      'restricted volume types (volume "h" uses restricted volume type '
      '"hostPath")')
  pod(api, 'ok', containers=restricted)
