"""A stand-in for what runs a TrainJob in a cluster (Kubeflow Trainer
v2.3.0, JobSet v0.12.0, the Job controller and the kubelet), in the test
process, over tests/kube_api.py's store; every pod a container of the
project image.

Sources (kubeflow/trainer at v2.3.0, kubernetes-sigs/jobset at v0.12.0, as
mirrored here; kubernetes/kubernetes by path):
  - the JobSet Trainer makes from the TrainingRuntime (pkg/runtime/core/
    trainingruntime.go, pkg/runtime/framework/plugins/jobset): the runtime
    is `spec.runtimeRef.name` in the TrainJob's namespace (Trainer's webhook
    refuses a TrainJob without it, tests/kube_api.py); one replicated job,
    `node`, one Job of numNodes pods: the TrainJob's `spec.trainer.numNodes`,
    else the runtime's `mlPolicy.numNodes`. The `node` container is the
    runtime's pod template container `node` with the TrainJob's
    `spec.trainer` image, command, args and env over it (env by name).
  - pods as the Job controller makes them for an Indexed Job (kubernetes
    pkg/controller/job/indexed_job_utils.go): name `<job>-<index>-<5
    random>` where the Job is `placement.GenJobName(jobset, 'node', 0)`
    (jobset pkg/util/placement/placement.go), so the host name is
    `placement.GenPodName(jobset, 'node', '0', index)` with the JobSet's
    subdomain (its name: jobset_controller.go, network.enableDNSHostnames),
    `JOB_COMPLETION_INDEX` in the environment and the labels/annotation
    `batch.kubernetes.io/job-completion-index`; JobSet's labels
    (api/jobset/v1alpha2/jobset_types.go: jobset-name, replicatedjob-name,
    job-index, job-global-index, replicatedjob-replicas; pkg/constants:
    restart-attempt). Flattened here: the pods' ownerReferences name the
    TrainJob (controller, blockOwnerDeletion), standing for the chain
    TrainJob → JobSet → Job → Pod.
  - the kubelet: `valueFrom.fieldRef` resolved from the pod (metadata.name,
    namespace, labels['k'], annotations['k'], status.podIP); the container
    run with `scripts/container.sh run` on a podman bridge network made for
    the controller, a static address per pod and every pod's
    `<host>.<subdomain>` in each pod's hosts (the cluster's DNS), the
    test's volume mounts, images never pulled (no registry is reachable
    here), and nothing the pod spec does not declare (`pod_run_args`):
    its securityContext as the kubelet's runtime applies it (container
    over pod: pkg/kubelet/kuberuntime/security_context.go; runAsUser and
    runAsGroup as the user, readOnlyRootFilesystem as `--read-only`,
    allowPrivilegeEscalation: false as no-new-privileges, capabilities
    dropped and added, seccomp Unconfined, privileged) and its emptyDir
    volumes at their mounts (pkg/volume/emptydir/empty_dir.go: tmpfs for
    medium Memory; the node's disk otherwise, a tmpfs here too: the
    stand-in node has no disk of its own). runAsNonRoot is not verified
    against the image's user (the image's is 1000). Its
    output is the pod's log. Phases Pending → Running → Succeeded/Failed,
    `containerStatuses[0].state.terminated.exitCode`. A pod deleted (it
    has deletionTimestamp) is stopped with `podman stop -t
    <deletionGracePeriodSeconds>` (SIGTERM, then SIGKILL), then removed
    with grace 0.
  - the Job (backoffLimit, 6 when unset: batch/v1 defaults): a failed pod
    is replaced while the failures are within backoffLimit; past it the Job
    fails and its other pods are deleted (job_controller.go).
  - JobSet's failure policy (pkg/controllers/failure_policy.go,
    `restartJobSetActionApplier`; the default action RestartJobSet): a
    failed Job with `failurePolicy` and restarts < maxRestarts recreates all
    Jobs (all pods stopped and deleted, new ones made, restart-attempt + 1);
    at maxRestarts the JobSet fails with ReachedMaxRestarts, `jobset failed
    due to reaching max number of restarts (first failed job: <job>)`;
    without `failurePolicy`, FailedJobs, `jobset failed due to one or more
    job failures (first failed job: <job>)` (`executeFailurePolicy`,
    `messageWithFirstFailedJob`, pkg/constants/constants.go). All pods
    succeeded: Completed, AllJobsCompleted, `jobset completed successfully`.
  - Trainer copies them (plugins/jobset/jobset.go `Status`): the TrainJob's
    condition type Complete or Failed, with the JobSet's reason and message;
    `status.jobsStatus` from the JobSet's replicatedJobsStatus (name, ready,
    succeeded, failed, active, suspended).

The status server (Trainer's TrainJobStatus feature; kubeflow/trainer at
v2.3.0, pkg/statusserver/{server,auth,utils,setup,middleware}.go and
pkg/runtime/framework/plugins/trainjobstatus/trainjobstatus.go):
  - `StatusServer`: HTTPS with its own CA (kube_api.write_tls) on the
    controller network's gateway (`subnet[1]`, checked with `podman network
    inspect`; bound with IP_FREEBIND as the bridge gets it at the first
    container), that address only, a free port. `POST StatusUrl(ns, name)`
    (utils.go); anything else 404 `Not found`; a Content-Length over 64 KiB
    413 (middleware.go). Authorization as auth.go: exactly `Bearer <t>`,
    `t` the TrainJob's own token (the real one: a projected token with
    audience TokenAudience(ns, name) and the TrainJob's namespace), else 403
    `Forbidden` (no token included: the real server has no 401). The body
    decoded as Go's json.Decoder into UpdateTrainJobStatusRequest (unknown
    fields ignored, names matched ignoring case, wrong types, fractions in
    int32s, bad RFC 3339 times: 422 `Invalid payload`); no trainerStatus:
    200 and nothing written; else the CRD's checks of TrainerStatus
    (trainjob_types.go: progress 0-100, seconds >= 0, <= 256 metrics, names
    and values required, <= 64; lastUpdatedTime required) as 422 with the
    API server's message, then `status.trainerStatus` replaced as a whole
    (the server-side apply of field owner trainer-status), the rest of the
    status kept; 404 `Train job not found`.
  - Every pod (trainjobstatus.go EnforcePodSpec, createEnvVars): the
    variables KUBEFLOW_TRAINER_SERVER_URL (here `https://<gateway>:<port>`,
    not `https://<webhook service>.<ns>.svc:<port>`, + StatusUrl),
    _CA_CERT=/var/run/secrets/kubeflow/trainer/ca.crt and
    _TOKEN=/var/run/secrets/kubeflow/trainer/token, that folder mounted
    read-only (the real one: the projected volume kubeflow-trainer-token of
    the token, 3600 s, and the `<name>-tls-config` ConfigMap's ca.crt; here
    a host folder, the token never rotates, no ConfigMap in the store).

Not modelled: suspension, activeDeadlineSeconds, TTL, ClusterTrainingRuntime,
failure policy rules (only the default action), a pod's restartPolicy
OnFailure, resources and scheduling.
"""

