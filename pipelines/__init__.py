"""Example pipelines that use GenericTrainer."""
