"""A child program that asks to die with its parent as the training child
does (`child_process.die_with_parent`), then writes READY and sleeps:
`python -m sleeps_with_parent READY`."""

import pathlib
import sys
import time

from generic_trainer.launch import child_process

if __name__ == '__main__':
  child_process.die_with_parent()
  pathlib.Path(sys.argv[1]).write_text('ready')
  time.sleep(120)
