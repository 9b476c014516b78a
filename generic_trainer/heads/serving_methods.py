"""TF Serving's method names, set on the heads' signatures after export.

TF Serving's Classify and Regress look for a signature whose
`method_name` is `tensorflow/serving/classify` or `.../regress` when the
model server checks method names (`--enable_signature_method_name_check`);
TF2's `tf.saved_model.save` (and Keras's export) writes every signature as
`tensorflow/serving/predict`. `set_method_names` rewrites them in
`saved_model.pb`; TensorFlow's loader ignores method names, so nothing
else changes.
"""

import os
from typing import Dict, Optional

from generic_trainer.heads.head import CLASSIFICATION
from generic_trainer.heads.head import REGRESSION
from generic_trainer.system import atomic_files
from generic_trainer.system.lazy import saved_model_pb2
from generic_trainer.system.lazy import tf
from generic_trainer.keys import SAVED_MODEL_FILE

CLASSIFY = 'tensorflow/serving/classify'
REGRESS = 'tensorflow/serving/regress'
PREDICT = 'tensorflow/serving/predict'


def named_method(signature_name: str) -> Optional[str]:
  """The method a signature's name promises: CLASSIFY for `classification`
  and `<output>/classification`, REGRESS for `regression`..., else None."""
  last = signature_name.rsplit('/', 1)[-1]
  return {CLASSIFICATION: CLASSIFY, REGRESSION: REGRESS}.get(last)


def set_method_names(export_dir: str,
                     methods: Optional[Dict[str, str]] = None) -> None:
  """Sets the method names of an export's signatures.

  Args:
    export_dir: A SavedModel folder.
    methods: {signature: CLASSIFY or REGRESS}; None for `named_method` of
      every signature.
  """
  path = os.path.join(export_dir, SAVED_MODEL_FILE)
  with tf.io.gfile.GFile(path, 'rb') as f:
    saved_model = saved_model_pb2.SavedModel.FromString(f.read())
  for meta_graph in saved_model.meta_graphs:
    for name, signature in meta_graph.signature_def.items():
      method = methods.get(name) if methods is not None else named_method(
          name)
      if method:
        signature.method_name = method
  atomic_files.write_bytes(path, saved_model.SerializeToString())
