"""TFX 1.16's own Trainer executor tests, with GenericExecutor as the
executor; nothing else of them changed.

Not a test module of its own (its name does not start with test_): TFX's
test module files are tf.keras 2 code, so `test_tfx_trainer_executor.py`
runs this file in a pytest of its own with TF_USE_LEGACY_KERAS=1, which
must be set before TensorFlow first resolves tf.keras.
"""

from tfx.components.trainer import executor_test as tfx_executor_test

from generic_trainer.component.executor import GenericExecutor


class TfxTrainerExecutorTestWithGenericExecutor(tfx_executor_test.ExecutorTest):
  """testDo, testDoWithHyperParameters, testMultipleArtifacts."""

  def setUp(self):
    super().setUp()
    self._executor = GenericExecutor()


del tfx_executor_test  # Collect the subclass only.