import copy
import datetime
import http.server
import ipaddress
import json
import os
import random
import re
import secrets
import socket
import ssl
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import kube_api

ENGINE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), 'scripts', 'container.sh')
NODE = 'node'
NODE_NAME = 'stand-in-node'
# How the tests run a KFP step's pod (not a job's: those run as their
# spec says, `pod_run_args`): as OpenShift's restricted SCC runs it.
HARDENED = ('--user', '1000680000:0', '--read-only', '--tmpfs',
            '/tmp:rw,exec')
_INDEX = 'batch.kubernetes.io/job-completion-index'


def _engine(*args, timeout=120, check=True):
  return subprocess.run([ENGINE, *args], capture_output=True, text=True,
                        timeout=timeout, check=check)


class _Pod:
  """One pod's container: its process and log file."""

  def __init__(self, name, index, address, log_path):
    self.name, self.index, self.address = name, index, address
    self.log_path = log_path
    self.process: Optional[subprocess.Popen] = None
    self.container = f'kube-{name}'

  def log(self) -> str:
    try:
      with open(self.log_path, errors='replace') as f:
        return f.read()
    except FileNotFoundError:
      return ''


class Controller:
  """Runs the TrainJobs of `namespace` (module docstring), in a thread.

  Args:
    store: tests/kube_api.py's Store.
    namespace: The namespace watched.
    image: The image every pod runs (tests/containers.py IMAGE).
    folder: Where the pods' logs are written.
    mounts: `host:container[:options]` volumes for every pod.
    extra_run_args: More `podman run` arguments for every pod.
  """

  def __init__(self, store, namespace: str, image: str, folder: str,
               mounts: Sequence[str] = (), extra_run_args: Sequence[str] = ()):
    self.store, self.namespace, self.image = store, namespace, image
    self.folder, self.mounts = folder, list(mounts)
    os.makedirs(folder, exist_ok=True)
    self.extra_run_args = list(extra_run_args)
    self.network = f'kube-standin-{os.getpid()}-{random.randint(0, 9999)}'
    self.subnet = ipaddress.ip_network(
        f'10.{random.randint(90, 120)}.{random.randint(0, 255)}.0/24')
    self._jobs: Dict[str, Dict[str, Any]] = {}  # By TrainJob uid.
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, daemon=True)
    self._lock = threading.RLock()
    self.errors: List[BaseException] = []
    self.status_server: Optional[StatusServer] = None

  def start(self) -> 'Controller':
    _engine('network', 'create', '--subnet', str(self.subnet), self.network)
    gateway = _engine('network', 'inspect', self.network, '--format',
                      '{{range .Subnets}}{{.Gateway}}{{end}}').stdout.strip()
    if gateway != str(self.subnet[1]):
      raise RuntimeError(f'network {self.network}: gateway {gateway!r}, '
                         f'expected {self.subnet[1]}')
    self.status_server = StatusServer(
        self.store, os.path.join(self.folder, 'status-server'),
        gateway).start()
    self._thread.start()
    return self

  def stop(self) -> None:
    self._stop.set()
    self._thread.join(timeout=30)
    with self._lock:
      for job in self._jobs.values():
        for pod in job['pods'].values():
          _engine('rm', '-f', '-t', '0', pod.container, check=False)
    _engine('network', 'rm', '-f', self.network, check=False)
    if self.status_server is not None:
      self.status_server.stop()

  def __enter__(self) -> 'Controller':
    return self.start()

  def __exit__(self, *exc) -> None:
    self.stop()

  # Test hooks.

  def kill(self, pod_name: str) -> None:
    """SIGKILLs the pod's container (a node lost mid-training)."""
    _engine('kill', '-s', 'KILL', f'kube-{pod_name}')

  def printed(self, name: Optional[str] = None) -> str:
    """`kubectl get trainjob [name]` as kubectl prints it: NAME and the
    CRD's additionalPrinterColumns (State: `.status.conditions[-1:].type`,
    Age: `.metadata.creationTimestamp`)."""
    items = self.store.list('trainjobs', self.namespace)['items']
    rows = [('NAME', 'STATE', 'AGE')]
    for obj in items:
      if name and obj['metadata']['name'] != name:
        continue
      conditions = (obj.get('status') or {}).get('conditions') or []
      state = conditions[-1]['type'] if conditions else ''
      rows.append((obj['metadata']['name'], state,
                   _age(obj['metadata']['creationTimestamp'])))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return '\n'.join('   '.join(c.ljust(w) for c, w in zip(r, widths)
                                ).rstrip() for r in rows) + '\n'

  def wait(self, name: str, timeout_s: float = 300) -> Dict[str, Any]:
    """The TrainJob once it has a Complete or Failed condition."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
      if self.errors:
        raise self.errors[0]
      obj = self.store.get('trainjobs', self.namespace, name)
      if _finished(obj):
        return obj
      time.sleep(0.2)
    raise TimeoutError(f'TrainJob {name} did not finish in {timeout_s}s: '
                       f'{obj.get("status")}')

  # The loop.

  def _loop(self):
    while not self._stop.is_set():
      try:
        with self._lock:
          self._kubelet_deletions()
          for obj in self.store.list('trainjobs', self.namespace)['items']:
            self._reconcile(obj)
          self._forget_gone()
      except Exception as e:  # pylint: disable=broad-except
        self.errors.append(e)
      self._stop.wait(0.2)

  def _forget_gone(self):
    uids = {o['metadata']['uid'] for o in self.store.list(
        'trainjobs', self.namespace)['items']}
    for uid in list(self._jobs):
      if uid not in uids and not self._jobs[uid]['pods']:
        del self._jobs[uid]

  def _kubelet_deletions(self):
    """Pods with deletionTimestamp: stopped (SIGTERM, grace, SIGKILL), then
    removed with grace 0."""
    for job in self._jobs.values():
      for index, pod in list(job['pods'].items()):
        try:
          obj = self.store.get('pods', self.namespace, pod.name)
        except kube_api.StatusError:
          self._stop_container(pod, 0)
          del job['pods'][index]
          continue
        meta = obj['metadata']
        if 'deletionTimestamp' in meta:
          self._stopped(job, index, pod,
                        meta.get('deletionGracePeriodSeconds', 0))

  def _reconcile(self, tj):
    meta = tj['metadata']
    job = self._jobs.setdefault(meta['uid'], {
        'restarts': 0, 'pods': {}, 'failures': 0, 'done': False,
        'failed_job': False})
    if job['done'] or 'deletionTimestamp' in meta or _finished(tj):
      return
    name = meta['name']
    runtime = self.store.get('trainingruntimes', self.namespace,
                             tj['spec']['runtimeRef']['name'])
    rspec = runtime['spec']
    js_spec = rspec['template']['spec']
    (rjob,) = [r for r in js_spec['replicatedJobs'] if r['name'] == NODE]
    job_spec = rjob['template']['spec']
    num_nodes = (tj['spec'].get('trainer') or {}).get('numNodes') or (
        rspec.get('mlPolicy') or {}).get('numNodes') or 1
    if not job['pods'] and not job['failed_job']:
      for index in range(num_nodes):
        self._create_pod(tj, runtime, job, index, num_nodes)
    for pod in list(job['pods'].values()):
      self._sync_pod(job, pod)
    phases = {i: self._phase(p) for i, p in job['pods'].items()}
    failed = [i for i, phase in phases.items() if phase == 'Failed']
    job_name = f'{name}-{NODE}-0'  # placement.GenJobName.
    if failed and not job['failed_job']:
      job['failures'] += len(failed)
      if job['failures'] <= job_spec.get('backoffLimit', 6):
        for index in failed:  # The Job replaces the failed pod.
          self._delete_pod(job, index)
          self._create_pod(tj, runtime, job, index, num_nodes)
      else:
        job['failed_job'] = True  # The Job fails; its other pods go.
        for index in phases:
          if index not in failed:
            self._delete_pod(job, index)
        policy = js_spec.get('failurePolicy')
        if policy is not None and job['restarts'] < policy.get(
            'maxRestarts', 0):
          for index in list(job['pods']):  # RestartJobSet: all Jobs anew.
            self._delete_pod(job, index)
          job['restarts'] += 1
          job['failures'] = 0
          job['failed_job'] = False
        elif policy is not None:
          self._finish(tj, job, 'Failed', 'ReachedMaxRestarts',
                       'jobset failed due to reaching max number of restarts '
                       f'(first failed job: {job_name})')
          return
        else:
          self._finish(tj, job, 'Failed', 'FailedJobs',
                       'jobset failed due to one or more job failures '
                       f'(first failed job: {job_name})')
          return
    elif phases and len(phases) == num_nodes and all(
        p == 'Succeeded' for p in phases.values()):
      self._finish(tj, job, 'Complete', 'AllJobsCompleted',
                   'jobset completed successfully')
      return
    self._write_status(tj, job, None)

  def _phase(self, pod):
    try:
      return self.store.get('pods', self.namespace, pod.name).get(
          'status', {}).get('phase')
    except kube_api.StatusError:
      return None

  def _finish(self, tj, job, kind, reason, message):
    job['done'] = True
    self._write_status(tj, job, {
        'type': kind, 'status': 'True', 'reason': reason, 'message': message,
        'lastTransitionTime': kube_api.now_rfc3339()})

  def _write_status(self, tj, job, condition):
    status = copy.deepcopy(tj.get('status') or {})
    phases = [self._phase(p) for p in job['pods'].values()]
    jobs_status = [{
        'name': NODE, 'ready': 0, 'suspended': 0,
        'active': 0 if job['failed_job'] or job['done'] and
                  condition is not None else int(
                      any(p in ('Pending', 'Running') for p in phases)),
        'succeeded': int(bool(phases) and all(p == 'Succeeded'
                                              for p in phases)),
        'failed': int(job['failed_job'])}]
    jobs_status[0]['ready'] = jobs_status[0]['active'] and int(all(
        p == 'Running' for p in phases))
    new = dict(status, jobsStatus=jobs_status)
    if condition is not None:
      new['conditions'] = [c for c in status.get('conditions', [])
                           if c['type'] != condition['type']] + [condition]
    if new != status:
      # Onto the stored status, as a patch: the status server may have
      # written trainerStatus since `tj` was read.
      def merge(obj):
        obj['status'] = dict(obj.get('status') or {},
                             **{k: new[k] for k in ('jobsStatus', 'conditions')
                                if k in new})
      self.store.modify('trainjobs', self.namespace, tj['metadata']['name'],
                        merge)

  # Pods.

  def _create_pod(self, tj, runtime, job, index, num_nodes):
    name = tj['metadata']['name']
    host = f'{name}-{NODE}-0-{index}'  # placement.GenPodName.
    pod_name = f'{host}-{kube_api.random_suffix()}'
    address = str(self.subnet[10 + index])
    template = runtime['spec']['template']['spec']['replicatedJobs']
    (rjob,) = [r for r in template if r['name'] == NODE]
    pod_template = rjob['template']['spec']['template']
    spec = copy.deepcopy(pod_template.get('spec', {}))
    (container,) = [c for c in spec['containers'] if c['name'] == NODE]
    trainer = tj['spec'].get('trainer') or {}
    for field in ('image', 'command', 'args'):
      if field in trainer:
        container[field] = trainer[field]
    env = {e['name']: e for e in container.get('env', [])}
    env.update({e['name']: e for e in trainer.get('env', [])})
    if self.status_server is not None:  # trainjobstatus.go EnforcePodSpec.
      env.update({k: {'name': k, 'value': v} for k, v in
                  self.status_server.environ(self.namespace, name).items()})
    container['env'] = list(env.values())
    labels = dict((pod_template.get('metadata') or {}).get('labels') or {})
    labels.update({
        'jobset.sigs.k8s.io/jobset-name': name,
        'jobset.sigs.k8s.io/replicatedjob-name': NODE,
        'jobset.sigs.k8s.io/job-index': '0',
        'jobset.sigs.k8s.io/job-global-index': '0',
        'jobset.sigs.k8s.io/replicatedjob-replicas': '1',
        'jobset.sigs.k8s.io/restart-attempt': str(job['restarts']),
        'batch.kubernetes.io/job-name': f'{name}-{NODE}-0',
        'job-name': f'{name}-{NODE}-0',
        _INDEX: str(index)})
    annotations = dict((pod_template.get('metadata') or {}).get(
        'annotations') or {})
    annotations[_INDEX] = str(index)
    spec.update(hostname=host, subdomain=name, nodeName=NODE_NAME)
    spec.setdefault('terminationGracePeriodSeconds', 30)
    body = {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': pod_name, 'labels': labels,
                         'annotations': annotations,
                         'ownerReferences': [{
                             'apiVersion': tj['apiVersion'],
                             'kind': tj['kind'],
                             'name': name, 'uid': tj['metadata']['uid'],
                             'controller': True,
                             'blockOwnerDeletion': True}]},
            'spec': spec}
    obj = self.store.create('pods', self.namespace, body)
    pod = _Pod(pod_name, index, address,
               os.path.join(self.folder, f'{pod_name}.log'))
    job['pods'][index] = pod
    self.store.set_log(self.namespace, pod_name, pod.log)
    hosts = [f'{name}-{NODE}-0-{i}' for i in range(num_nodes)]
    self._run(obj, container, pod, name,
              {f'{h}.{name}': str(self.subnet[10 + i])
               for i, h in enumerate(hosts)}, index)

  def _run(self, obj, container, pod, subdomain, hosts, index):
    env = {'JOB_COMPLETION_INDEX': str(index)}
    for item in container.get('env', []):
      if 'value' in item:
        env[item['name']] = item['value']
      elif 'fieldRef' in item.get('valueFrom', {}):
        env[item['name']] = _field(obj, item['valueFrom']['fieldRef'][
            'fieldPath'], pod.address)
    args = ['run', '--rm=false', '--name', pod.container,
            '--network', self.network, '--ip', pod.address,
            '--hostname', obj['spec']['hostname'], '--pull', 'never',
            *pod_run_args(obj['spec'], container)]
    for host, address in hosts.items():
      args += ['--add-host', f'{host}:{address}']
    for mount in self.mounts:
      args += ['-v', mount]
    if self.status_server is not None:
      args += ['-v', f'{self.status_server.mount(self.namespace, subdomain)}'
               f':{STATUS_MOUNT}:ro']
    for key, value in env.items():
      args += ['-e', f'{key}={value}']
    if container.get('command'):
      args += ['--entrypoint', container['command'][0]]
    args += [*self.extra_run_args, container.get('image') or self.image]
    args += list(container.get('command', [])[1:]) + list(
        container.get('args', []))
    log = open(pod.log_path, 'wb')
    pod.process = subprocess.Popen([ENGINE, *args], stdout=log,
                                   stderr=subprocess.STDOUT)
    log.close()
    self.store.modify('pods', self.namespace, pod.name,
                      lambda p: p.__setitem__('status', {
                          'phase': 'Running', 'podIP': pod.address,
                          'startTime': kube_api.now_rfc3339(),
                          'containerStatuses': [{
                              'name': NODE, 'image': container.get('image'),
                              'imageID': '', 'ready': True,
                              'restartCount': 0, 'started': True,
                              'state': {'running': {
                                  'startedAt': kube_api.now_rfc3339()}}}]}))

  def _sync_pod(self, job, pod):
    """A finished container's exit code into the pod's status."""
    del job
    if pod.process is None or pod.process.poll() is None:
      return
    code = pod.process.returncode
    try:
      current = self.store.get('pods', self.namespace, pod.name)
    except kube_api.StatusError:
      return
    if current.get('status', {}).get('phase') in ('Succeeded', 'Failed'):
      return

    def finished(p):
      status = p['status']
      status['phase'] = 'Succeeded' if code == 0 else 'Failed'
      (state,) = status['containerStatuses']
      state['ready'] = False
      state['state'] = {'terminated': {
          'exitCode': code, 'reason': 'Completed' if code == 0 else 'Error',
          'startedAt': state['state'].get('running', {}).get('startedAt'),
          'finishedAt': kube_api.now_rfc3339()}}
    self.store.modify('pods', self.namespace, pod.name, finished)

  def _stop_container(self, pod, grace):
    if pod.process is not None and pod.process.poll() is None:
      _engine('stop', '-t', str(int(grace)), pod.container, check=False,
              timeout=int(grace) + 60)
      try:
        pod.process.wait(timeout=30)
      except subprocess.TimeoutExpired:
        pod.process.kill()

  def _delete_pod(self, job, index):
    """Deletes the pod through the store (graceful: the kubelet part
    stops it) and stops it now, as the kubelet would next."""
    pod = job['pods'][index]
    try:
      obj = self.store.delete('pods', self.namespace, pod.name)
      grace = obj['metadata'].get('deletionGracePeriodSeconds', 0)
    except kube_api.StatusError:
      grace = 0
    self._stopped(job, index, pod, grace)
    _engine('rm', '-f', '-t', '0', pod.container, check=False)

  def _stopped(self, job, index, pod, grace):
    """The kubelet's end of a deleted pod: its container stopped (SIGTERM,
    `grace` seconds, SIGKILL), its last status written, the pod removed
    with grace 0 and forgotten."""
    self._stop_container(pod, grace)
    self._sync_pod(job, pod)
    try:
      self.store.delete('pods', self.namespace, pod.name,
                        grace_period_seconds=0)
    except kube_api.StatusError:
      pass
    del job['pods'][index]


def pod_run_args(spec: Dict[str, Any], container: Dict[str, Any]
                 ) -> List[str]:
  """The `podman run` arguments of what the pod spec declares for
  `container` (module docstring, the kubelet): its security context and
  its emptyDir mounts; nothing else."""
  pod_sc = spec.get('securityContext') or {}
  sc = {**{k: v for k, v in pod_sc.items() if k in (
      'runAsUser', 'runAsGroup', 'seccompProfile')},
        **(container.get('securityContext') or {})}
  args = []
  if 'runAsUser' in sc:
    args += ['--user', f"{sc['runAsUser']}" + (
        f":{sc['runAsGroup']}" if 'runAsGroup' in sc else '')]
  elif 'runAsGroup' in sc:
    args += ['--group-add', str(sc['runAsGroup'])]
  if sc.get('readOnlyRootFilesystem'):
    # podman's own tmpfs on /run, /tmp and /var/tmp is not the pod's.
    args += ['--read-only', '--read-only-tmpfs=false']
  if sc.get('allowPrivilegeEscalation') is False:
    args += ['--security-opt', 'no-new-privileges']
  capabilities = sc.get('capabilities') or {}
  for cap in capabilities.get('drop') or []:
    args += ['--cap-drop', cap]
  for cap in capabilities.get('add') or []:
    args += ['--cap-add', cap]
  if (sc.get('seccompProfile') or {}).get('type') == 'Unconfined':
    args += ['--security-opt', 'seccomp=unconfined']
  if sc.get('privileged'):
    args.append('--privileged')
  empty = {v['name'] for v in spec.get('volumes') or [] if 'emptyDir' in v}
  for mount in container.get('volumeMounts') or []:
    if mount['name'] in empty:
      args += ['--tmpfs', f"{mount['mountPath']}:rw,exec,mode=1777"]
  return args


def _field(obj, path, address):
  """The kubelet's downward API (pkg/fieldpath/fieldpath.go)."""
  meta = obj['metadata']
  for prefix, values in (('metadata.labels', meta.get('labels') or {}),
                         ('metadata.annotations',
                          meta.get('annotations') or {})):
    if path.startswith(prefix + '['):
      return values.get(path[len(prefix) + 2:-2], '')
  return {'metadata.name': meta['name'],
          'metadata.namespace': meta['namespace'],
          'metadata.uid': meta['uid'], 'status.podIP': address,
          'spec.nodeName': NODE_NAME}[path]


