"""The program of a child training process: `python -m generic_trainer.training.child REQUEST`.

`launch.child_process` (in the parent) writes REQUEST and starts this; it
reads the `TrainingRequest`, whose plan says to train here, runs the
attempt with it (`attempt.run`: the parent publishes, so nothing is
published here; a local worker that is not the chief trains into
scratch), and writes the result JSON that `child_process.read_error`
reads: `{}` on success (with the replicas a strategy trained with), or
the name and message of the error raised. SIGTERM stops its training at
the next step, which is saved (`generic_trainer.system.preemption`); it
reports PreemptedError.
"""

import sys

from generic_trainer.errors import UnsafeFolderError
from generic_trainer.fnargs import strategies
from generic_trainer.launch import child_process
from generic_trainer.plan.request import TrainingRequest
from generic_trainer.system import atomic_files
from generic_trainer.system import collector
from generic_trainer.system import preemption
from generic_trainer.system import progress
from generic_trainer.training import attempt


def main(request_path: str) -> int:
  child_process.die_with_parent()  # Before anything else it does.
  try:  # Only a request that nobody else can have written.
    request = child_process.read_request(request_path)
  except UnsafeFolderError as e:
    sys.stderr.write(f'{e}\n')  # Nowhere trusted to report it but here.
    return 1
  collector.freeze()  # What the imports above made: never garbage.
  progress.print_plain()
  with preemption.handling():
    result = _train(request['request'])
  atomic_files.write_json(request['result_path'], result)
  return 1 if result.get('error') else 0


def _train(request) -> dict:
  """Trains the request; returns the result to report."""
  result = {}
  try:
    attempt.run(TrainingRequest.from_json(request))
    if strategies.replicas_in_sync():
      result['replicas_in_sync'] = max(strategies.replicas_in_sync().values())
  except Exception as e:  # pylint: disable=broad-except
    result = {'error': type(e).__name__, 'message': str(e)}
  return result


if __name__ == '__main__':
  sys.exit(main(sys.argv[1]))
