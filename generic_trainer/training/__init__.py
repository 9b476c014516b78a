"""The sequence: one attempt at a training, run by every entry point.

`attempt` resolves the plan in this process's cluster environment, then
stages, trains (through `launch`), validates (`export_checks`), gates and
publishes (`publication`), or, for a member that publishes nothing,
trains alone; `child` is the program of a child training process and of
each local worker, which runs the same attempt.

May import: `launch`, `export_checks`, `publication` and the layers below
them, and the base. Never the entry points (`component`, `command`,
`notebook`, `kubeflow`).
"""