def _finished(obj) -> bool:
  return any(c.get('type') in ('Complete', 'Failed') and c.get('status') ==
             'True' for c in (obj.get('status') or {}).get('conditions', []))


def _age(created: str) -> str:
  """kubectl's duration.HumanDuration, to hours."""
  import datetime  # pylint: disable=g-import-not-at-top
  then = datetime.datetime.strptime(created, '%Y-%m-%dT%H:%M:%SZ').replace(
      tzinfo=datetime.timezone.utc)
  seconds = int((datetime.datetime.now(datetime.timezone.utc) - then
                 ).total_seconds())
  if seconds < 120:
    return f'{seconds}s'
  minutes = seconds // 60
  if minutes < 10:
    return f'{minutes}m{seconds % 60}s' if seconds % 60 else f'{minutes}m'
  if minutes < 180:
    return f'{minutes}m'
  hours = minutes // 60
  return f'{hours}h{minutes % 60}m' if hours < 8 and minutes % 60 else \
      f'{hours}h'


# Trainer's status server (module docstring, "The status server").

STATUS_MOUNT = '/var/run/secrets/kubeflow/trainer'  # configMountPath.
STATUS_ENV = ('KUBEFLOW_TRAINER_SERVER_URL', 'KUBEFLOW_TRAINER_SERVER_CA_CERT',
              'KUBEFLOW_TRAINER_SERVER_TOKEN')
