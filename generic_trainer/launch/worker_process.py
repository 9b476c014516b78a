"""One local worker process seen from its parent: its log, its end, its
report (`local_cluster` runs a group of them).

A worker writes its output to a file, never to a pipe: a thread copies each
line to stderr with a `[worker i]` prefix, and drops the lines stderr
cannot take (closed by `| head`, a full disk), so a worker never waits on
its parent's stderr.
"""

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from absl import logging

STOP_WAIT_S = 30.0  # For all the killed workers of a group together.
POLL_S = 0.2


class Worker:
  """One started worker process, its log file and where it reports."""

  def __init__(self, index: int, process: subprocess.Popen, result_path: str,
               log_path: str):
    self.index = index
    self.process = process
    self.result_path = result_path
    self.log_path = log_path
    self.started = time.monotonic()
    self.seconds: Optional[float] = None
    self.dropped = 0  # Lines stderr could not take.
    self.log_thread = threading.Thread(target=self._stream, daemon=True)
    self.log_thread.start()

  def _stream(self) -> None:
    """Copies the log file's lines to stderr until the worker has ended
    and its file is read."""
    prefix = f'[worker {self.index}] '
    with open(self.log_path, encoding='utf-8', errors='replace') as log:
      partial = ''
      while True:
        ended = self.process.poll() is not None
        chunk = log.read()
        lines = (partial + chunk).split('\n')
        partial = lines.pop()
        for line in lines:
          self._show(prefix + line + '\n')
        if ended and not chunk:
          if partial:
            self._show(prefix + partial + '\n')
          return
        if not chunk:
          time.sleep(POLL_S)

  def _show(self, line: str) -> None:
    try:
      sys.stderr.write(line)
      sys.stderr.flush()
    except (OSError, ValueError):  # Closed, broken, full: drop the line.
      self.dropped += 1

  def poll(self) -> Optional[int]:
    code = self.process.poll()
    if code is not None and self.seconds is None:
      self.seconds = round(time.monotonic() - self.started, 1)
    return code

  def report(self) -> Dict[str, Any]:
    if not os.path.exists(self.result_path):
      return {}
    with open(self.result_path) as f:
      try:
        return json.load(f)
      except ValueError:
        return {}

  def kill(self) -> None:
    if self.process.poll() is None:
      self.process.kill()

  def wait_stopped(self, deadline: float) -> None:
    try:
      self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
      logging.error('Worker %d (pid %d) did not die after SIGKILL.',
                    self.index, self.process.pid)
    self.log_thread.join(timeout=max(0.1, deadline - time.monotonic()))


def stop_all(workers: List[Worker]) -> None:
  """Kills the workers still running, and waits STOP_WAIT_S in all."""
  for worker in workers:
    worker.kill()
  deadline = time.monotonic() + STOP_WAIT_S
  for worker in workers:
    worker.wait_stopped(deadline)
