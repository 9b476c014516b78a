"""`generic_trainer.Estimator`: a TrainSpec trained, evaluated and exported
in a notebook, through the same plan, launcher and attempt as a pipeline
(`estimator`).

May import: every layer below the entry points. Never `component`,
`command` or `kubeflow`.
"""
