"""The GenericTrainer TFX component: `from component import GenericTrainer`."""

from component.component import GenericTrainer
from component.spec import GenericTrainerSpec

__all__ = ['GenericTrainer', 'GenericTrainerSpec']
