"""Where a training runs: the one place that decides.

  - N local worker processes, when `num_workers` > 1 and no TF_CONFIG
    makes this process a member of a cluster already (`local_cluster`);
  - a child process, when `tf.keras` in this process is not the Keras the
    component asks for and no longer can be (`keras_process`);
  - a child process, when the training's Keras backend (the component's
    `backend`, else the TrainSpec's) is not this process's
    (`backend_process`): a JAX training in a TensorFlow process;
  - this process otherwise (`core.training`).

The executor calls `train` for the chief and for a TF_CONFIG worker alike;
a child process calls it again with `in_child=True`, where it always
trains in place. The backend is known once the entry point is loaded (a
TrainSpec may name it), so the module is loaded here, before the choice,
and handed to the training when it runs here. What cannot train on JAX
(tf.keras 2, several workers, a tf.distribute strategy) is refused here,
before any training.
"""

import os
from typing import Optional

from generic_trainer.core import args
from generic_trainer.core import distribution
from generic_trainer.core import module_loader
from generic_trainer.core import training
from generic_trainer.core.request import TrainingRequest
from generic_trainer.errors import TrainingProcessError
from generic_trainer.keys import NUM_WORKERS_KEY, STRATEGY_KEY, TF_CONFIG_ENV
from generic_trainer.launch import backend_process
from generic_trainer.launch import keras_process


def train(request: TrainingRequest, in_child: bool = False) -> None:
  """Trains `request` where the settings say (see the module docstring).

  Raises:
    What the training raises (see `core.training.train`); TrainingProcessError
      when a child process cannot get the Keras it was started for;
      InvalidArgumentError when the backend does not fit the settings.
  """
  from absl import logging  # pylint: disable=g-import-not-at-top
  if not in_child and distribution.launches_workers(request.exec_properties):
    # A TrainSpec's own backend is checked by each worker, as it loads it.
    _check_backend_fits(request, request.backend)
    from generic_trainer.launch import local_cluster  # pylint: disable=g-import-not-at-top
    local_cluster.run(request)
  elif not keras_process.can_train_in_process(request.keras_version):
    if in_child:
      raise TrainingProcessError(
          f'The training process was started for {request.keras_version}, '
          f'but tf.keras there is {keras_process.resolved_tf_keras()}: '
          'something imported TensorFlow with another TF_USE_LEGACY_KERAS '
          'first. Check that the environment does not set it.')
    # The component's backend goes to the child with the Keras version; a
    # TrainSpec's own is read there (see below).
    _check_backend_fits(request, request.backend)
    logging.info('Training in a child process with %s.',
                 request.keras_version)
    keras_process.run_in_child(request)
  else:
    run_fn = module_loader.load_run_fn(request.exec_properties)
    spec_class = getattr(run_fn, 'train_spec', None)
    backend = args.resolve_backend(request.backend, spec_class)
    _check_backend_fits(request, backend, spec_class)
    if trains_here(backend):
      training.train(request, run_fn)
    elif in_child:
      running = backend_process.process_backend()
      if request.backend:
        why = ('something imported Keras first with another KERAS_BACKEND. '
               'Check that the module does not set it.')
      else:
        why = (f'{spec_class.__name__}.backend is read only here, in a '
               f'process started on {running} for keras_version='
               f'{request.keras_version!r}. Set backend={backend!r} on the '
               f'component (or --backend {backend}), so that the process '
               'starts on it.')
      raise TrainingProcessError(
          f'The training asks for the {backend} backend, but Keras in this '
          f'training process runs on {running}: {why}')
    else:
      logging.info('Training in a child process on the %s backend.', backend)
      backend_process.run_in_child(request, backend)


def trains_here(backend: Optional[str]) -> bool:
  """Whether a training on `backend` (None: the process's own) runs in this
  process; else `train` runs it in a child. The `generic-trainer` command
  asks it before taking its in-process TrainSpec path."""
  return backend_process.can_train_in_process(backend)


def _check_backend_fits(request: TrainingRequest, backend: Optional[str],
                        spec_class: Optional[type] = None) -> None:
  """Refuses a JAX training the settings or the cluster cannot give."""
  props = request.exec_properties
  source = args.backend_source(request.backend, spec_class, backend)
  cluster_size = distribution.role_from_tf_config(
      os.environ.get(TF_CONFIG_ENV)).num_workers
  args.check_backend_fits(backend, source, request.keras_version,
                          props.get(NUM_WORKERS_KEY), cluster_size,
                          props.get(STRATEGY_KEY))
