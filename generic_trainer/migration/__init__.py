"""From tf.estimator to a TrainSpec: reading the module, writing the advice.

`estimator_uses` finds where a module uses tf.estimator, `module_source`
reads its settings from the source without running it, `spec_lines` writes
them as lines of a spec, and `advice` writes the error that refuses the
module with the TrainSpec to use instead.

May import: the base (`system.source_tree`, `keys`, `errors`) only.
"""
