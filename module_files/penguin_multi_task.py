"""Penguin species and sex from the measurements: one body, two heads.

A multi-task canned DNN: the heads share the hidden layers; each has its
output layer, loss and metrics (`species_accuracy`, `sex_auc`...); the
losses are summed (weights in `loss_weights`). Labels are ids here (species
0/1/2, sex 0/1), so that Evaluator can read either output by name:

    penguin_pipeline_local.run(out, module_file='module_files/penguin_multi_task.py',
                               sex=True, evaluate_output='species')
"""

from generic_trainer import heads
from generic_trainer.canned import DNNSpec


class SpeciesAndSex(DNNSpec):
  head = {'species': heads.MultiClassHead(n_classes=3),
          'sex': heads.BinaryClassHead()}
  loss_weights = {'species': 1.0, 'sex': 0.5}
  hidden_units = [16, 8]
