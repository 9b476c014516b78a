"""gRPC kept busy in this process, as Beam's runner keeps it in a
pipeline's process after a Transform: a server, a channel to it, and two
threads calling it without pause. The state in which starting a child
process through a preexec_fn went wrong (gRPC's fork handlers)."""

import contextlib
from concurrent import futures
import threading

import grpc


@contextlib.contextmanager
def busy():
  """gRPC busy until the block ends."""
  server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
  port = server.add_insecure_port('127.0.0.1:0')
  server.start()
  channel = grpc.insecure_channel(f'127.0.0.1:{port}')
  done = threading.Event()

  def call():
    while not done.is_set():
      try:
        channel.unary_unary('/none/Call')(b'', timeout=0.05)
      except grpc.RpcError:
        pass
  threads = [threading.Thread(target=call) for _ in range(2)]
  for thread in threads:
    thread.start()
  try:
    yield
  finally:
    done.set()
    for thread in threads:
      thread.join()
    channel.close()
    server.stop(None)
