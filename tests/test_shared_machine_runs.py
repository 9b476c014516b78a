"""Safe where other runs and other people are (issue 26), with real data,
processes and sockets: paths with glob characters, a full disk under the
cache, the workers' network and logs, the best checkpoint."""

import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from conftest import REPO, TESTDATA, command_env
from executor_thread import executing
from generic_trainer.keys import VERIFIED_FOLDERS_ENV
from generic_trainer.system import trust

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _rows(patterns):
  """Rows the data factory reads from `patterns`, as a TrainSpec does."""
  from generic_trainer.system import paths  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import input_pipeline  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  from tfx_bsl.tfxio.dataset_options import TensorFlowDatasetOptions  # pylint: disable=g-import-not-at-top
  schema = local_files.infer_schema(paths.expand(patterns))
  dataset = input_pipeline.DatasetFactory()(
      patterns, TensorFlowDatasetOptions(batch_size=1000, num_epochs=1),
      schema)
  return sum(int(next(iter(b.values())).shape[0]) for b in dataset)


def test_tfrecords_named_with_glob_characters_are_all_read(tmp_path,
                                                           penguin_csvs):
  """`part[0].gz` and `part1.gz` given together: both are read, each once,
  through the files a run carries and through the split's pattern."""
  from generic_trainer.system import paths  # pylint: disable=g-import-not-at-top
  from generic_trainer.data import local_files  # pylint: disable=g-import-not-at-top
  one, = local_files.to_split(penguin_csvs[0], str(tmp_path / 'csv'))
  shutil.copy(one, tmp_path / 'part[0].gz')
  shutil.copy(one, tmp_path / 'part1.gz')
  single = _rows([one])
  files = local_files.to_split([str(tmp_path / 'part[0].gz'),
                               str(tmp_path / 'part1.gz')],
                              str(tmp_path / 'out' / 'Split-train'))
  assert _rows([paths.as_pattern(f) for f in files]) == 2 * single
  assert _rows([paths.folder_pattern(
      str(tmp_path / 'out' / 'Split-train' / '*'))]) == 2 * single


def test_an_output_dir_with_glob_characters_is_refused(tmp_path,
                                                       penguin_csvs, capsys):
  """--output-dir 'exp[1]' beside exp1/ exits 2 saying why, before
  anything is read or written; exp1/ is untouched."""
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  beside = tmp_path / 'exp1' / 'data' / 'Split-train'
  beside.mkdir(parents=True)
  (beside / 'data.gz').write_bytes(b'not gzip at all')
  out = tmp_path / 'exp[1]'
  status = cli.main(['--module-file', SPEC_MODULE, '--train-data',
                     penguin_csvs[0], '--output-dir', str(out)])
  assert status == 2
  assert ("--output-dir holds the glob character(s) [: TensorFlow reads "
          "paths under it back as patterns (the SavedModel's variables, the "
          "data files), which would match other folders ('exp[1]' matches "
          "'exp1'). Expected a folder path without *, ? or [. Received: "
          f"--output-dir={str(out)!r}. Choose a name without them."
          ) in capsys.readouterr().err
  assert not out.exists()
  assert os.listdir(tmp_path / 'exp1' / 'data') == ['Split-train']