MAX_BODY = 1 << 16  # server.go maxBodySize.
_STATUS_PATH = re.compile(
    r'^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/(?P<ns>[^/]+)/'
    r'trainjobs/(?P<name>[^/]+)/status$')
_RFC3339 = re.compile(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?'
                      r'(Z|[+-]\d{2}:\d{2})$')
_INT32 = (-2**31, 2**31 - 1)


class _Refused(Exception):

  def __init__(self, code, reason, message):
    super().__init__(message)
    self.code, self.reason, self.message = code, reason, message


class _GoFloat(str):
  """A JSON number with a fraction or exponent (Go refuses it for int32)."""


def _go_field(pairs, name):
  """encoding/json's field match: the last key equal to `name` ignoring
  case; (found, value)."""
  found, value = False, None
  for key, item in pairs:
    if key.lower() == name.lower():
      found, value = True, item
  return found, value


def _go_int32(value):
  if value is None:
    return None
  if isinstance(value, bool) or not isinstance(value, int) or not (
      _INT32[0] <= value <= _INT32[1]):
    raise ValueError(value)
  return value


def _go_string(value):
  if value is None:
    return ''
  if not isinstance(value, str) or isinstance(value, _GoFloat):
    raise ValueError(value)
  return value


def _go_time(value):
  """metav1.Time.UnmarshalJSON: null is the zero time (None), else
  RFC 3339, kept in UTC to the second (metav1.Time.MarshalJSON)."""
  if value is None:
    return None
  if not isinstance(value, str) or isinstance(
      value, _GoFloat) or not _RFC3339.match(value):
    raise ValueError(value)
  moment = datetime.datetime.fromisoformat(  # Py3.10: no fraction.
      re.sub(r'\.\d+', '', value).replace('Z', '+00:00'))
  return moment.astimezone(datetime.timezone.utc).strftime(
      '%Y-%m-%dT%H:%M:%SZ')


