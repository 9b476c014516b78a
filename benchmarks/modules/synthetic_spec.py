"""The benchmark's model as a TrainSpec: GenericTrainer builds the input
pipeline, trains for `hparams['epochs']` epochs and exports."""

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
    config = (self.fn_args.custom_config if self.fn_args else None) or {}
    return int(self.hparams.get('epochs', config.get('epochs', 1)))

  def build_model(self):
    return build_model()

  def build_optimizer(self):
    return compile_args()['optimizer']

  def build_loss(self):
    return compile_args()['loss']

  def build_metrics(self):
    return compile_args()['metrics']
