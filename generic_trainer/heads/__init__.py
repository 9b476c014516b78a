"""Heads: what follows a model's last hidden layer, written once.

A head is the output layer, the loss, the metrics, the predictions and the
export signatures of one kind of problem (the Estimators paper's "Head
API"). A TrainSpec declares one instead of build_loss and its own output
layer:

    from generic_trainer import heads

    class Spec(TrainSpec):
      label_key = 'species'
      head = heads.MultiClassHead(label_vocabulary=['Adelie', 'Chinstrap',
                                                    'Gentoo'])
      def build_model(self):      # the body: up to the last hidden layer
        ...
        return keras.Model(inputs, hidden)

`head = {'species': heads.MultiClassHead(3), 'mass': heads.RegressionHead()}`
gives a model with one output per label (multi-task).

`head` holds the base class, `classification` the binary and multi-class
heads, `multi_label` and `regression` the others; `serving_methods` sets
TF Serving's method names on the heads' `classification` and `regression`
signatures.

Part of the base: a TrainSpec (`trainspec.spec`) builds its model, loss
and metrics with a head. May import: the base (`errors`, `system`).
Importing it loads no TensorFlow; the names below are re-exported from the
modules that hold them.
"""

from generic_trainer.heads.classification import BinaryClassHead
from generic_trainer.heads.classification import MultiClassHead
from generic_trainer.heads.head import Head
from generic_trainer.heads.multi_label import MultiLabelHead
from generic_trainer.heads.regression import RegressionHead

__all__ = ['BinaryClassHead', 'Head', 'MultiClassHead', 'MultiLabelHead',
           'RegressionHead']
