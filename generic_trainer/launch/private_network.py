"""A network only the local workers of one training can reach.

TensorFlow's gRPC server listens on every interface whatever TF_CONFIG says
(TF 2.16 `grpc_server_lib.cc` binds `0.0.0.0:<port>`; no setting changes
it), and it has no authentication (TensorFlow's SECURITY.md: trusted
networks only): anyone who reaches a worker's port can run ops as the
trainer. So the workers of a local group run in a network namespace of
their own, which has only a loopback interface: the first worker creates it
(with a user namespace, so no privilege is needed: `unshare -Urn`), the
others join it. Their ports exist there only: no other process of this
machine, nor of the network, can connect to them, and no one can take a
port between its choice and its bind.

Where the kernel refuses unprivileged user namespaces (some containers'
seccomp profiles; `kernel.unprivileged_userns_clone=0`), `available` says
why and the group falls back to ports of this machine's network, reserved
until the workers bind them (`PortReservation`); where starting one group's
worker in the namespace fails, that group alone falls back
(`local_cluster`).

The namespace has no way out: no interface but loopback, no route. An
outbound-only path would need a user-mode network stack (slirp4netns,
pasta) or NAT rules, which this package cannot count on. So a training
that needs the network is refused before the start (`check_outside_paths`:
artifacts or checkpoints on an object store, paths with '://'), saying
what to do; `keys.WORKER_NETWORK_ENV`=host runs the workers on this
machine's network instead (`why_public`), reachable from it.

A worker enters the network itself, first thing, before it becomes the
training process: `Entry` starts `python -m
generic_trainer.launch.network_entry`, which calls `create` or `join` while
its process has one thread (the kernel refuses a threaded process a new
user namespace: EINVAL), reports on a Unix socket, then execs the worker's
program. Nothing runs between fork and exec: a preexec_fn would make Python
fork with the process's fork handlers, and where gRPC is busy in the
starting process (Beam's runner after a Transform) its handlers start a
poller thread in the forked copy, so the unshare there failed with EINVAL
or gRPC aborted the copy (`tests/test_child_process_start.py`). The
first worker sends descriptors of the namespaces it made with its report
(SCM_RIGHTS); the others join through those, never through a pid, so a
first worker that has already ended (or a pid used again) changes
nothing.
"""

import fcntl
import os
import socket
import struct
import subprocess
import sys
import time
from typing import List, Optional, Sequence, Tuple

from generic_trainer import errors
from generic_trainer.keys import WORKER_NETWORK_ENV, WORKER_NETWORKS
from generic_trainer.launch import child_process
from generic_trainer.system.lazy import ctypes

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_PROBE = ('from generic_trainer.launch import private_network as p\n'
          'p.create()\n'
          'print(p.loopback_only())')
ENTRY_MODULE = 'generic_trainer.launch.network_entry'
ENTERED = 'entered'  # What `network_entry` reports once it is in.
ENTRY_WAIT_S = 60.0  # A fresh Python reaches it in well under a second.

_available: Optional[str] = None  # '' when available, else why not.


def available() -> str:
  """'' when this machine lets this user make a private network, else the
  reason it does not (asked once, of a short child process)."""
  global _available
  if _available is None:
    try:
      probe = subprocess.run([sys.executable, '-c', _PROBE],
                             capture_output=True, text=True, timeout=60,
                             env=child_process.child_env(), check=False)
      _available = ('' if probe.stdout.strip() == 'True' else
                    (probe.stderr.strip().splitlines() or ['no reason'])[-1])
    except (OSError, subprocess.SubprocessError) as e:
      _available = f'{type(e).__name__}: {e}'
  return _available


def asked() -> str:
  """The network `keys.WORKER_NETWORK_ENV` asks for: 'private' or 'host'.

  Raises:
    InvalidArgumentError: it names neither.
  """
  given = os.environ.get(WORKER_NETWORK_ENV, '').strip() or 'private'
  if given not in WORKER_NETWORKS:
    raise errors.InvalidArgumentError(
        f'{WORKER_NETWORK_ENV} names the network local workers use. '
        f'Expected one of {list(WORKER_NETWORKS)}. Received: '
        f'{WORKER_NETWORK_ENV}={given!r}. Leave it unset (a private '
        "network), or set 'host' for workers that need the network. "
        'Nothing was started.')
  return given


