"""A fake training process: the program `child_process.start` runs, in
place of `generic_trainer.training.child`, for tests of the parent's
supervision (real processes, no TensorFlow).

It records `{pid, index, interfaces}` in $FAKE_WORKER_DIR/<index>.json,
then, by $FAKE_WORKER_MODE:
  ok: reports success and exits 0;
  hang: writes steps 0..5 into its heartbeat file (worker 1: 0..2), prints
    a line a step, then waits forever, as a worker of a hung group does.
"""

import json
import os
import socket
import sys
import time


def main(request_path):
  with open(request_path) as f:
    result_path = json.load(f)['result_path']
  config = json.loads(os.environ.get('TF_CONFIG') or '{}')
  index = config.get('task', {}).get('index', 0)
  record = os.path.join(os.environ['FAKE_WORKER_DIR'], f'{index}.json')
  with open(record, 'w') as f:
    json.dump({'pid': os.getpid(), 'index': index,
               'interfaces': [name for _, name in socket.if_nameindex()]}, f)
  print(f'a fake worker, index {index}', flush=True)
  if os.environ.get('FAKE_WORKER_MODE') == 'hang':
    beat = os.environ['GENERIC_TRAINER_HEARTBEAT_FILE']
    for step in range(3 if index == 1 else 6):
      with open(beat + '.tmp', 'w') as f:
        f.write(str(step))
      os.replace(beat + '.tmp', beat)
      print(f'step {step}', flush=True)
      time.sleep(0.05)
    while True:
      time.sleep(60)
  with open(result_path, 'w') as f:
    json.dump({}, f)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1]))
