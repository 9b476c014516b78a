"""TrainJobProgress: the training's progress, in its TrainJob's status.

Kubeflow Trainer v2.2+ with the controller's `TrainJobStatus` feature gate
gives every trainer container of a TrainJob three variables (`URL_ENV`,
`CA_CERT_ENV`, `TOKEN_ENV`): an HTTPS endpoint of the controller, the CA
that signed its certificate, and a projected service-account token. A POST
of `{"trainerStatus": {...}}` there becomes `TrainJob.status.trainerStatus`,
which `kubectl get trainjob NAME -o jsonpath='{.status.trainerStatus}'`
shows (the guide kubeflow/trainer keeps at user-guides/trainjob-progress.md, option C,
"Raw HTTP"; the server is its pkg/statusserver/server.go).

On the chief alone (every pod gets the variables; one reports), this
handler sends the share of the planned steps done, the seconds left at the
rate measured since the first step, and the latest logs (loss, the compiled
metrics, and the `val_` ones after an epoch): at the first step, then at
most once every `EVERY_S` seconds, then once at the end, at 100% when the
training ran its plan, or at the share it reached when a handler stopped it
(early stopping, a preemption, a non-finite loss). The limits are the
CRD's (`TrainerStatus` in pkg/apis/trainer/v1alpha1/trainjob_types.go):
progress 0-100, seconds >= 0 (int32), at most `MAX_METRICS` metrics,
names and values of 1 to `MAX_TEXT` characters.

Reporting never holds up nor ends a training. A thread sends; a step only
hands it the latest update (one request at a time, each with a timeout of
`TIMEOUT_S`), and the end waits for the last one at most `TIMEOUT_S`. The
token is read again for every request, as it rotates (an hour's life), and
so is the CA file. The first failure (no server, a TLS error, a 403 or 422
answer, a timeout) is a warning that says what to check; later ones are
debug lines. Without the variables (not a TrainJob, or the feature gate
off) nothing happens.

The token goes to the URL the controller gave, and nowhere else: the
opener is built without urllib's `HTTPRedirectHandler` (which
`urllib.request.build_opener` always adds, and which would send the
`Authorization` header again to wherever a 3xx points, plain http
included), so a redirect is a failure that says where it pointed (issue
55). The controller's server never redirects.

We do not call the Kubeflow SDK's `kubeflow.trainer.update_trainjob_status`
(option B): it is not installed beside TFX, and it drops any call within 5 s
of the last one (so the final 100% of a short training), keeps the token for
5 minutes, sends from the step's thread and does not trim metric names and
values to the CRD's 64 characters. Its request is the one sent here.
"""

import datetime
import json
import logging
import math
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Mapping, Optional

import keras

from generic_trainer.keys import TRAINER_STATUS_ENV

# Set by the controller's TrainJobStatus plugin in every trainer container
# (`keys.TRAINER_STATUS_ENV`); `launch.cluster_environment` reads them into
# the plan's `StatusEndpoint`. Named here for messages.
ENV = TRAINER_STATUS_ENV
URL_ENV, CA_CERT_ENV, TOKEN_ENV = ENV
# The client-side rate limit the Trainer docs ask for, and the timeout of
# one request (the SDK's).
EVERY_S = 5.0
TIMEOUT_S = 5.0
# The seconds left are estimated once this many steps ran after the first
# (whose time is mostly tracing).
ETA_AFTER_STEPS = 3
# TrainerStatus's kubebuilder markers: metrics MaxItems=256; a metric's
# name and value MinLength=1, MaxLength=64; progressPercentage 0-100;
# estimatedRemainingSeconds an int32, Minimum=0.
MAX_METRICS = 256
MAX_TEXT = 64
MAX_SECONDS = 2**31 - 1

_log = logging.getLogger(__name__)


