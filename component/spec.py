"""Kept for checkouts: see `generic_trainer.component.spec`."""

from generic_trainer.component.spec import GenericTrainerSpec

__all__ = ['GenericTrainerSpec']
