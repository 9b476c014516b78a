"""A chief and a worker of one TF_CONFIG cluster, each a process of its own
on this machine, as a TFJob's two replicas run: their TF_CONFIG on two
ports of localhost, and their logs once both have ended.
tests/test_multi_worker.py, tests/test_one_path.py and
tests/test_containers.py share it."""

import json
import subprocess
from typing import Dict, Optional, Sequence

TASK_TYPES = ('chief', 'worker')


def tf_configs(ports: Optional[Sequence[int]] = None) -> Dict[str, str]:
  """TF_CONFIG of the chief and of the worker (index 0 each), by task type,
  on `ports` (the chief's, the worker's; two free ones if not given)."""
  if ports is None:
    from generic_trainer.launch.local_cluster import free_ports  # pylint: disable=g-import-not-at-top
    ports = free_ports(2)
  cluster = {task_type: [f'localhost:{port}']
             for task_type, port in zip(TASK_TYPES, ports)}
  return {task_type: json.dumps({'cluster': cluster,
                                 'task': {'type': task_type, 'index': 0}})
          for task_type in TASK_TYPES}


def ended(processes: Dict[str, subprocess.Popen],
          timeout_s: float) -> Dict[str, str]:
  """What each process wrote (stdout, stderr merged into it) once it ended,
  by task type; every process is killed on the way out, ended or not."""
  logs = {}
  try:
    for task_type, process in processes.items():
      logs[task_type] = process.communicate(timeout=timeout_s)[0]
  finally:
    for process in processes.values():
      process.kill()
  return logs
