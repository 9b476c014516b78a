"""TrainJobProgress: what a TrainJob's status server receives, and that
reporting never holds up nor ends a training.

A local HTTPS server stands for Kubeflow Trainer's status server
(pkg/statusserver/server.go): it serves the path `StatusUrl` gives, checks
the bearer token against the token file (read at each request, as the
controller checks the rotating projected token), and checks each body as
the controller would: `TrainerV1alpha1UpdateTrainJobStatusRequest` (the
Trainer's Python models) and the pinned TrainJob CRD's schema of
`status.trainerStatus` (MaxItems=256, names and values 1-64 characters,
progress 0-100, seconds >= 0). Errors are answered with a metav1.Status.
"""

import http.server
import json
import logging
import re
import socket
import ssl
import threading
import time
import types

import pytest
from kubeflow_trainer_api.models import (
    TrainerV1alpha1UpdateTrainJobStatusRequest)

import crd_schema
import kube_api
from message_parts import missing_parts
from generic_trainer import Estimator
from generic_trainer.launch import cluster_environment
from generic_trainer.loop.handlers import trainjob_progress
from generic_trainer.loop.handlers.trainjob_progress import TrainJobProgress
from spec_fixtures import PenguinSpec

NAMESPACE, NAME = 'team-a', 'penguin'
# pkg/statusserver/utils.go's StatusUrl(namespace, name).
PATH = (f'/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NAMESPACE}/'
        f'trainjobs/{NAME}/status')
RFC3339 = re.compile(
    r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$')
LOGGER = trainjob_progress.__name__


@pytest.fixture(scope='module')
def tls(tmp_path_factory):
  """A CA's certificate file, and a certificate it signed for 127.0.0.1
  with its key (the controller's webhook certificates)."""
  paths = kube_api.write_tls(str(tmp_path_factory.mktemp('tls')))
  return types.SimpleNamespace(ca=paths['ca.crt'], cert=paths['tls.crt'],
                               key=paths['tls.key'])


def problems(body):
  """What the controller would refuse in `body`, one line each."""
  try:
    TrainerV1alpha1UpdateTrainJobStatusRequest.from_dict(body)
  except Exception as e:  # pylint: disable=broad-except
    return [f'the model refuses it: {e}']
  found = [] if set(body) == {'trainerStatus'} else [f'keys: {sorted(body)}']
  status = body.get('trainerStatus') or {}
  if not RFC3339.match(str(status.get('lastUpdatedTime'))):
    found.append(f'lastUpdatedTime: {status.get("lastUpdatedTime")!r}')
  manifest = {'apiVersion': 'trainer.kubeflow.org/v1alpha1',
              'kind': 'TrainJob',
              'metadata': {'name': NAME, 'namespace': NAMESPACE},
              'spec': {'runtimeRef': {'name': 'generic-trainer'}},
              'status': {'trainerStatus': status}}
  return found + crd_schema.errors(manifest, crd_schema.TRAINJOB_CRD)


class StatusServer:
  """The controller's status server, on 127.0.0.1.

  Attributes:
    answer: 200 (check and accept), 403, 422, or 'hang' (answer after
      `hang_s`).
    updates: [(token, body)] of the accepted requests.
    refused: Lines saying what a check refused (path, token, body).
    environ: The three variables, pointing here.
  """

  def __init__(self, tls, token_file):
    self.answer = 200
    self.hang_s = 3.0
    self.updates, self.refused = [], []
    self.token_file = token_file
    self.received = threading.Event()
    outer = self

    class Handler(http.server.BaseHTTPRequestHandler):

      def log_message(self, *args):  # pylint: disable=arguments-differ
        pass

      def do_POST(self):  # pylint: disable=invalid-name
        body = self.rfile.read(int(self.headers['Content-Length']))
        outer.received.set()
        if isinstance(outer.answer, str) and outer.answer.startswith(
            'redirect '):
          self.send_response(302)
          self.send_header('Location', outer.answer.split(' ', 1)[1])
          self.send_header('Content-Length', '0')
          self.end_headers()
          return None
        if outer.answer == 'hang':
          time.sleep(outer.hang_s)
          return self._status(500, 'InternalError', 'hung')
        if outer.answer != 200:
          return self._status(outer.answer, 'Forbidden' if outer.answer ==
                              403 else 'Invalid', 'refused by the test')
        if self.path != PATH:
          outer.refused.append(f'path {self.path}')
          return self._status(404, 'NotFound', 'Not found')
        token = token_file.read_text().strip()
        if self.headers['Authorization'] != f'Bearer {token}':
          outer.refused.append(f'token {self.headers["Authorization"]!r}')
          return self._status(403, 'Forbidden', 'Forbidden')
        body = json.loads(body)
        found = problems(body)
        if found:
          outer.refused.extend(found)
          return self._status(422, 'Invalid', '; '.join(found))
        outer.updates.append((token, body))
        self._send(200, body)

      def _status(self, code, reason, message):
        self._send(code, {'kind': 'Status', 'apiVersion': 'v1',
                          'status': 'Failure', 'message': message,
                          'reason': reason, 'code': code})

      def _send(self, code, payload):
        data = json.dumps(payload).encode()
        try:
          self.send_response(code)
          self.send_header('Content-Type', 'application/json')
          self.send_header('Content-Length', str(len(data)))
          self.end_headers()
          self.wfile.write(data)
        except OSError:  # The client gave up waiting (the hanging server).
          pass

    self._server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    self._server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls.cert), str(tls.key))
    self._server.socket = context.wrap_socket(self._server.socket,
                                              server_side=True)
    port = self._server.server_address[1]
    self.environ = {
        trainjob_progress.URL_ENV: f'https://127.0.0.1:{port}{PATH}',
        trainjob_progress.CA_CERT_ENV: str(tls.ca),
        trainjob_progress.TOKEN_ENV: str(token_file)}
    self._thread = threading.Thread(target=self._server.serve_forever,
                                    kwargs={'poll_interval': 0.05},
                                    daemon=True)
    self._thread.start()

  def close(self):
    self._server.shutdown()
    self._server.server_close()

  def bodies(self):
    return [body['trainerStatus'] for _, body in self.updates]

  def wait_for(self, count, timeout=5.0):
    """Waits until `count` updates arrived."""
    deadline = time.monotonic() + timeout
    while len(self.updates) < count and time.monotonic() < deadline:
      time.sleep(0.01)
    assert len(self.updates) == count, (self.updates, self.refused)


