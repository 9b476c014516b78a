"""One execution, in whatever process runs it.

The training plan, resolved once (`plan`, with the checks of single
settings in `args`, this process's Keras in `keras_env`, its place in a
cluster in `distribution`, and finding the user's entry point in
`module_loader`); the request that carries it to the process that trains
(`request`), and the artifact type GenericTrainer adds (`artifacts`:
ParsedRows); the one attempt sequence (`attempt`: stage and publish
atomically in `publish`, check the export in `export_validation`, as
TF Serving's clients call it in `serving_check` and `serving_apis`, and
`signature_gate`); building FnArgs from the artifacts (`fn_args`,
`inputs`) and calling the entry point (`training`, `user_code`,
`strategies`).

May import: the top-level base modules (`errors`, `keys`, `progress`,
`train_spec`), `loop` (to run a TrainSpec), `canned` (the migration advice
for `trainer_fn` modules) and `data`. Never `launch`, `local`, `kubeflow`, `executor` or `component`,
which sit above it.
"""
