"""The garbage collector while a training process starts: no full passes
over what its imports made.

Importing TensorFlow, Keras and this package makes about half a million
objects that live as long as the process. CPython's collector scans every
tracked object at each full collection: the command's imports alone
triggered six of them (0.50 s on a 2-core AMD EPYC, TFX 1.16), and its
training a seventh before the first step (0.20 s). Those objects are not
garbage: the seven freed 100 objects in all (`python -m
benchmarks.gc_passes`, `benchmarks/results/gc-passes-*.json`).

- `imports_paused()`: the `generic-trainer` program holds the collector off
  while it imports its training's modules, then freezes what is alive;
- `freeze()`: every object alive goes into the permanent generation
  (`gc.freeze`), which later collections do not scan: they see only what
  the training itself makes. The child training process calls it once its
  modules, imported at its top, are loaded.

A frozen object is never freed by the collector, so only processes that
exist to train once and end call these: the program, not `cli.main`
called by a test or a notebook, nor a pipeline's executor, which trains in
its orchestrator's process (freezing there would keep an earlier model's
uncollected cycles, and their weights, for the whole next training).

Benchmark (d) (`benchmarks/first_step.py`) measures the start they
shorten: 1.41x TensorFlow's import before, 1.17x after.
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