def why_public() -> str:
  """'' when a group runs in a private network; else why it runs on
  ports of this machine's network (`asked` host, or not `available`)."""
  if asked() == 'host':
    return f'{WORKER_NETWORK_ENV}=host asks for this machine\'s network'
  why = available()
  return f'this machine refuses a private network ({why})' if why else ''


def check_outside_paths(outside: List[str], count: int) -> None:
  """Refuses `count` > 1 local workers in a private network (which has
  no way out) for a training whose `outside` paths (with '://') are on
  another machine.

  Raises:
    InvalidArgumentError: that training, before anything starts.
  """
  if count <= 1 or not outside or why_public():
    return
  shown = ', '.join(outside[:3]) + (', ...' if len(outside) > 3 else '')
  raise errors.InvalidArgumentError(
      f'num_workers={count} runs the workers on this machine in a network of '
      'their own, with no way out (no port of theirs reachable, and none of '
      'the network reachable from them), but this training reads or writes '
      f'{len(outside)} path(s) on another machine: {shown}. Expected local '
      "paths for local workers. Received: paths with '://'. Use local "
      'folders (copy the artifacts here), or num_workers=1, or run the '
      'workers in a cluster that sets TF_CONFIG (README.md, "Scaling '
      f'out"), or set {WORKER_NETWORK_ENV}=host to run them on this '
      "machine's network, their ports reachable from it "
      '(docs/threat-model.md). Nothing was started.')


class NotEntered(OSError):
  """A worker could not enter the group's network (its reason); the
  group falls back to reserved ports (`local_cluster`)."""


class Entry:
  """Starting one worker in the group's network, for the parent: the
  command that enters it first (`command`), the descriptors it needs
  (`pass_fds`), and the wait until it is in (`entered`).

  The first worker's `Entry()` creates the network, and `entered` returns
  descriptors of its namespaces, which the worker sent over a Unix socket
  once in (SCM_RIGHTS; they stay valid whenever the worker ends); the
  others' `Entry(those)` join it.
  """

  def __init__(self, join: Optional[Tuple[int, ...]] = None):
    self._join = join  # The group's user and network namespace descriptors.
    self._ours, self._theirs = socket.socketpair(socket.AF_UNIX,
                                                 socket.SOCK_STREAM)

  def command(self, program: Sequence[str]) -> List[str]:
    """The command that enters the network, then execs `program`."""
    how = (['join', str(self._join[0]), str(self._join[1])] if self._join
           else ['create'])
    return [sys.executable, '-m', ENTRY_MODULE, str(self._theirs.fileno()),
            *how, '--', *program]

  @property
  def pass_fds(self) -> Tuple[int, ...]:
    return (self._theirs.fileno(),) + tuple(self._join or ())

  def entered(self, process: subprocess.Popen,
              wait_s: float = ENTRY_WAIT_S) -> Tuple[int, ...]:
    """Waits until `process` (started with `command`) is in the network;
    returns descriptors of its user and network namespaces when it made
    them (close them once the group's workers have started), else ().

    Raises:
      NotEntered: it reported why not, or ended, or took `wait_s`.
    """
    self._theirs.close()
    said, fds, deadline = b'', [], time.monotonic() + wait_s
    try:
      while True:
        left = deadline - time.monotonic()
        if left <= 0:
          raise NotEntered(f'the worker was not in the network after '
                           f'{wait_s:.0f} s')
        self._ours.settimeout(left)  # Polls: any descriptor number.
        try:
          chunk, got, _, _ = socket.recv_fds(self._ours, 4096, 2)
        except socket.timeout:
          continue
        fds += got
        if not chunk:
          break  # The entry closed its end: it execs, or it ended.
        said += chunk
      text = said.decode(errors='replace').strip()
      if text != ENTERED:
        raise NotEntered(text or 'the worker ended before it entered the '
                         f'network (status {process.poll()})')
    except BaseException:
      for fd in fds:
        os.close(fd)
      raise
    finally:
      self.close()
    return tuple(fds)

  def close(self) -> None:
    """Closes the socket (idempotent)."""
    self._theirs.close()
    self._ours.close()