@pytest.fixture(autouse=True)
def senders_end():
  """After each test, waits for the handlers' sending threads to end (a
  hung request's), so that none logs into the next test."""
  yield
  for thread in threading.enumerate():
    if thread.name == 'trainjob-progress':
      thread.join(10)
      assert not thread.is_alive()


@pytest.fixture
def server(tls, tmp_path):
  token_file = tmp_path / 'token'
  token_file.write_text('token-1\n')
  status_server = StatusServer(tls, token_file)
  yield status_server
  status_server.close()


class Clock:
  """A monotonic clock the test moves."""

  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def _handler(environ, clock=None, is_chief=True, epochs=2, steps=10,
             timeout_s=1.0):
  handler = TrainJobProgress(cluster_environment.status_endpoint(environ),
                             is_chief=is_chief,
                             clock=clock or Clock(), timeout_s=timeout_s)
  handler.set_params({'epochs': epochs, 'steps': steps, 'verbose': 0})
  handler.set_model(types.SimpleNamespace(stop_training=False))
  return handler


def _train(handler, clock, epochs=2, steps=10, on_step=None):
  """Drives `handler` as `fit` does, one fake second a step; `on_step(i)`
  after the i-th step (from 1)."""
  handler.on_train_begin()
  done = 0
  for epoch in range(epochs):
    handler.on_epoch_begin(epoch)
    for batch in range(steps):
      clock.now += 1.0
      done += 1
      handler.on_train_batch_end(batch, {'loss': 1.0 / done,
                                         'accuracy': done / 100})
      if on_step:
        on_step(done)
    handler.on_epoch_end(epoch, {'loss': 0.5, 'accuracy': 0.25,
                                 'val_loss': 0.75, 'val_accuracy': 0.125})
  handler.on_train_end({'loss': 0.5})


# The updates of `_train` with the default 5 s: {step: updates by then}.
_UPDATES_BY_STEP = {1: 1, 6: 2, 11: 3, 16: 4}


def _arrived(server, step):
  """After `step`, waits for the update it sent, if it sent one."""
  if step in _UPDATES_BY_STEP:
    server.wait_for(_UPDATES_BY_STEP[step])


