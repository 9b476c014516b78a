"""One execution, in whatever process runs it.

Argument checks (`args`), finding the user's entry point (`module_loader`),
building FnArgs from the artifacts (`fn_args`), calling the entry point
(`training`), checking the export (`export_validation`; as TF Serving's
clients call it: `serving_check`, `serving_apis`), publishing it
atomically (`publish`), and this process's place in a cluster
(`distribution`, `strategies`).

May import: the top-level base modules (`errors`, `keys`, `train_spec`,
`resume`, `train_result`), `spec` (to run a TrainSpec) and `data`. Never
`launch`, `local`, `kubeflow` or `executor`, which sit above it.
"""
