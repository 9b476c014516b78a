"""The TrainSpec runtime (the loop that trains a TrainSpec; named `loop`, not
`spec`, so that "spec" means the TrainSpec a user writes): what trains a
module that defines a TrainSpec.

`runner` runs one spec from FnArgs: `datasets` builds the train and eval
input, `checks` tests the spec against a real batch, `fit_loop` trains
with Keras's `model.fit` and the built-in `handlers` (`fit_schedule`
decides the `fit` calls of a resumed training), `export` writes the
SavedModel with its serving signatures.

May import: the top-level base modules and `data`. Never `core`,
`launch`, `local`, `kubeflow` or `executor`.
"""
