"""Kept for checkouts: see `generic_trainer.component.component`."""

from generic_trainer.component.component import GenericTrainer

__all__ = ['GenericTrainer']
