"""Launching: running a training where its plan says, through one call.

`launcher.train(request, entry)` is the one call every entry point makes
(the executor and the command through `checks.attempt`, the notebook
`Estimator` directly): the plan names the launcher, and the launcher
trains in this process (`here`: FnArgs built, the entry point called), in
a child process under the other Keras or on another Keras backend
(`child_process`, whose program is `child`), or in N local worker
processes (`local_cluster`, with `restarts`, `worker_process` and a
network of their own: `private_network`). `stall_watch` ends a child or
a group that is alive but makes no step.

May import: `fnargs`, `plan` and the layers below them, and the base.
Never `checks` or the entry points.
"""