def test_updates_are_well_formed_throttled_and_end_at_100(server):
  """20 steps of one fake second: an update at step 1, then every 5 s
  (steps 6, 11, 16) with the share done and the seconds left at the rate
  since step 1, then 100% at the end; every body passes the controller's
  checks."""
  clock = Clock()
  handler = _handler(server.environ, clock)
  _train(handler, clock, on_step=lambda i: _arrived(server, i))
  server.wait_for(5)
  assert server.refused == []
  bodies = server.bodies()
  assert [b.get('progressPercentage') for b in bodies] == [5, 30, 55, 80, 100]
  # No estimate at step 1; then one second a step: 14, 9, 4 steps left.
  assert [b.get('estimatedRemainingSeconds') for b in bodies] == [
      None, 14, 9, 4, 0]
  assert bodies[0]['metrics'] == [{'name': 'loss', 'value': '1'},
                                  {'name': 'accuracy', 'value': '0.01'}]
  assert bodies[-1]['metrics'] == [
      {'name': 'loss', 'value': '0.5'}, {'name': 'accuracy', 'value': '0.25'},
      {'name': 'val_loss', 'value': '0.75'},
      {'name': 'val_accuracy', 'value': '0.125'}]
  assert handler.sent == 5


def test_a_rotated_token_is_read_again(server):
  """The token file is read for every request: after it changes, the next
  update carries the new token, which the server checks."""
  clock = Clock()
  handler = _handler(server.environ, clock)

  def on_step(i):
    _arrived(server, i)
    if i == 1:
      server.token_file.write_text('token-2\n')

  _train(handler, clock, on_step=on_step)
  server.wait_for(5)
  assert [token for token, _ in server.updates] == ['token-1'] + ['token-2'] * 4
  assert server.refused == []


def test_a_worker_sends_nothing(server, caplog):
  """A worker that is not the chief has the variables too, and reports
  nothing, silently."""
  handler = _handler(server.environ, is_chief=False)
  assert not handler.reports
  with caplog.at_level(logging.DEBUG, logger=LOGGER):
    _train(handler, Clock())
  time.sleep(0.2)
  assert not server.received.is_set()
  assert caplog.records == []


def test_without_the_variables_nothing_happens(caplog):
  """Outside a TrainJob (or with the feature gate off) nothing is sent,
  logged or started."""
  threads = threading.active_count()
  handler = _handler({})
  assert not handler.reports
  with caplog.at_level(logging.DEBUG, logger=LOGGER):
    _train(handler, Clock())
  assert threading.active_count() == threads
  assert caplog.records == []


@pytest.mark.parametrize('missing', [trainjob_progress.CA_CERT_ENV,
                                     trainjob_progress.TOKEN_ENV])
def test_partly_set_variables_are_a_warning(server, caplog, missing):
  """Two of the three variables: one warning that names the missing one,
  and nothing sent."""
  environ = dict(server.environ)
  del environ[missing]
  with caplog.at_level(logging.WARNING, logger=LOGGER):
    handler = _handler(environ)
  assert not handler.reports
  _train(handler, Clock())
  assert not server.received.is_set()
  (record,) = caplog.records
  assert not missing_parts(record.getMessage()), record.getMessage()
  assert 'only partly set' in record.getMessage()
  assert f'{missing}=None' in record.getMessage()


def test_an_http_url_is_refused(server, caplog):
  """The token is not sent in clear: an http:// URL is a warning."""
  environ = dict(server.environ)
  environ[trainjob_progress.URL_ENV] = environ[
      trainjob_progress.URL_ENV].replace('https', 'http')
  with caplog.at_level(logging.WARNING, logger=LOGGER):
    assert not _handler(environ).reports
  (record,) = caplog.records
  assert not missing_parts(record.getMessage()), record.getMessage()
  assert 'is not an https URL' in record.getMessage()


def _pause_at_updates(step):
  """Gives the update of `step` time to fail before the next replaces
  it."""
  if step in _UPDATES_BY_STEP:
    time.sleep(0.2)


def _failures(caplog):
  """The warnings (each a full message) and the debug lines of failed
  updates."""
  warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
  for warning in warnings:
    assert not missing_parts(warning.getMessage()), warning.getMessage()
  debug = [r for r in caplog.records if r.levelno == logging.DEBUG and
           'not reported' in r.getMessage()]
  return warnings, debug


@pytest.mark.parametrize('answer,shown',
                         [(403, 'HTTP 403 refused by the test'),
                          (422, 'HTTP 422 refused by the test')])