def decode_status_request(body: bytes) -> Optional[Dict[str, Any]]:
  """`json.NewDecoder(r.Body).Decode(&UpdateTrainJobStatusRequest)`
  (server.go): the first JSON value; unknown fields ignored, names matched
  ignoring case; a wrong type, a fraction in an int32, NaN or a bad time is
  an error (ValueError). The trainerStatus (None when absent or null) with
  omitempty's fields left out."""
  text = body.decode('utf-8', 'replace').lstrip(' \t\r\n')

  def constant(name):
    raise ValueError(name)
  decoder = json.JSONDecoder(object_pairs_hook=list, parse_float=_GoFloat,
                             parse_constant=constant)
  top, _ = decoder.raw_decode(text)  # Trailing bytes: unread, as Go's.
  if top is None:
    return None
  if not isinstance(top, list) or (top and not isinstance(top[0], tuple)):
    raise ValueError('not an object')
  _, pairs = _go_field(top, 'trainerStatus')
  if pairs is None:
    return None
  if not isinstance(pairs, list) or (pairs and not isinstance(pairs[0],
                                                              tuple)):
    raise ValueError('trainerStatus')
  status: Dict[str, Any] = {}
  for field in ('progressPercentage', 'estimatedRemainingSeconds'):
    value = _go_int32(_go_field(pairs, field)[1])
    if value is not None:
      status[field] = value
  metrics = _go_field(pairs, 'metrics')[1]
  if metrics is not None:
    if not isinstance(metrics, list) or any(
        isinstance(m, tuple) for m in metrics):
      raise ValueError('metrics')
    status['metrics'] = []
    for item in metrics:
      if item is not None and not isinstance(item, list):
        raise ValueError('metric')
      metric = {}
      for field in ('name', 'value'):
        value = _go_string(_go_field(item or [], field)[1])
        if value:  # omitempty.
          metric[field] = value
      status['metrics'].append(metric)
    if not status['metrics']:
      del status['metrics']  # omitempty.
  moment = _go_time(_go_field(pairs, 'lastUpdatedTime')[1])
  if moment is not None:
    status['lastUpdatedTime'] = moment
  return status


