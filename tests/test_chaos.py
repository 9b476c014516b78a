"""Chaos: a local group of three workers, preempted, shrunk and back.

One execution of GenericExecutor with `num_workers='2:3'` trains a tiny
spec (tests/testdata/chaos_spec.py: 228 penguins with a `row_id`, global
batch 12, 2 epochs of 19 steps, a checkpoint every 2 steps) while this test
kills its workers. The training completes; the steps add up; every row is
trained exactly once per epoch, whatever the group's size when its step
ran; no process or scratch folder is left; the published model is never
half there, and an earlier one is never touched.

Each start of a group of TensorFlow processes costs 30-60 s on a shared
2-core machine, and every fault costs one, so `make test` runs the quick
schedule (`_Chaos.quick`: a drawn fault, SIGKILL mid-epoch, SIGTERM to one
worker or SIGKILL during a checkpoint write, while the capacity check
allows only 2 workers, so the group shrinks; room again, so it grows back
at its next checkpoint, the parent stopping it with SIGTERM at one saved
step; a SIGKILL at the grown group's start-up), and `make soak` the full
one (`_Chaos.full`, adding a second death right after a restart as the
reason to shrink, and a SIGKILL of the chief during the export).

The faults' kinds, workers and delays are drawn from a seed, printed;
`GENERIC_TRAINER_CHAOS_SEED=N` replays one.
"""

import glob
import json
import logging
import os
import random
import signal
import subprocess
import threading
import time

import pytest

pytestmark = pytest.mark.slow

SEED_ENV = 'GENERIC_TRAINER_CHAOS_SEED'
TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'testdata')
TRAIN_ROWS = 228
GLOBAL_BATCH = 12
EPOCHS = 2
STEPS = EPOCHS * TRAIN_ROWS // GLOBAL_BATCH  # 38


