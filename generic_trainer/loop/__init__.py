"""The TrainSpec runtime (the loop that trains a TrainSpec; named `loop`, not
`spec`, so that "spec" means the TrainSpec a user writes): what trains a
module that defines a TrainSpec.

`runner` runs one spec from FnArgs: `datasets` builds the train and eval
input (`first_batch_errors` says why a first batch could not be read),
`spec_checks` and `label_checks` test the spec against a real batch,
`warm_start` loads the base model's weights, `fit_loop` trains with
Keras's `model.fit` and the built-in `handlers` (`fit_schedule` decides
the `fit` calls of a resumed training), `on_jax` is what differs on JAX,
`export` writes the SavedModel with its serving signatures, and
`train_result` is the record of a finished training (train_result.json,
written once, and its place in ML Metadata).

May import: `data`, `trainspec` and the base.
"""
