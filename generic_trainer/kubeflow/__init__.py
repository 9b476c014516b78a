"""Kubeflow: one step of a compiled KFP v2 pipeline (`kfp_step`), the
resources a trainer pod asks for (`resources`), the TFJob that runs the
trainer step on several pods (`tfjob`, `tfjob_schema`), and the Kubeflow
Trainer v2 TrainJob and TrainingRuntime that do the same on a JobSet
(`trainjob`).

May import: `plan` (the worker range) and the base; it reads compiled
pipelines, it does not train.
"""
