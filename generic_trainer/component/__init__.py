"""The pipeline stage: the GenericTrainer TFX component and its executor.

`from generic_trainer.component import GenericTrainer` (also
`generic_trainer.GenericTrainer`). `component` wires channels (`channels`)
and checks arguments at pipeline construction; `spec` is TFX's TrainerSpec
plus GenericTrainer's parameters; `executor` is `GenericExecutor`, whose
`Do` resolves the plan and runs the one attempt (`training.attempt`);
`failure` makes a failed execution say its reason first, its traceback in
a file. The
artifact type it adds (`ParsedRows`) is `data.kept.artifact`, which the
command's requests carry too. All import TFX (seconds), so the names load
when first used: importing the package stays light.

(Named `component`, not `pipeline`: it is the path users import the
component from and compiled pipelines name the executor by, as TFX's own
`tfx/components/trainer/` holds its component and executor together.)

May import: every layer below it (`kubeflow`, `checks`, `launch`, `plan`,
...). Never `command` or `notebook`.
"""
import importlib

_NAMES = {'GenericTrainer': 'generic_trainer.component.component',
          'GenericTrainerSpec': 'generic_trainer.component.spec',
          'ParsedRows': 'generic_trainer.data.kept.artifact'}


def __getattr__(name):
  if name in _NAMES:
    return getattr(importlib.import_module(_NAMES[name]), name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = ['GenericTrainer', 'GenericTrainerSpec', 'ParsedRows']