def _with_row_ids(examples, schema, root):
  """Copies of the penguin Examples (each row with an int64 `row_id`,
  train rows 0..227) and Schema under `root`."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow_metadata.proto.v0 import schema_pb2  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from tfx.utils import io_utils  # pylint: disable=g-import-not-at-top
  copy = standard_artifacts.Examples()
  copy.uri = os.path.join(root, 'examples')
  copy.split_names = examples.split_names
  next_id = 0
  for split in ('train', 'eval'):
    source = glob.glob(os.path.join(examples.uri, f'Split-{split}', '*'))
    target = os.path.join(copy.uri, f'Split-{split}', 'data.gz')
    os.makedirs(os.path.dirname(target))
    with tf.io.TFRecordWriter(target, options='GZIP') as writer:
      for record in tf.data.TFRecordDataset(source, 'GZIP'):
        example = tf.train.Example.FromString(record.numpy())
        example.features.feature['row_id'].int64_list.value.append(next_id)
        next_id += 1
        writer.write(example.SerializeToString())
  ids_schema = standard_artifacts.Schema()
  ids_schema.uri = os.path.join(root, 'schema')
  proto = io_utils.parse_pbtxt_file(
      os.path.join(schema.uri, 'schema.pbtxt'), schema_pb2.Schema())
  feature = proto.feature.add(name='row_id', type=schema_pb2.INT)
  feature.presence.min_fraction = 1.0
  feature.shape.dim.add(size=1)
  io_utils.write_pbtxt_file(os.path.join(ids_schema.uri, 'schema.pbtxt'),
                            proto)
  return copy, ids_schema


def _workers(scratch):
  """Pids of the worker processes (their command lines name `scratch`)."""
  found = subprocess.run(['pgrep', '-f', str(scratch)], capture_output=True,
                         text=True, check=False).stdout.split()
  return [int(p) for p in found]


def _records(record):
  """{step: [(n, worker, time, ids)]} of every step recorded."""
  steps = {}
  for path in glob.glob(os.path.join(record, 'ids', '*.json')):
    with open(path) as f:
      value = json.load(f)
    step = int(os.path.basename(path).split('-')[0][1:])
    steps.setdefault(step, []).append(value)
  return steps


def _trained(records):
  """{step: [ids of each worker]} of the steps as the training kept them:
  for each step, the group that trained it last (its size, from the newest
  record), each of its workers' record (a group that trained it before
  wrote the same files, or, bigger, more)."""
  kept = {}
  for step, values in records.items():
    newest = max(values, key=lambda v: v['t'])
    by_worker = {v['w']: v for v in values}
    kept[step] = [by_worker[w]['ids'] for w in range(newest['n'])]
    assert all(by_worker[w]['n'] == newest['n'] for w in range(newest['n']))
  return kept


class _Chaos:
  """Watches the execution and injects the faults, from a seeded draw."""

  def __init__(self, rng, scratch, record, model_uri, earlier, log):
    self.rng = rng
    self.log = log  # The parent's log so far.
    self.scratch = scratch
    self.record = record
    self.model_uri = model_uri
    self.earlier = earlier
    self.done = threading.Event()
    self.injected = []
    self.problems = []
    self.capacity = {'now': None}  # None: the machine's.

  def _check(self):
    """Never a half-published model; the earlier one always there."""
    serving = os.path.join(self.model_uri, 'Format-Serving')
    if os.path.exists(serving) and not os.path.exists(
        os.path.join(serving, 'saved_model.pb')):
      self.problems.append('a half-published model')
    if not os.path.exists(os.path.join(self.earlier, 'saved_model.pb')):
      self.problems.append('the earlier model is missing')

  def _until(self, predicate, timeout=240):
    deadline = time.monotonic() + timeout
    while not self.done.is_set() and time.monotonic() < deadline:
      self._check()
      value = predicate()
      if value:
        return value
      time.sleep(0.05)
    return None

  def _step(self):
    """The last step recorded (from the files' names: s{STEP}-w{WORKER})."""
    names = os.listdir(os.path.join(self.record, 'ids')) if os.path.isdir(
        os.path.join(self.record, 'ids')) else []
    return max((int(n.split('-')[0][1:]) for n in names
                if n.endswith('.json')), default=-1)

  def _pid(self, worker):
    try:
      with open(os.path.join(self.record, 'pids', f'w{worker}')) as f:
        return int(f.read())
    except (OSError, ValueError):
      return None

  def _signal(self, what, pid, sig):
    if pid is None:
      self.problems.append(f'no pid for {what}')
      return
    try:
      os.kill(pid, sig)
      self.injected.append(what)
    except ProcessLookupError:
      self.problems.append(f'{what}: the process had ended')

  def _fresh_group(self, old):
    """The pids of a group started after the `old` ones (3 processes)."""

    def fresh():
      new = [p for p in _workers(self.scratch) if p not in old]
      return new if len(new) >= 3 else None

    return self._until(fresh)

  def _drawn_fault(self):
    """SIGKILL mid-epoch, SIGTERM to one worker mid-epoch, or SIGKILL
    during a checkpoint write, to a drawn worker."""
    rng = self.rng
    worker = rng.randrange(3)
    kind = rng.randrange(3)
    if kind == 0:
      self._signal(f'SIGKILL worker {worker} mid-epoch', self._pid(worker),
                   signal.SIGKILL)
    elif kind == 1:
      self._signal(f'SIGTERM worker {worker} mid-epoch', self._pid(worker),
                   signal.SIGTERM)
    else:
      saving = os.path.join(self.record, 'saving')
      before = os.path.getmtime(saving) if os.path.exists(saving) else 0
      self._until(lambda: os.path.exists(saving) and
                  os.path.getmtime(saving) > before)
      self._signal(f'SIGKILL worker {worker} during a checkpoint write',
                   self._pid(worker), signal.SIGKILL)

  def _start_up_kill(self, old):
    """SIGKILL a worker of the first group started after the `old` pids
    while it starts."""
    fresh = self._fresh_group(old)
    time.sleep(self.rng.uniform(0.0, 2.0))
    self._signal('SIGKILL a worker at start-up',
                 self.rng.choice(fresh or [None]), signal.SIGKILL)

  def quick(self):
    """`make test`'s schedule: a drawn fault while the capacity check
    allows only 2 workers (the group shrinks), room again (it grows back
    at its next checkpoint), a SIGKILL at the grown group's start-up."""
    at = self.rng.randint(3, 8)
    self._until(lambda: self._step() >= at)
    self.capacity['now'] = 2
    self._drawn_fault()
    self._until(lambda: 'shrinks from 3 to 2' in self.log())
    self._until(lambda: any(v['n'] == 2 for values in _records(
        self.record).values() for v in values))
    old = set(_workers(self.scratch))  # The group of 2, training.
    self.capacity['now'] = None
    self._until(lambda: 'grows from 2 to 3' in self.log())
    self._start_up_kill(old)
    self._until(lambda: False, timeout=3600)  # Keep checking to the end.

  def full(self):
    """`make soak`'s: SIGKILL mid-epoch; SIGKILL at the restarted group's
    start-up (a second death so soon: it shrinks); the regrow; a drawn
    fault; SIGKILL of the chief during the export."""
    at = self.rng.randint(3, 8)
    self._until(lambda: self._step() >= at)
    worker = self.rng.randrange(3)
    old = set(_workers(self.scratch))
    self._signal(f'SIGKILL worker {worker} mid-epoch', self._pid(worker),
                 signal.SIGKILL)
    self._start_up_kill(old)
    self._until(lambda: 'grows from 2 to 3' in self.log())
    start = self._step()
    self._until(lambda: self._step() >= start + self.rng.randint(3, 6))
    self._drawn_fault()
    staging = os.path.join(self.model_uri, '.staging', 'Format-Serving')
    self._until(lambda: os.path.exists(staging))
    self._signal('SIGKILL the chief during the export', self._pid(0),
                 signal.SIGKILL)
    self._until(lambda: False, timeout=3600)



@pytest.mark.parametrize('schedule', [
    'quick', pytest.param('full', marks=pytest.mark.soak)])
def test_a_group_of_three_under_kills_shrinks_regrows_and_trains_each_row_once(
    penguin_artifacts, tmp_path, monkeypatch, caplog, schedule):
  """Random SIGKILLs and SIGTERMs (mid-epoch, at start-up, during a
  checkpoint write, during the export), a forced shrink and a regrow: the
  training completes with exact steps and each row once per epoch."""
  import tempfile  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import restarts  # pylint: disable=g-import-not-at-top
  seed = int(os.environ.get(SEED_ENV) or random.randrange(1 << 31))
  print(f'chaos seed {seed}; replay with {SEED_ENV}={seed}')
  rng = random.Random(seed)
  scratch = tmp_path / 'tmp'
  scratch.mkdir()
  monkeypatch.setenv('TMPDIR', str(scratch))
  monkeypatch.setattr(tempfile, 'tempdir', str(scratch))
  # Grow at the first checkpoint after a shrink. Quick: the capacity check
  # forces the shrink, and a death after a restart is no reason to; full:
  # any death after a restart is one that cannot come back.
  monkeypatch.setattr(restarts, 'GROW_AFTER_S', 0.0)
  monkeypatch.setattr(restarts, 'REDEATH_WINDOW_S',
                      0.0 if schedule == 'quick' else 3600.0)
  caplog.set_level(logging.INFO, logger='absl')
  examples, schema = _with_row_ids(*penguin_artifacts, str(tmp_path / 'in'))
  earlier = str(tmp_path / 'earlier' / 'Format-Serving')
  tf.saved_model.save(tf.Module(), earlier)
  record = str(tmp_path / 'record')
  model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
  model.uri, model_run.uri = str(tmp_path / 'model'), str(tmp_path / 'run')
  io = ({'examples': [examples], 'schema': [schema]},
        {'model': [model], 'model_run': [model_run]},
        {'train_args': json.dumps({'num_steps': STEPS}),
         'eval_args': '{"num_steps": 1}',
         'custom_config': json.dumps({'record_dir': record}),
         'module_file': os.path.join(TESTDATA, 'chaos_spec.py'),
         'num_workers': '2:3', 'max_restarts': 6})
  chaos = _Chaos(rng, scratch, record, model.uri, earlier,
                 lambda: caplog.text)
  machine_capacity = local_cluster._capacity_now  # pylint: disable=protected-access
  monkeypatch.setattr(local_cluster, '_capacity_now', lambda running=0: (
      chaos.capacity['now'] or machine_capacity(running)))
  injector = threading.Thread(target=getattr(chaos, schedule), daemon=True)
  started = time.monotonic()
  injector.start()
  try:
    GenericExecutor().Do(*io)
  finally:
    chaos.done.set()
    injector.join(timeout=10)
  seconds = time.monotonic() - started
  print(f'chaos seed {seed}: {schedule} {seconds:.0f} s; faults: '
        f'{chaos.injected}')
  assert not chaos.problems, chaos.problems
  faults = {'quick': 2, 'full': 4}[schedule]
  assert len(chaos.injected) == faults, chaos.injected

  # The steps add up, and each row is trained once per epoch.
  trained = _trained(_records(record))
  assert sorted(trained) == list(range(STEPS))
  steps_per_epoch = STEPS // EPOCHS
  for epoch in range(EPOCHS):
    rows = [i for step in range(epoch * steps_per_epoch,
                                (epoch + 1) * steps_per_epoch)
            for ids in trained[step] for i in ids]
    assert sorted(rows) == list(range(TRAIN_ROWS)), f'epoch {epoch}'
  assert model.get_int_custom_property('train_steps') == STEPS

  # The group shrank to 2, grew back to 3, and said why.
  with open(os.path.join(model_run.uri, 'workers.json')) as f:
    summary = json.load(f)
  sizes = [(c['from'], c['to']) for c in summary['size_changes']]
  assert sizes[:2] == [(3, 2), (2, 3)], summary
  assert {'quick': 'the capacity check allows 2 worker(s)',
          'full': 'cannot be brought back'}[schedule] in (
              summary['size_changes'][0]['why'])
  assert len(summary['restarts']) == faults, summary
  assert all(2 <= len(trained[s]) <= 3 for s in trained)
  assert {len(trained[s]) for s in trained} == {2, 3}
  assert 'The local worker group shrinks from 3 to 2 workers' in caplog.text

  # Published once, whole; nothing left behind.
  assert os.listdir(model.uri) == ['Format-Serving']
  assert os.path.exists(os.path.join(earlier, 'saved_model.pb'))
  assert not _workers(scratch)
  assert [n for n in os.listdir(scratch) if n.startswith(
      ('generic_trainer_', 'generic-trainer-'))] == []
  assert not glob.glob(os.path.join(model_run.uri, 'resume-*'))
