"""The garbage collector while a process starts and trains: no full passes
over what the process made before.

Importing TensorFlow, Keras and this package makes about half a million
objects that live as long as the process (TFX's about as many more).
CPython's collector scans every tracked object at each full collection:
the imports alone trigger six of them (0.55 s of a 2.4 s start on a
2-core AMD EPYC, TFX 1.16), and a training one more each time it has
allocated enough (0.2-0.4 s each, the first before or in its first
epoch). Those objects are not garbage: the imports leave a few dozen
cyclic objects in all.

- `imports_paused()`: the command holds the collector off while it
  imports its training's modules, then freezes what is alive;
- `freeze()`: every object alive goes into the permanent generation
  (`gc.freeze`), which later collections do not scan: they see only what
  the training itself makes. The child training process calls it once its
  modules, imported at its top, are loaded. A frozen object is never freed
  by the collector: only processes that train and end call these two.
- `training()`: the launcher trains in it. What the process had before is
  frozen for the training and given back to the collector after it
  (`gc.unfreeze`), unless it was frozen already, so that a long-lived
  process (a pipeline's orchestrator, a notebook) keeps nothing for ever.

Benchmark (d) (`benchmarks/first_step.py`) measures the start they
shorten.
"""

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def imports_paused() -> Iterator[None]:
  """No collection in the block; at its end, `freeze()`, and the collector
  runs again as it did before."""
  enabled = gc.isenabled()
  gc.disable()
  try:
    yield
  finally:
    freeze()
    if enabled:
      gc.enable()


def freeze() -> None:
  """Every object alive now is left out of later collections."""
  gc.freeze()


@contextlib.contextmanager
def training() -> Iterator[None]:
  """What is alive now is left out of the collections in the block; after
  it, the collector sees it again, unless it was frozen before (the
  command, a child process: frozen for good) or another thread's training
  still runs (the first to have frozen gives it back when it ends)."""
  frozen_before = gc.get_freeze_count() > 0
  gc.freeze()
  try:
    yield
  finally:
    if not frozen_before:
      gc.unfreeze()
