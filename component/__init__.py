"""Kept for pipelines run from a checkout that wrote `from component import
GenericTrainer`: the component lives in `generic_trainer.component`, and
the installed distribution has no top-level `component` package."""

from generic_trainer.component import GenericTrainer
from generic_trainer.component import GenericTrainerSpec

__all__ = ['GenericTrainer', 'GenericTrainerSpec']
