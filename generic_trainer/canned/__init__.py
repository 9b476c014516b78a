"""Canned TrainSpecs: configure a model instead of writing it.

The linear, DNN and wide-and-deep (DNN-linear combined) models of
tf.estimator, each as a classifier and a regressor, and with a head of
your own. The features come from the schema (and the `statistics` input,
for normalisation and vocabularies) through Keras preprocessing layers;
every choice can be changed per feature with `columns`. A whole module
can be:

    from generic_trainer.canned import DNNClassifierSpec

    class Spec(DNNClassifierSpec):
      label_key = 'species'
      hidden_units = [16, 8]

`base` holds `CannedSpec`, `columns` the per-feature columns,
`data_summary` what a spec learns from the data before training,
`column_report` the block that lists each feature's column (and flags
IDs and dates),
`heads_from_data` a classifier's head from its classes; `linear`, `dnn`
and `dnn_linear_combined` the models. Above `loop` (it reads the schema
and a data sample with its `datasets`), below `usercode`, whose module
loader names a canned spec in the error that refuses a tf.estimator module
(`migration`). May import: the base modules, `heads`, `loop`, `data` and
`trainspec`. Importing it loads no
TensorFlow; the names below are re-exported from the modules that hold
them.
"""

from generic_trainer.canned.base import CannedSpec
from generic_trainer.canned.columns import Bucketized
from generic_trainer.canned.columns import Categorical
from generic_trainer.canned.columns import Crossed
from generic_trainer.canned.columns import Numeric
from generic_trainer.canned.dnn import DNNClassifierSpec
from generic_trainer.canned.dnn import DNNRegressorSpec
from generic_trainer.canned.dnn import DNNSpec
from generic_trainer.canned.dnn_linear_combined import DNNLinearCombinedClassifierSpec
from generic_trainer.canned.dnn_linear_combined import DNNLinearCombinedRegressorSpec
from generic_trainer.canned.dnn_linear_combined import DNNLinearCombinedSpec
from generic_trainer.canned.linear import LinearClassifierSpec
from generic_trainer.canned.linear import LinearRegressorSpec
from generic_trainer.canned.linear import LinearSpec

__all__ = ['Bucketized', 'CannedSpec', 'Categorical', 'Crossed',
           'DNNClassifierSpec', 'DNNLinearCombinedClassifierSpec',
           'DNNLinearCombinedRegressorSpec', 'DNNLinearCombinedSpec',
           'DNNRegressorSpec', 'DNNSpec', 'LinearClassifierSpec',
           'LinearRegressorSpec', 'LinearSpec', 'Numeric']
