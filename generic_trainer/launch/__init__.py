"""Carrying out where a training plan says to train (`dispatch`, a switch
on `core.plan.Where`): this process, a child under the other Keras or on
another Keras backend (`child_process`, whose program is `child`), or N
local workers (`local_cluster`, with `restarts`, in a network of their
own: `private_network`).

May import: `core` and the top-level base modules. Never `local`,
`kubeflow` or `executor`.
"""
