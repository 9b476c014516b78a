"""`python -m generic_trainer ...` runs the generic-trainer command."""

import sys

from generic_trainer.command import cli

sys.exit(cli.main())
