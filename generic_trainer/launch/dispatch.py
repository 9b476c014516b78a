"""Where a training runs: the one place that decides.

  - N local worker processes, when `num_workers` > 1 and no TF_CONFIG
    makes this process a member of a cluster already (`local_cluster`);
  - a child process, when `tf.keras` in this process is not the Keras the
    component asks for and no longer can be (`keras_process`);
  - this process otherwise (`core.training`).

The executor calls `train` for the chief and for a TF_CONFIG worker alike;
a child process calls it again with `in_child=True`, where it always
trains in place.
"""

from generic_trainer.core import distribution
from generic_trainer.core import training
from generic_trainer.core.request import TrainingRequest
from generic_trainer.errors import TrainingProcessError
from generic_trainer.launch import keras_process


def train(request: TrainingRequest, in_child: bool = False) -> None:
  """Trains `request` where the settings say (see the module docstring).

  Raises:
    What the training raises (see `core.training.train`); TrainingProcessError
      when a child process cannot get the Keras it was started for.
  """
  from absl import logging  # pylint: disable=g-import-not-at-top
  if not in_child and distribution.launches_workers(request.exec_properties):
    from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
    local_cluster.run(request)
  elif keras_process.can_train_in_process(request.keras_version):
    training.train(request)
  elif in_child:
    raise TrainingProcessError(
        f'The training process was started for {request.keras_version}, '
        f'but tf.keras there is {keras_process.resolved_tf_keras()}: '
        'something imported TensorFlow with another TF_USE_LEGACY_KERAS '
        'first. Check that the environment does not set it.')
  else:
    logging.info('Training in a child process with %s.',
                 request.keras_version)
    keras_process.run_in_child(request)
