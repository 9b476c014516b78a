"""The GenericTrainer TFX component: `from generic_trainer.component import
GenericTrainer` (also `generic_trainer.GenericTrainer`).

`component` wires channels and checks arguments at pipeline construction;
`spec` is TFX's TrainerSpec plus GenericTrainer's parameters; the
artifact type it adds (`ParsedRows`) is `core.artifacts`, which the
command's requests carry too. All import TFX (seconds), so the names load
when first used: importing the package stays light, as every package
`__init__` here does.

May import: every layer below it (`kubeflow`, `executor`, `core`, ...);
never `local`.
"""

_NAMES = {'GenericTrainer': 'generic_trainer.component.component',
          'GenericTrainerSpec': 'generic_trainer.component.spec',
          'ParsedRows': 'generic_trainer.core.artifacts'}


def __getattr__(name):
  if name in _NAMES:
    import importlib  # pylint: disable=g-import-not-at-top
    return getattr(importlib.import_module(_NAMES[name]), name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = ['GenericTrainer', 'GenericTrainerSpec', 'ParsedRows']