class TrainJobProgress(keras.callbacks.Callback):
  """Reports progress, seconds left and metrics into the TrainJob's status.

  Args:
    endpoint: Where to report (`plan.cluster.StatusEndpoint`: the
      values of `URL_ENV`, `CA_CERT_ENV` and `TOKEN_ENV`, any of them
      None), or None: nowhere.
    is_chief: Whether this process is the chief, the one that reports
      (from the cluster environment's role).
    every_s: The least seconds between two updates (the last one
      excepted).
    timeout_s: The most seconds one request, and the end's wait, take.
    clock: A monotonic clock, for the rate limit and the seconds left.

  Attributes:
    reports: Whether this handler sends anything: the chief, with the
      three variables set and an https URL.
    sent: Updates the server accepted.
  """

  def __init__(self, endpoint: Optional[Any] = None,
               is_chief: bool = True,
               every_s: float = EVERY_S, timeout_s: float = TIMEOUT_S,
               clock: Callable[[], float] = time.monotonic):
    super().__init__()
    self.url, self.ca_cert, self.token_file = (
        (endpoint.url, endpoint.ca_cert, endpoint.token_file) if endpoint
        else (None, None, None))
    self.every_s = every_s
    self.timeout_s = timeout_s
    self.clock = clock
    self.reports = is_chief and _usable(self.url, self.ca_cert,
                                        self.token_file)
    self.sent = 0
    self._sender = None
    self._reset()

  def _reset(self) -> None:
    self._epoch = 0
    self._batch = -1
    self._steps_per_epoch = None
    self._done = None
    self._first = None  # (epoch, batch, clock) at the first step.
    self._offered = -math.inf
    self._metrics = {}

  def on_train_begin(self, logs=None):
    self._reset()
    if not self.reports:
      return
    self._steps_per_epoch = (self.params or {}).get('steps')
    self._sender = _Sender(self)
    _log.info('Reporting progress to the TrainJob status at %s.', self.url)

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch

  def on_train_batch_end(self, batch, logs=None):
    if not self.reports:
      return
    # `batch` counts from the epoch's start, resumed batches included
    # (HandlerList); with steps_per_execution > 1 the hook skips batches.
    self._batch = batch
    self._done = self._steps_done(self._epoch, batch)
    now = self.clock()
    if self._first is None:
      self._first = (self._epoch, batch, now)
    self._keep(logs)
    if now - self._offered >= self.every_s:
      self._offered = now
      self._offer(self._progress(), self._eta(now))

  def on_epoch_end(self, epoch, logs=None):
    if not self.reports:
      return
    if self._steps_per_epoch is None and self._batch >= 0:
      # Each epoch reads the data to its end: its length, learnt now.
      self._steps_per_epoch = self._batch + 1
      self._done = self._steps_done(self._epoch, self._batch)
    self._keep(logs)

  def on_train_end(self, logs=None):
    if self._sender is None:
      return
    self._keep(logs)
    if getattr(self.model, 'stop_training', False):
      self._offer(self._progress(), None)
    else:
      self._offer(100, 0)
    self._sender.close(self.timeout_s)
    self._sender = None

  def _steps_done(self, epoch: int, batch: int) -> Optional[int]:
    """Steps done at the end of `batch` of `epoch`, when known."""
    if not self._steps_per_epoch:
      return None
    return epoch * self._steps_per_epoch + batch + 1

  def _total(self) -> Optional[int]:
    epochs = (self.params or {}).get('epochs')
    if not self._steps_per_epoch or not epochs:
      return None
    return epochs * self._steps_per_epoch

  def _progress(self) -> Optional[int]:
    total = self._total()
    if self._done is None or not total:
      return None
    return max(0, min(100, int(100 * self._done / total)))

  def _eta(self, now: float) -> Optional[int]:
    total = self._total()
    if self._done is None or self._first is None or not total:
      return None
    epoch, batch, then = self._first
    steps = self._done - self._steps_done(epoch, batch)
    elapsed = now - then
    if steps < ETA_AFTER_STEPS or elapsed <= 0:
      return None
    left = max(0, total - self._done) * elapsed / steps
    return min(MAX_SECONDS, int(round(left)))

  def _keep(self, logs) -> None:
    # Values are read when sent, not at every step.
    self._metrics.update(logs or {})

  def _offer(self, progress: Optional[int], eta: Optional[int]) -> None:
    try:
      self._sender.offer(update(progress, eta, self._metrics))
    except Exception as e:  # pylint: disable=broad-except
      self._sender.failed(f'the update could not be built ({e!r})')


def update(progress: Optional[int], eta: Optional[int],
           metrics: Mapping[str, Any],
           now: Optional[datetime.datetime] = None) -> Dict[str, Any]:
  """The body of one request (`UpdateTrainJobStatusRequest`), within the
  CRD's limits; None leaves a field out.

  Args:
    progress: Percent of the planned steps done, 0-100.
    eta: Seconds left.
    metrics: {name: value}, in the order to report; names are cut to
      `MAX_TEXT` characters (the first of two equal cut names is kept),
      values written with 6 significant digits (those that are not one
      number left out), the first `MAX_METRICS` kept.
    now: The time it describes (`lastUpdatedTime`); None: now.
  """
  found: List[Dict[str, str]] = []
  names = set()
  for name, value in metrics.items():
    name = str(name)[:MAX_TEXT]
    if not name or name in names or len(found) == MAX_METRICS:
      continue
    try:
      value = float(value)
    except (TypeError, ValueError):  # Not a scalar: not a metric here.
      continue
    names.add(name)
    found.append({'name': name, 'value': f'{value:.6g}'})
  now = now or datetime.datetime.now(datetime.timezone.utc)
  status = {'lastUpdatedTime': now.strftime('%Y-%m-%dT%H:%M:%SZ')}
  if progress is not None:
    status['progressPercentage'] = max(0, min(100, int(progress)))
  if eta is not None:
    status['estimatedRemainingSeconds'] = max(0, min(MAX_SECONDS, int(eta)))
  if found:
    status['metrics'] = found
  return {'trainerStatus': status}