def test_a_refusal_is_one_warning_and_training_goes_on(server, caplog, answer,
                                                       shown):
  """A server that refuses every update (403, 422): training ends
  normally, the first refusal is one warning naming the answer's message,
  the others debug lines."""
  server.answer = answer
  clock = Clock()
  handler = _handler(server.environ, clock)
  with caplog.at_level(logging.DEBUG, logger=LOGGER):
    _train(handler, clock, on_step=_pause_at_updates)
  warnings, debug = _failures(caplog)
  assert len(warnings) == 1, caplog.text
  assert shown in warnings[0].getMessage()
  assert 'training goes on' in warnings[0].getMessage()
  assert len(debug) >= 1
  assert handler.sent == 0


def test_the_token_is_never_sent_after_a_redirect(server, caplog):
  """A 302 to a plain http URL: not followed (urllib's default opener
  sends the token there again), one warning naming the redirect."""
  seen = []

  class Catcher(http.server.BaseHTTPRequestHandler):

    def log_message(self, *args):  # pylint: disable=arguments-differ
      pass

    def do_GET(self):  # pylint: disable=invalid-name
      seen.append(self.headers.get('Authorization'))
      self.send_response(200)
      self.send_header('Content-Length', '0')
      self.end_headers()

    do_POST = do_GET

  catcher = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Catcher)
  thread = threading.Thread(target=catcher.serve_forever,
                            kwargs={'poll_interval': 0.05}, daemon=True)
  thread.start()
  try:
    server.answer = ('redirect http://127.0.0.1:'
                     f'{catcher.server_address[1]}/stolen')
    clock = Clock()
    handler = _handler(server.environ, clock)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
      _train(handler, clock, on_step=_pause_at_updates)
  finally:
    catcher.shutdown()
    catcher.server_close()
  assert seen == []
  warnings, _ = _failures(caplog)
  assert len(warnings) == 1, caplog.text
  assert ("HTTP 302, a redirect to 'http://127.0.0.1:" in
          warnings[0].getMessage())
  assert 'not followed: the token is sent only to the URL the controller ' \
      'gave' in warnings[0].getMessage()
  assert handler.sent == 0


def test_a_server_that_is_down_is_one_warning(tls, tmp_path, caplog):
  """Nothing listens at the URL: one warning, and training goes on."""
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
  token = tmp_path / 'token'
  token.write_text('token')
  environ = {trainjob_progress.URL_ENV: f'https://127.0.0.1:{port}{PATH}',
             trainjob_progress.CA_CERT_ENV: str(tls.ca),
             trainjob_progress.TOKEN_ENV: str(token)}
  clock = Clock()
  handler = _handler(environ, clock)
  with caplog.at_level(logging.DEBUG, logger=LOGGER):
    _train(handler, clock, on_step=_pause_at_updates)
  warnings, debug = _failures(caplog)
  assert len(warnings) == 1, caplog.text
  assert 'Connection' in warnings[0].getMessage()
  assert len(debug) >= 1


def test_an_unknown_ca_is_one_warning(server, tmp_path, caplog):
  """A CA file that did not sign the server's certificate: a TLS error,
  one warning."""
  other = kube_api.write_tls(str(tmp_path / 'other'))['ca.crt']
  environ = dict(server.environ)
  environ[trainjob_progress.CA_CERT_ENV] = str(other)
  with caplog.at_level(logging.WARNING, logger=LOGGER):
    _train(_handler(environ), Clock())
  warnings, _ = _failures(caplog)
  assert len(warnings) == 1
  assert 'CERTIFICATE_VERIFY_FAILED' in warnings[0].getMessage()
  assert server.updates == []


def test_a_server_that_hangs_does_not_stall_a_step(server, caplog):
  """A server that does not answer: each step returns at once, the end
  waits at most the timeout, and one warning says so."""
  server.answer = 'hang'
  clock = Clock()
  handler = _handler(server.environ, clock, timeout_s=0.5)
  longest = []

  # Captured from the start: the sender's thread may give up on the hung
  # update (and warn) before the training ends.
  with caplog.at_level(logging.WARNING, logger=LOGGER):
    handler.on_train_begin()
    handler.on_epoch_begin(0)
    for batch in range(10):
      clock.now += 1.0
      started = time.monotonic()
      handler.on_train_batch_end(batch, {'loss': 1.0})
      longest.append(time.monotonic() - started)
      if batch == 0:
        assert server.received.wait(5)
    started = time.monotonic()
    handler.on_train_end()
  ended = time.monotonic() - started
  assert max(longest) < 0.1, longest
  assert ended < 1.0, ended
  warnings, _ = _failures(caplog)
  assert len(warnings) == 1, caplog.text


