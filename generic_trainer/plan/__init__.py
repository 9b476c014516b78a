"""The plan: what a training is, decided once and carried everywhere.

`plan` resolves the settings and the user's code into one `TrainingPlan`
(every settings check, the backend, the Keras version, where it trains, the
checkpoint folder and the resume key), which yields the launcher that runs
it; `distribution` reads this process's place in a cluster (TF_CONFIG, or a
JobSet's environment); `keras_env` is which Keras this process has and the
environment that chooses it; `request` is the `TrainingRequest` sent to
whichever process trains.

May import: `usercode` (the plan loads the entry point), `trainspec` (a
spec's backend refused in a notebook) and the layers below them, and the
base. Never `fnargs`, `launch`, `checks` or
the entry points above them.
"""
