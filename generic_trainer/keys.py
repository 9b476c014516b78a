"""Keys GenericTrainer adds to TFX's Trainer spec (the rest are TFX's own)."""

STATISTICS_KEY = 'statistics'
KERAS_VERSION_KEY = 'keras_version'
NUM_WORKERS_KEY = 'num_workers'
STRATEGY_KEY = 'strategy'