def _status_causes(status: Dict[str, Any]) -> List[Any]:
  """The CRD's checks of status.trainerStatus (TrainerStatus, Metric in
  pkg/apis/trainer/v1alpha1/trainjob_types.go), as the API server words
  them; a null lastUpdatedTime is pruned before they run."""
  base = 'status.trainerStatus'
  causes = []
  for field, low, high in (('progressPercentage', 0, 100),
                           ('estimatedRemainingSeconds', 0, None)):
    value, path = status.get(field), f'{base}.{field}'
    if value is not None and value < low:
      causes.append(('FieldValueInvalid', path, f'Invalid value: {value}: '
                     f'{path} in body should be greater than or equal to '
                     f'{low}'))
    if value is not None and high is not None and value > high:
      causes.append(('FieldValueInvalid', path, f'Invalid value: {value}: '
                     f'{path} in body should be less than or equal to '
                     f'{high}'))
  metrics = status.get('metrics') or []
  if len(metrics) > 256:
    causes.append(('FieldValueTooMany', f'{base}.metrics',
                   f'Too many: {len(metrics)}: must have at most 256 items'))
  for i, metric in enumerate(metrics):
    for field in ('name', 'value'):
      path = f'{base}.metrics[{i}].{field}'
      if field not in metric:
        causes.append(('FieldValueRequired', path, 'Required value'))
      elif len(metric[field]) > 64:
        causes.append(('FieldValueTooLong', path,
                       f'Too long: may not be more than 64 bytes'))
  if 'lastUpdatedTime' not in status:
    causes.append(('FieldValueInvalid', base, f'Invalid value: "object": '
                   'lastUpdatedTime is required when trainerStatus is '
                   'present'))
  return causes


