"""Launching: running a training where its plan says, through one call.

`launcher.train(request, entry)` is the one call the attempt
(`training.attempt`) makes for every entry point: the plan names the
launcher, and the launcher trains in this process (FnArgs built, the
entry point called), in a child process under the other Keras or on
another Keras backend (`child_process`, whose program is
`training.child`), or in N local worker processes (`local_cluster`, with
`restarts`, `worker_process` and a network of their own:
`private_network`, which each worker enters first, `network_entry`), or in the pods of the job a Kubeflow step launches
(`kubeflow.step_job`). `cluster_environment` finds which cluster this
process is in (TF_CONFIG, a JobSet, a Kubeflow step; else alone), one
detector per environment of `plan.cluster` and the one reader of a
scheduler's variables, and sets what a member needs while it trains. `stall_watch`
ends a child or a group that is alive but makes no step, and a training in
its own process that waits on something.

May import: `kubeflow`, `fnargs`, `plan` and the layers below them, and the base.
Never `training`, `export_checks`, `publication` or the entry points.
"""
