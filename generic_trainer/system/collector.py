"""The garbage collector while a process starts and trains: no full passes
over what the process made before.

Importing TensorFlow, Keras and this package makes about half a million
objects that live as long as the process (TFX's about as many more).
CPython's collector scans every tracked object at each full collection:
the command's imports alone triggered six of them (0.50 s on a 2-core AMD
EPYC, TFX 1.16), and its training a seventh before the first step
(0.20 s); a pipeline's training meets them too, over TFX's objects as
well. Those objects are not garbage: the seven freed 100 objects in all
(`python -m benchmarks.gc_passes`, `benchmarks/results/gc-passes-*.json`).

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
shorten: 1.41x TensorFlow's import before, 1.18x after.
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