def send_entered(ready: int, created: bool) -> None:
  """In the entry, once in: says so on the socket `ready` (closed after),
  with descriptors of this process's new namespaces when it `created`
  them."""
  with socket.socket(fileno=ready) as sock:
    if not created:
      sock.sendall(ENTERED.encode())
      return
    opened = [os.open(f'/proc/self/ns/{kind}', os.O_RDONLY | os.O_CLOEXEC)
              for kind in ('user', 'net')]
    try:
      socket.send_fds(sock, [ENTERED.encode()], opened)
    finally:
      for fd in opened:
        os.close(fd)


def send_refusal(ready: int, why: str) -> None:
  """In the entry, when the kernel refused: says why on `ready`."""
  with socket.socket(fileno=ready) as sock:
    sock.sendall(why.encode())


def create() -> None:
  """Moves this process (single-threaded) into a new user and network
  namespace, its user and group mapped to themselves, loopback up.

  Raises:
    OSError: the kernel refused (its reason).
  """
  libc = ctypes.CDLL(None, use_errno=True)
  uid, gid = os.geteuid(), os.getegid()
  if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
    raise OSError(ctypes.get_errno(), 'unshare(CLONE_NEWUSER|CLONE_NEWNET)'
                  ' failed: ' + os.strerror(ctypes.get_errno()))
  _write('/proc/self/setgroups', 'deny')
  _write('/proc/self/uid_map', f'{uid} {uid} 1')
  _write('/proc/self/gid_map', f'{gid} {gid} 1')
  _loopback_up()


def join(user_fd: int, net_fd: int) -> None:
  """Moves this process (single-threaded) into the user and network
  namespaces `user_fd` and `net_fd` (from `namespaces`).

  Raises:
    OSError: the kernel refused (its reason).
  """
  libc = ctypes.CDLL(None, use_errno=True)
  for kind, fd, flag in (('user', user_fd, CLONE_NEWUSER),
                         ('net', net_fd, CLONE_NEWNET)):
    if libc.setns(fd, flag) != 0:
      raise OSError(ctypes.get_errno(), f'setns({kind}) failed: ' +
                    os.strerror(ctypes.get_errno()))


def loopback_only() -> bool:
  """Whether this process's network has no interface but loopback."""
  try:
    names = [name for _, name in socket.if_nameindex()]
  except OSError:
    return False
  return names == ['lo']


def listening_ports(pid: Optional[int] = None) -> List[int]:
  """The TCP ports listening in the network of process `pid` (default:
  this one), from /proc/<pid>/net/tcp and tcp6."""
  where = f'/proc/{pid}/net' if pid else '/proc/self/net'
  ports = set()
  for name in ('tcp', 'tcp6'):
    try:
      with open(os.path.join(where, name)) as f:
        next(f, None)
        for line in f:
          fields = line.split()
          if len(fields) > 3 and fields[3] == '0A':  # TCP_LISTEN
            ports.add(int(fields[1].rsplit(':', 1)[1], 16))
    except OSError:
      continue
  return sorted(ports)


class PortReservation:
  """Ports of this machine held by this process until `release`: each is
  bound (not listening) with SO_REUSEPORT, which the kernel lets share a
  port only with sockets of the same user that also set it, as TensorFlow's
  gRPC server does under TF_GRPC_REUSE_PORT=1. No other user can take a
  port between its choice and the worker's bind."""

  def __init__(self, count: int):
    self.sockets = []
    self.ports: List[int] = []
    while len(self.ports) < count:
      sock = _reserving_socket()
      port = sock.getsockname()[1]
      if port in self.ports:
        sock.close()
        continue
      self.sockets.append(sock)
      self.ports.append(port)

  def release(self) -> None:
    for sock in self.sockets:
      sock.close()
    self.sockets = []


def _reserving_socket() -> socket.socket:
  try:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    address = ('::', 0)
  except OSError:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    address = ('0.0.0.0', 0)
  sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
  sock.bind(address)
  return sock


def _write(path: str, text: str) -> None:
  fd = os.open(path, os.O_WRONLY)
  try:
    os.write(fd, text.encode())
  finally:
    os.close(fd)


def _loopback_up() -> None:
  sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
  try:
    request = struct.pack('16sH14s', b'lo', 0, b'')
    flags = struct.unpack('16sH', fcntl.ioctl(sock, _SIOCGIFFLAGS,
                                              request)[:18])[1]
    fcntl.ioctl(sock, _SIOCSIFFLAGS,
                struct.pack('16sH14s', b'lo', flags | _IFF_UP, b''))
  finally:
    sock.close()