def test_a_stopped_training_ends_at_the_share_it_reached(server):
  """A handler stopped the training (early stopping, a preemption): the
  last update says how far it got, with no estimate, not 100%."""
  clock = Clock()
  handler = _handler(server.environ, clock)
  handler.on_train_begin()
  handler.on_epoch_begin(0)
  for batch in range(7):
    clock.now += 1.0
    handler.on_train_batch_end(batch, {'loss': 1.0})
    _arrived(server, batch + 1)
  handler.model.stop_training = True
  handler.on_train_end()
  server.wait_for(3)
  assert [(b.get('progressPercentage'), b.get('estimatedRemainingSeconds'))
          for b in server.bodies()] == [(5, None), (30, 14), (35, None)]


def test_unknown_steps_per_epoch_are_learnt_after_the_first_epoch(server):
  """Each epoch reads its data to the end (no steps per epoch): no share
  until the first epoch ended, then the share of epochs times its
  length."""
  clock = Clock()
  handler = _handler(server.environ, clock, epochs=4, steps=None)
  handler.on_train_begin()
  for epoch in range(2):
    handler.on_epoch_begin(epoch)
    for batch in range(5):
      clock.now += 1.0
      handler.on_train_batch_end(batch, {'loss': 1.0})
      if (epoch, batch) in ((0, 0), (1, 0)):
        server.wait_for(1 if epoch == 0 else 2)
    handler.on_epoch_end(epoch, {'loss': 1.0})
  handler.on_train_end()
  server.wait_for(3)
  # Step 1: unknown; step 6 (epoch 2's first) of 20: 30%, 14 s left.
  assert [(b.get('progressPercentage'), b.get('estimatedRemainingSeconds'))
          for b in server.bodies()] == [(None, None), (30, 14), (100, 0)]


def test_update_keeps_to_the_crds_limits():
  """300 metrics with long names and huge values (and two that are not
  numbers), a progress of 150 and a negative estimate: within the CRD's
  limits, which the pinned schema and the Trainer's model accept."""
  metrics = {'': 1.0, 'y' * 70 + '1': 2.0, 'y' * 70 + '2': 3.0,
             'vector': [1.0, 2.0], 'text': 'high'}
  metrics.update({f'{i:03d}' + 'm' * 70: 1e300 * i for i in range(300)})
  body = trainjob_progress.update(150, -5, metrics)
  status = body['trainerStatus']
  assert problems(body) == []
  assert status['progressPercentage'] == 100
  assert status['estimatedRemainingSeconds'] == 0
  assert len(status['metrics']) == trainjob_progress.MAX_METRICS == 256
  # No empty name; names cut to 64 characters, the first of two equal
  # cut names kept.
  assert status['metrics'][:3] == [{'name': 'y' * 64, 'value': '2'},
                                   {'name': '000' + 'm' * 61, 'value': '0'},
                                   {'name': '001' + 'm' * 61,
                                    'value': '1e+300'}]
  assert trainjob_progress.update(
      50, 2**40, {})['trainerStatus']['estimatedRemainingSeconds'] == 2**31 - 1


def test_a_training_through_the_loop_reports(server, tmp_path, penguin_csvs,
                                             monkeypatch, caplog):
  """A TrainSpec's training (one process: the chief) with the variables
  set reports at its first step and 100% at its end, with the loss."""
  for name, value in server.environ.items():
    monkeypatch.setenv(name, value)
  train_csv, eval_csv = penguin_csvs
  with caplog.at_level(logging.DEBUG, logger=LOGGER):
    Estimator(PenguinSpec, str(tmp_path)).train(train_csv,
                                                eval_data=eval_csv, steps=4)
  assert server.refused == []
  assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
      f'Reporting progress to the TrainJob status at '
      f'{server.environ[trainjob_progress.URL_ENV]}.']
  bodies = server.bodies()
  assert len(bodies) >= 2, bodies
  # Two steps an execution (`fit_loop`'s choice): the first update at 50%.
  assert 0 < bodies[0]['progressPercentage'] < 100
  assert bodies[-1]['progressPercentage'] == 100
  assert bodies[-1]['estimatedRemainingSeconds'] == 0
  names = [m['name'] for m in bodies[-1]['metrics']]
  assert 'loss' in names and 'val_loss' in names, names
