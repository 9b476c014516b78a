"""The TrainSpec API: say what only you know.

`spec` holds `TrainSpec` (also `generic_trainer.TrainSpec`), `outputs` a
spec's outputs (label, head and weight of each), `member_checks` what its
members return, checked once where they are built. Heads
(`generic_trainer.heads`) and canned specs (`generic_trainer.canned`) are
families of TrainSpecs, kept at the paths users import them from.

May import: the base (`errors`, `keys`, `heads`, `system`) only.
"""
