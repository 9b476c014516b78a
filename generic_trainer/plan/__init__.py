"""The plan: what a training is, decided once and carried everywhere.

`plan` resolves the settings and the user's code into one `TrainingPlan`
in numbered steps (the entry point, the settings, the user's code,
workers and role, strategy, resume, Keras and backend: where it trains),
which names the launcher that runs it; `cluster` holds where a training
runs (one class per cluster environment, with the role it gives this
process), which the plan carries; `entry_points` is what each entry
point (component, command, notebook) means, carried by the plan;
`settings` checks the settings, alone and together (`check_settings`,
the one check the component, the command and the plan call), and makes
the choices they leave; `resume_folder` names the checkpoint folder by a
key of what defines the training; `request` is the `TrainingRequest`
sent to whichever process trains.

May import: `usercode` (the plan loads the entry point), `trainspec` (a
spec's backend refused in a notebook) and the layers below them, and the
base. Never `fnargs`, `launch`, `training` or the entry points above them.
"""
