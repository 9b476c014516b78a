"""The progress log: the lines a person watching a training wants to see.

Epoch lines of the fit loop (`LogLines`) and the executor's steps
(training, validating, publishing) go to the standard logger named
`LOGGER`, at INFO, which is enabled here. Logs keep them like any other
line; the `generic-trainer` command and the console of local pipeline runs
show them where they hide the rest (`local.console`), choosing by this
logger's name rather than by where the code lives.
"""

import logging

LOGGER = 'generic_trainer.progress'


def log() -> logging.Logger:
  """The progress logger, enabled at INFO."""
  logger = logging.getLogger(LOGGER)
  if logger.level == logging.NOTSET:
    logger.setLevel(logging.INFO)
  return logger