def _usable(url: Optional[str], ca_cert: Optional[str],
            token_file: Optional[str]) -> bool:
  """Whether the variables say where to report; a warning when they are
  only partly set, or the URL is not https (the token would go in
  clear)."""
  if not (url or ca_cert or token_file):
    return False
  received = (f'Received: {URL_ENV}={url!r}, {CA_CERT_ENV}={ca_cert!r}, '
              f'{TOKEN_ENV}={token_file!r}.')
  if not (url and ca_cert and token_file):
    _log.warning(
        'TrainJob progress is not reported: the Kubeflow Trainer '
        'variables are only partly set. Expected all of %s, as the '
        'controller sets them with its TrainJobStatus feature gate on. %s '
        'Set all three, or none.', ', '.join(ENV), received)
    return False
  if not url.lower().startswith('https://'):
    _log.warning(
        'TrainJob progress is not reported: %s is not an https URL, and '
        'the request carries a bearer token. Expected https://..., as the '
        'controller sets it. %s Set an https URL.', URL_ENV, received)
    return False
  return True


class _Sender:
  """The thread that posts the updates a handler offers, the latest only,
  one request at a time."""

  def __init__(self, handler: TrainJobProgress):
    self._handler = handler
    self._pending = None
    self._closed = False
    self._warned = False
    self._warned_lock = threading.Lock()
    self._lock = threading.Condition()
    self._thread = threading.Thread(target=self._run, daemon=True,
                                    name='trainjob-progress')
    self._thread.start()

  def offer(self, body: Dict[str, Any]) -> None:
    """Sends `body` next, in place of one not sent yet."""
    with self._lock:
      self._pending = body
      self._lock.notify()

  def close(self, wait_s: float) -> None:
    """Sends what is pending and ends, waiting at most `wait_s` seconds."""
    with self._lock:
      self._closed = True
      self._lock.notify()
    self._thread.join(wait_s)
    if self._thread.is_alive():
      self.failed(f'no answer to the last update within {wait_s:g} s')

  def failed(self, why: str) -> None:
    """Logs a failure: a warning the first time, debug lines after."""
    with self._warned_lock:  # The thread's and the end's.
      warned, self._warned = self._warned, True
    if warned:
      _log.debug('TrainJob progress not reported: %s.', why)
      return
    handler = self._handler
    _log.warning(
        'TrainJob progress could not be reported to %s; training goes on, '
        'and later failures are logged at debug level. Expected the Kubeflow '
        'Trainer controller (v2.2+, TrainJobStatus feature gate on) to '
        'accept the update, with the CA in %s=%s and the token in %s=%s. '
        'Received: %s. Check the controller\'s logs and that the TrainJob '
        'exists, or unset the three variables to stop reporting.',
        handler.url, CA_CERT_ENV, handler.ca_cert, TOKEN_ENV,
        handler.token_file, why)

  def _run(self) -> None:
    while True:
      with self._lock:
        while self._pending is None and not self._closed:
          self._lock.wait()
        body, self._pending = self._pending, None
        if body is None:
          return
      self._post(body)

  def _post(self, body: Dict[str, Any]) -> None:
    handler = self._handler
    try:
      with open(handler.token_file, encoding='utf-8') as f:
        token = f.read().strip()
      context = ssl.create_default_context(cafile=handler.ca_cert)
      request = urllib.request.Request(
          handler.url, data=json.dumps(body).encode('utf-8'), method='POST',
          headers={'Authorization': f'Bearer {token}',
                   'Content-Type': 'application/json'})
      with _opener(context).open(request,
                                 timeout=handler.timeout_s) as response:
        response.read()
      handler.sent += 1
    except urllib.error.HTTPError as e:
      if 300 <= e.code < 400:
        self.failed(f'HTTP {e.code}, a redirect to '
                    f'{e.headers.get("Location")!r}, not followed: the '
                    'token is sent only to the URL the controller gave')
      else:
        self.failed(f'HTTP {e.code} {_status_message(e)}')
    except Exception as e:  # pylint: disable=broad-except
      self.failed(repr(e))  # OSError, ssl.SSLError, a timeout, bad token...


def _opener(context: ssl.SSLContext) -> urllib.request.OpenerDirector:
  """An opener that speaks HTTPS with `context`, through no proxy (the
  endpoint is a Service of the cluster), and follows no redirect: every
  answer that is not 2xx, a 3xx included, is an `HTTPError`. Built by hand,
  as `urllib.request.build_opener` always adds an `HTTPRedirectHandler`."""
  opener = urllib.request.OpenerDirector()
  for handler in (urllib.request.ProxyHandler({}),
                  urllib.request.HTTPSHandler(context=context),
                  urllib.request.HTTPDefaultErrorHandler(),
                  urllib.request.HTTPErrorProcessor()):
    opener.add_handler(handler)
  return opener


def _status_message(error: urllib.error.HTTPError) -> str:
  """The `message` of the metav1.Status the server answers with, or the
  HTTP reason."""
  try:
    return str(json.loads(error.read(4096))['message'])
  except Exception:  # pylint: disable=broad-except
    return str(error.reason)
