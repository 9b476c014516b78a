"""An execution of GenericExecutor in a thread of the test process, for the
tests that act on a training while it runs (wait for its checkpoint, kill a
worker, read a worker's ports). tests/test_multi_worker.py and
tests/test_shared_machine_runs.py share it."""

import threading
from typing import Any, Dict, Tuple


def executing(io) -> Tuple[threading.Thread, Dict[str, Any]]:
  """GenericExecutor().Do(*io), started in a thread: (the thread, a dict
  that gets its 'error')."""
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  outcome = {}

  def execute():
    try:
      GenericExecutor().Do(*io)
    except Exception as e:  # pylint: disable=broad-except
      outcome['error'] = e

  execution = threading.Thread(target=execute)
  execution.start()
  return execution, outcome
