"""Runs outside a pipeline: the `generic-trainer` command (`cli`,
`cli_args`), a run into one output folder (`run`), the FnArgs and data of
local runs (`fn_args`, `data`), the notebook `Estimator`, and the output
folder's safety: its lock and owner checks (`output_folder`), what a run
wrote there (`manifest`).

May import: `executor`, `launch`, `core`, `loop`, `data` and the top-level
base modules. Never `kubeflow`.
"""
