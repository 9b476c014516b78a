"""GenericTrainer's library: the executor, FnArgs, module loading, export checks.

Importing this package is cheap; TensorFlow and TFX load only when a name
that needs them is used.
"""

import importlib

from generic_trainer.errors import CheckpointError
from generic_trainer.errors import ExportValidationError
from generic_trainer.errors import FolderInUseError
from generic_trainer.errors import GenericTrainerError
from generic_trainer.errors import InputArtifactError
from generic_trainer.errors import InvalidArgumentError
from generic_trainer.errors import ModelFolderError
from generic_trainer.errors import NonFiniteLossError
from generic_trainer.errors import PreemptedError
from generic_trainer.errors import RunFnError
from generic_trainer.errors import ServingCheckError
from generic_trainer.errors import SignatureChangeError
from generic_trainer.errors import SpecError
from generic_trainer.errors import StepJobError
from generic_trainer.errors import StorageError
from generic_trainer.errors import TrainingProcessError
from generic_trainer.errors import UnsafeFolderError
from generic_trainer.errors import UserModuleError
from generic_trainer.trainspec.spec import TrainSpec
from generic_trainer.version import __version__

_LAZY = {
    'Estimator': 'generic_trainer.notebook.estimator',
    'GenericExecutor': 'generic_trainer.component.executor',
    'FnArgs': 'generic_trainer.fnargs.fn_args',
    'GenericTrainer': 'generic_trainer.component',
    'ParsedRows': 'generic_trainer.component',
    'validate_export': 'generic_trainer.export_checks.export_validation',
    'tf_examples': 'generic_trainer.data.serving_examples',
}


def __getattr__(name):
  if name in _LAZY:
    return getattr(importlib.import_module(_LAZY[name]), name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = ['CheckpointError', 'Estimator', 'ExportValidationError', 'FnArgs', 'GenericExecutor',
           'GenericTrainer',
           'FolderInUseError', 'GenericTrainerError', 'InputArtifactError',
           'InvalidArgumentError', 'ModelFolderError',
           'NonFiniteLossError', 'ParsedRows', 'PreemptedError', 'RunFnError',
           'ServingCheckError', 'SignatureChangeError',
           'SpecError', 'StepJobError', 'StorageError', 'TrainSpec', 'TrainingProcessError',
           'UnsafeFolderError', 'UserModuleError', '__version__',
           'tf_examples', 'validate_export']