class StatusServer:
  """Trainer's runtime status server (module docstring), in a thread.

  Args:
    store: tests/kube_api.py's Store, where trainerStatus is written.
    folder: Where its TLS files and each TrainJob's mounted folder go.
    address: The one address it listens on (the network's gateway).

  Attributes:
    calls: Every request: (namespace, name, HTTP code).
    port.
  """

  def __init__(self, store, folder: str, address: str):
    self.store, self.folder, self.address = store, folder, address
    self.tls = kube_api.write_tls(os.path.join(folder, 'tls'), (address,))
    self._tokens: Dict[Tuple[str, str], str] = {}
    self._lock = threading.Lock()
    self.calls: List[Tuple[str, str, int]] = []
    self._server = None
    self.port = 0

  def start(self) -> 'StatusServer':
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(self.tls['tls.crt'], self.tls['tls.key'])
    server = http.server.ThreadingHTTPServer(
        (self.address, 0), _status_handler(self), bind_and_activate=False)
    # The bridge gets its gateway address when its first container starts:
    # bind before it exists (IP_FREEBIND).
    server.socket.setsockopt(socket.IPPROTO_IP, 15, 1)
    server.server_bind()
    server.server_activate()
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True,
                                        do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever,
                     kwargs={'poll_interval': 0.05}, daemon=True).start()
    self._server, self.port = server, server.server_address[1]
    return self

  def stop(self) -> None:
    if self._server is not None:
      self._server.shutdown()
      self._server.server_close()

  def url(self, namespace: str, name: str) -> str:
    """KUBEFLOW_TRAINER_SERVER_URL: `https://host:port` + StatusUrl."""
    return (f'https://{self.address}:{self.port}/apis/trainer.kubeflow.org/'
            f'v1alpha1/namespaces/{namespace}/trainjobs/{name}/status')

  def token(self, namespace: str, name: str) -> str:
    """The TrainJob's token (one per TrainJob, standing for a projected
    token with audience TokenAudience(namespace, name))."""
    with self._lock:
      return self._tokens.setdefault((namespace, name),
                                     secrets.token_urlsafe(32))

  def mount(self, namespace: str, name: str) -> str:
    """The TrainJob's folder to mount read-only at STATUS_MOUNT (`ca.crt`,
    `token`)."""
    path = os.path.join(self.folder, 'trainjobs', f'{namespace}.{name}')
    os.makedirs(path, exist_ok=True)
    for file_name, text in (('ca.crt', open(self.tls['ca.crt']).read()),
                            ('token', self.token(namespace, name))):
      with open(os.path.join(path, file_name), 'w') as f:
        f.write(text)
      os.chmod(os.path.join(path, file_name), 0o644)
    os.chmod(path, 0o755)
    return path

  def environ(self, namespace: str, name: str) -> Dict[str, str]:
    """The three variables, as trainjobstatus.go createEnvVars sets them."""
    return dict(zip(STATUS_ENV, (self.url(namespace, name),
                                 f'{STATUS_MOUNT}/ca.crt',
                                 f'{STATUS_MOUNT}/token')))

  def authorized(self, header: str, namespace: str, name: str) -> bool:
    """auth.go Authorize: exactly `Bearer <token>` (scheme in any case),
    the token of this TrainJob."""
    parts = (header or '').split()
    if len(parts) != 2 or parts[0].lower() != 'bearer':
      return False
    with self._lock:
      expected = self._tokens.get((namespace, name))
    return expected is not None and secrets.compare_digest(parts[1],
                                                           expected)

  def handle(self, method: str, path: str, headers, body_reader
             ) -> Tuple[int, Dict[str, Any]]:
    """One request: (code, JSON body)."""
    match = _STATUS_PATH.match(path.split('?', 1)[0])
    length = int(headers.get('Content-Length') or 0)
    if length > MAX_BODY:
      raise _Refused(413, 'RequestEntityTooLarge', 'Payload too large')
    if method != 'POST' or not match:
      raise _Refused(404, 'NotFound', 'Not found')
    namespace, name = match['ns'], match['name']
    if not self.authorized(headers.get('Authorization'), namespace, name):
      raise _Refused(403, 'Forbidden', 'Forbidden')
    try:
      status = decode_status_request(body_reader(length))
    except ValueError:
      raise _Refused(422, 'Invalid', 'Invalid payload') from None
    if status is None:
      return 200, {}
    causes = _status_causes(status)
    if causes:
      error = kube_api.invalid('trainer.kubeflow.org', 'TrainJob', name,
                               causes)
      raise _Refused(422, 'Invalid', error.status['message'])
    try:
      self.store.modify('trainjobs', namespace, name, lambda o: o.__setitem__(
          'status', dict(o.get('status') or {}, trainerStatus=status)))
    except kube_api.StatusError as e:
      if e.code == 404:
        raise _Refused(404, 'NotFound', 'Train job not found') from None
      raise _Refused(500, 'InternalError', 'Internal error') from None
    return 200, {'trainerStatus': status}


def _status_handler(server: StatusServer):

  class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):  # pylint: disable=arguments-differ
      pass

    def _serve(self):
      match = _STATUS_PATH.match(self.path.split('?', 1)[0])
      try:
        code, payload = server.handle(self.command, self.path, self.headers,
                                      self.rfile.read)
      except _Refused as e:
        code, payload = e.code, {'metadata': {}, 'status': 'Failure',
                                 'message': e.message, 'reason': e.reason,
                                 'code': e.code}
        self.close_connection = True
      server.calls.append((match['ns'] if match else '',
                           match['name'] if match else '', code))
      data = (json.dumps(payload) + '\n').encode()
      self.send_response(code)
      self.send_header('Content-Type', 'application/json')
      self.send_header('Content-Length', str(len(data)))
      self.end_headers()
      self.wfile.write(data)

    do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _serve

  return Handler
