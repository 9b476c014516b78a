"""Starting other processes to train: a child under the other Keras
(`keras_process`) or on another Keras backend (`backend_process`), or N
local workers (`local_cluster`, in a network of their own:
`private_network`), all through `child_process`.

May import: `core` and the top-level base modules. Never `local`,
`kubeflow` or `executor`.
"""
