"""Kubeflow: compiling a pipeline for the backend it runs on (`compile`),
one step of a compiled KFP v2 pipeline as KFP's driver resolves it
(`kfp_step`), the step's kfp-kubernetes platform spec in the forms each
KFP release parses (`kfp_platform`), the resources a trainer pod asks for (`resources`) and what
else a cluster needs on it (`pod_settings`), the names a rendered job may
have (`names`), the TFJob that runs the trainer step on several pods
(`tfjob`, `tfjob_schema`), and the Kubeflow
Trainer v2 TrainJob and TrainingRuntime that do the same on a JobSet
(`trainjob`): each a kind of job (`job_kind.JobKind`), listed in `kinds`;
and the step that launches one of them for its workers, follows it and
takes its model (`step_job/`).

May import: `plan` (the worker range) and the base; it reads compiled
pipelines and launches jobs, it does not train.
"""
