"""The attempt: stage, train, validate, gate, publish.

`attempt` runs the one sequence every entry point runs (the training
itself through `launch`); `publish` stages the export and is its commit
point; `export_validation` checks that the export loads and predicts
finite numbers; `serving_check` and `serving_apis` call it as TF Serving's
Classify, Regress and Predict clients do; `signature_gate` keeps a base
model's clients working.

May import: `launch` and the layers below it, and the base. Never the
entry points (`component`, `command`, `notebook`, `kubeflow`).
"""
