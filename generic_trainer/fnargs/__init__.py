"""What user code receives: FnArgs.

`fn_args` builds TFX's `FnArgs` (plus GenericTrainer's fields, `fields`)
from the input artifacts of a `TrainingRequest`, after `inputs` checks
them; `local` is the `LocalFnArgs` a TrainSpec receives outside a pipeline,
without TFX; `strategies` makes the tf.distribute strategy FnArgs carries.

May import: `plan` (the request), `data` and the base. Never `launch` or
the layers above it.
"""