_FULL_DISK_RUN = '''
import sys
sys.path[:0] = [sys.argv[4], sys.argv[5]]
from spec_fixtures import PenguinSpec
from generic_trainer.notebook.estimator import Estimator

class DiskSpec(PenguinSpec):
  cache = 'disk'
  epochs = 2

result = Estimator(DiskSpec, sys.argv[1]).train(sys.argv[2],
                                                eval_data=sys.argv[3])
print('epochs', result['epochs'])
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which('unshare') is None, reason='no unshare')
def test_a_full_disk_while_caching_falls_back_to_reading_uncached(
    tmp_path, penguin_csvs):
  """TMPDIR on a 4 kB filesystem (a tmpfs mounted in a user namespace):
  the first epoch's cache write fails, training goes on uncached, logged.
  For an ordinary user, root's /tmp shows as the overflow uid's in that
  namespace: this process's verdict on the folders above the output
  folder is handed down, as the local workers' launcher hands it."""
  small = tmp_path / 'small'
  small.mkdir()
  script = tmp_path / 'run.py'
  script.write_text(_FULL_DISK_RUN)
  trust.check_ancestors(str(tmp_path / 'out'), 'model_dir')
  env = dict(command_env(), **{VERIFIED_FOLDERS_ENV: trust.verified_env()})
  command = (f'mount -t tmpfs -o size=4k tmpfs {small} && TMPDIR={small} '
             f'exec {sys.executable} {script} {tmp_path / "out"} '
             f'{penguin_csvs[0]} {penguin_csvs[1]} {REPO}/tests {REPO}')
  probe = subprocess.run(['unshare', '-Urm', 'true'], check=False)
  if probe.returncode:
    pytest.skip('no unprivileged user namespaces here')
  proc = subprocess.run(['unshare', '-Urm', 'sh', '-c', command],
                        capture_output=True, text=True, env=env,
                        timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'epochs 2' in proc.stdout
  assert ('cache: the disk filled while the first epoch wrote the parsed '
          'rows to') in proc.stderr
  assert 'No space left on device' in proc.stderr


def test_the_workers_network_is_reachable_by_the_group_only(monkeypatch):
  """A port a worker listens on in the group's network is not listening
  in this machine's network; another worker of the group reaches it."""
  from generic_trainer.launch import child_process  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  # Asked afresh: an earlier test's group may have found that this
  # process's children cannot make one (local_cluster falls back then).
  monkeypatch.setattr(private_network, '_available', None)
  why = private_network.available()
  if why:
    pytest.skip(f'no private network here: {why}')
  first = private_network.Entry()
  server = subprocess.Popen(first.command([sys.executable, '-c', (
      'import socket\n'
      's = socket.socket(socket.AF_INET6)\n'
      's.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)\n'
      's.bind(("::", 20000)); s.listen()\n'  # As TF's gRPC server binds.
      'print("listening", flush=True)\n'
      'c, _ = s.accept(); print(c.recv(5).decode(), flush=True)\n')]),
                            pass_fds=first.pass_fds, stdout=subprocess.PIPE,
                            text=True, env=child_process.child_env())
  namespaces = ()
  try:
    namespaces = first.entered(server)
    assert server.stdout.readline().strip() == 'listening'
    assert 20000 in private_network.listening_ports(server.pid)
    assert 20000 not in private_network.listening_ports()
    with pytest.raises(OSError):
      socket.create_connection(('127.0.0.1', 20000), timeout=2).close()
    joiner = private_network.Entry(namespaces)
    client = subprocess.Popen(joiner.command([sys.executable, '-c', (
        'import socket\n'
        'socket.create_connection(("localhost", 20000)).send(b"hello")')]),
                              pass_fds=joiner.pass_fds,
                              env=child_process.child_env())
    joiner.entered(client)
    assert client.wait(timeout=30) == 0
    assert server.stdout.readline().strip() == 'hello'
  finally:
    for fd in namespaces:
      os.close(fd)
    server.kill()
    server.wait()


def test_reserved_ports_cannot_be_taken_by_a_plain_bind():
  """Without a private network, a reserved port refuses another bind."""
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  reservation = private_network.PortReservation(2)
  try:
    for port in reservation.ports:
      other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      with pytest.raises(OSError):
        other.bind(('0.0.0.0', port))
      other.close()
  finally:
    reservation.release()


def test_a_closed_stderr_does_not_block_a_worker(tmp_path, monkeypatch):
  """The worker writes its log to a file; lines stderr cannot take are
  dropped, and the worker ends."""
  from generic_trainer.launch import worker_process  # pylint: disable=g-import-not-at-top
  read_end, write_end = os.pipe()
  os.close(read_end)  # `| head` has exited.
  broken = os.fdopen(write_end, 'w')
  monkeypatch.setattr(sys, 'stderr', broken)
  log = tmp_path / 'output.log'
  with open(log, 'wb') as f:
    process = subprocess.Popen(
        [sys.executable, '-c', 'for i in range(200000): print("x" * 80)'],
        stdout=f, stderr=subprocess.STDOUT)
  worker = worker_process.Worker(0, process, str(tmp_path / 'r.json'),
                                 str(log))
  assert process.wait(timeout=60) == 0
  worker.log_thread.join(timeout=60)
  assert not worker.log_thread.is_alive()
  assert worker.dropped > 0
  monkeypatch.undo()
  broken.close = lambda: None  # Its fd is broken; let the GC be quiet.


def test_an_interrupted_best_checkpoint_keeps_the_previous_best(tmp_path):
  """A save of best.weights.h5 that dies midway leaves the earlier best
  whole, and no temporary file."""
  import keras  # pylint: disable=g-import-not-at-top
  from generic_trainer.loop.handlers.checkpoint import checkpoint_handler  # pylint: disable=g-import-not-at-top
  model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
  handler = checkpoint_handler(str(tmp_path), None, best_only=True)
  handler.set_model(model)
  handler.on_epoch_end(0, {'val_loss': 1.0})
  best = tmp_path / 'best.weights.h5'
  saved = best.read_bytes()
  model.layers[0].kernel.assign(model.layers[0].kernel + 1.0)
  real_save = model.save_weights

  def dies_midway(path, **kwargs):
    real_save(path, **kwargs)
    with open(path, 'r+b') as f:
      f.truncate(100)
    raise KeyboardInterrupt

  model.save_weights = dies_midway
  with pytest.raises(KeyboardInterrupt):
    handler.on_epoch_end(1, {'val_loss': 0.5})
  assert best.read_bytes() == saved
  assert os.listdir(tmp_path) == ['best.weights.h5']
  model.save_weights = real_save
  handler.on_epoch_end(2, {'val_loss': 0.4})
  assert best.read_bytes() != saved
  model.load_weights(str(best))


@pytest.mark.slow
def test_two_local_workers_listen_in_their_own_network_only(trainer_io,
                                                            tmp_path):
  """During a two-worker training, each worker's TensorFlow port listens
  in the workers' network, and no worker port listens in this machine's."""
  import json  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
  from generic_trainer.launch import private_network  # pylint: disable=g-import-not-at-top
  if private_network.available():
    pytest.skip(f'no private network here: {private_network.available()}')
  record = tmp_path / 'record'
  io = trainer_io(train_steps=40, eval_steps=0, num_workers=2,
                  module_file=os.path.join(TESTDATA, 'slow_worker_spec.py'),
                  custom_config=json.dumps({'record_dir': str(record)}))
  execution, outcome = executing(io)
  ports = [local_cluster.PRIVATE_PORT, local_cluster.PRIVATE_PORT + 1]
  deadline = time.monotonic() + 240
  while not (record / 'worker-1.pid').exists():
    assert execution.is_alive() and time.monotonic() < deadline, outcome
    time.sleep(0.05)
  pid = int((record / 'worker-1.pid').read_text())
  inside = private_network.listening_ports(pid)
  outside = private_network.listening_ports()
  execution.join(timeout=300)
  assert 'error' not in outcome, outcome
  assert set(ports) <= set(inside), inside
  assert not set(ports) & set(outside), outside


def test_estimator_evaluate_and_predict_leave_nothing_behind(
    tmp_path, penguin_csvs, monkeypatch):
  """The rows evaluate() and predict() convert go to a private scratch
  folder, removed after: nothing in model_dir, nothing in TMPDIR."""
  from generic_trainer.notebook.estimator import Estimator  # pylint: disable=g-import-not-at-top
  from spec_fixtures import PenguinSpec  # pylint: disable=g-import-not-at-top
  tmp = tmp_path / 'tmp'
  tmp.mkdir()
  monkeypatch.setenv('TMPDIR', str(tmp))
  monkeypatch.setattr('tempfile.tempdir', None)
  est = Estimator(PenguinSpec, str(tmp_path / 'model_dir'))
  est.train(penguin_csvs[0], steps=4)
  before = sorted(os.listdir(tmp_path / 'model_dir'))
  assert 'loss' in est.evaluate(penguin_csvs[1])
  assert est.predict(penguin_csvs[1]).shape[0] > 0
  assert sorted(os.listdir(tmp_path / 'model_dir')) == before
  assert [n for n in os.listdir(tmp) if n.startswith('generic-trainer-')] == []


def test_a_private_csv_gives_private_outputs(tmp_path, penguin_csvs, capsys):
  """The command on a 0600 CSV: the split files are 0600 and the new
  output folder 0700."""
  import stat  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  private = tmp_path / 'private.csv'
  shutil.copy(penguin_csvs[0], private)
  private.chmod(0o600)
  out = tmp_path / 'out'
  status = cli.main(['--module-file', SPEC_MODULE, '--train-data',
                     str(private), '--output-dir', str(out), '--steps', '5'])
  assert status == 0, capsys.readouterr().err[-3000:]
  modes = {str(p.relative_to(out)): stat.S_IMODE(p.stat().st_mode)
           for p in (out / 'data').glob('Split-*/data.gz')}
  assert modes == {'data/Split-train/data.gz': 0o600,
                   'data/Split-eval/data.gz': 0o600}
  assert stat.S_IMODE(out.stat().st_mode) == 0o700
