"""Kubeflow: one step of a compiled KFP v2 pipeline (`kfp_step`) and the
TFJob that runs the trainer step on several pods (`tfjob`,
`tfjob_schema`).

May import: `plan` (the worker range) and the base; it reads compiled
pipelines, it does not train.
"""
