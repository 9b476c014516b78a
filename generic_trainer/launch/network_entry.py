"""The first program of a local worker in a private network:
`python -m generic_trainer.launch.network_entry READY create|join [USER NET] -- PROGRAM...`.

`private_network.Entry` starts it. While its process has a single thread
(nothing imported here starts one), it asks to die with its parent, then
creates the group's network (`create`) or joins it through the namespace
descriptors USER and NET (`join`), says `private_network.ENTERED` (with
descriptors of the namespaces it created) or why not on the Unix socket
READY, closes every descriptor it was given, and execs
PROGRAM in the same process: the worker's training program, whose pid the
parent already watches.
"""

import os
import sys
from typing import List

from generic_trainer.launch import child_process
from generic_trainer.launch import private_network


def main(argv: List[str]) -> int:
  child_process.die_with_parent()  # Before anything else it does.
  split = argv.index('--')
  ready, how, fds = int(argv[0]), argv[1], [int(a) for a in argv[2:split]]
  program = argv[split + 1:]
  try:
    if how == 'create':
      private_network.create()
    else:
      private_network.join(*fds)
  except OSError as e:
    private_network.send_refusal(ready, str(e))
    return 1
  finally:
    for fd in fds:
      os.close(fd)
  private_network.send_entered(ready, created=how == 'create')
  os.execv(program[0], program)
  return 1  # Not reached: execv replaces this program or raises.


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
