"""The progress log: the lines a person watching a training wants to see.

Epoch lines of the fit loop (`LogLines`) and the executor's steps
(training, validating, publishing) go to the standard logger named
`LOGGER`, at INFO, which is enabled here. Logs keep them like any other
line; the `generic-trainer` command and the console of local pipeline runs
show them where they hide the rest (`system.console`), choosing by this
logger's name rather than by where the code lives.
"""

import logging
import re
import sys

LOGGER = 'generic_trainer.system.progress'
# The epoch lines of `LogLines`, as a child training process prints them
# (`print_plain`), for a console that reads the child's output.
EPOCH_LINE = re.compile(
    r'^(\[worker \d+\] )?epoch \d+ (done in |step \d+(/\d+)?: )')


def log() -> logging.Logger:
  """The progress logger, enabled at INFO."""
  logger = logging.getLogger(LOGGER)
  if logger.level == logging.NOTSET:
    logger.setLevel(logging.INFO)
  return logger


def print_plain() -> None:
  """In a child training process: the progress log's lines go to stderr
  as they are, without a level or logger name, as the parent would show
  them."""
  handler = logging.StreamHandler(sys.stderr)
  handler.setFormatter(logging.Formatter('%(message)s'))
  logger = log()
  logger.addHandler(handler)
  logger.propagate = False
