"""The user's code: finding it, calling it, and what it leaves behind.

`module_loader` finds the entry point (a `run_fn`, or a TrainSpec class)
from `module_file`, `module_path` or `run_fn`, importing a module once per
process; `static_spec` reads what a module's TrainSpec declares without
running it; `guard` runs user code so that it cannot end the trainer;
`stray_threads` keeps the threads it leaves from holding the process.

May import: `migration` (the advice for tf.estimator modules), `loop` (a
TrainSpec's run_fn), `trainspec` and the base. Never `plan` or the layers
above it.
"""
