"""No compiled Python written while a training runs: TensorFlow's autograph
would leave it in TMPDIR.

Autograph converts each function a `tf.function` traces (Keras's train
step, a user's `tf.function`) by writing its new source to a temporary
file, `$TMPDIR/__autograph_generated_file*.py`, and importing it
(`tensorflow/python/autograph/pyct/loader.py`, `load_source`, TF 2.16 to
2.21); it removes the source at exit, but the import has written
`$TMPDIR/__pycache__/__autograph_generated_file*.pyc` beside it, which
stays: every training left files in the user's TMPDIR, in /tmp by default,
in a `__pycache__` the first user to train owns. Python writes none while
`sys.dont_write_bytecode` is set (what PYTHONDONTWRITEBYTECODE sets, which
root's shell on this project's machines had, so the suite, run as root,
never saw them; issue 55). It is set while the user's code trains
(`launch.launcher`), and put back as it was after: the modules a training
imports are read from their compiled files as before, only none is
written meanwhile.
"""

import contextlib
import sys
from typing import Iterator


@contextlib.contextmanager
def none_written() -> Iterator[None]:
  """No compiled Python (`__pycache__`) written in the block."""
  before = sys.dont_write_bytecode
  sys.dont_write_bytecode = True
  try:
    yield
  finally:
    sys.dont_write_bytecode = before
