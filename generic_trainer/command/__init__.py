"""The `generic-trainer` command: a module file on local files, one folder.

`cli` is the program, `cli_args` its flags (checked before anything heavy
loads), `run` what it does once they are checked (the plan, then the one
attempt of `checks`, into the folder `layout` describes and names, what a
run wrote recorded by `system.manifest`; `holdout` the eval data held out
of the train data).

May import: every layer below the entry points. Never `component`,
`notebook` or `kubeflow`.
"""
