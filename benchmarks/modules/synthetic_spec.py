"""The benchmark's model as a TrainSpec: GenericTrainer builds the input
pipeline, trains for `epochs` epochs and exports. `epochs`, `cache` and
`table` come from hparams, else from the component's custom_config."""

from generic_trainer import TrainSpec

from benchmarks.model import BATCH_SIZE, build_model, compile_args
from benchmarks.synthetic_data import LABEL_KEY


class SyntheticSpec(TrainSpec):
  label_key = LABEL_KEY
  batch_size = BATCH_SIZE
  checkpoint = None  # The tutorial run_fn does not checkpoint either.

  @property
  def epochs(self):
    """From hparams, else the component's custom_config, else 1."""
    return int(self._setting('epochs', 1))

  @property
  def cache(self):
    """From hparams, else custom_config, else None (when the rows fit)."""
    return self._setting('cache', None)

  def _setting(self, name, default):
    config = (self.fn_args.custom_config if self.fn_args else None) or {}
    return self.hparams.get(name, config.get(name, default))

  def build_model(self):
    return build_model(self._setting('table', 'narrow'))

  def build_optimizer(self):
    return compile_args()['optimizer']

  def build_loss(self):
    return compile_args()['loss']

  def build_metrics(self):
    return compile_args()['metrics']
