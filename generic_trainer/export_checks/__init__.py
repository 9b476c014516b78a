"""The checks of an export, before it is published.

`export_validation` checks that the export loads (once) and predicts
finite numbers on eval examples; `serving_check` and `serving_apis` call
it as TF Serving's Classify, Regress and Predict clients do, without
labels; `signature_gate` keeps a base model's clients working.

May import: `data` and the layers below it, and the base. Never
`training`, `launch` or the entry points.
"""
