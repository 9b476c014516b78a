"""TrainSpec: say what only you know; GenericTrainer trains, evaluates, exports.

A module file defines one subclass instead of `run_fn`:

    class PenguinSpec(TrainSpec):
      label_key = 'species'

      def build_model(self):
        ...
        return keras.Model(inputs, outputs)

      def build_optimizer(self):
        return keras.optimizers.Adam(self.hparams.get('learning_rate', 1e-2))

      def build_loss(self):
        return keras.losses.SparseCategoricalCrossentropy()

GenericTrainer builds the datasets from the input artifacts, trains for the
requested steps or epochs with the fit loop and its handlers, evaluates on the
whole eval split every epoch, checkpoints, writes TensorBoard summaries and a
history file under model_run, and exports a SavedModel with a
`serving_default` signature on serialized tf.Example (and `serving_raw` on
raw feature tensors) that Evaluator and Pusher use as is.

Each `build_*` runs once: `spec.model`, `spec.optimizer`, `spec.loss` and
`spec.metrics` are built on first use and the same object is returned after
(`spec.user_handlers` is `handlers()`, called once, likewise),
so state shared between them (a vocabulary, a normalizer) lives on the spec.

With a head (`generic_trainer.heads`), `build_model()` returns the body, up
to the last hidden layer; `spec.model` is the body with the head's output
layer, and `spec.loss` and `spec.metrics` are the head's (plus the spec's
own `build_metrics()`). `generic_trainer.trainspec.outputs` says how label_key, head
and weight_key make the outputs.
"""

import abc
import functools
import os
from typing import Any, Dict, List, Optional, Union

from generic_trainer.errors import SpecError
from generic_trainer.trainspec import member_checks
from generic_trainer.trainspec import outputs as outputs_lib


class TrainSpec(abc.ABC):
  """Base class of a module file's training specification.

  Required members (a subclass missing one is refused when the module is
  loaded, before any training):
    label_key: Name of the label feature (after Transform, if any), or a
      list of names for a model with several outputs (then its outputs are
      a dict keyed by them). Not needed with a head per output.
    build_model(): Returns a Keras 3 model. Its inputs are named like the
      features it reads (a dict of `keras.Input(name=...)`). With a head,
      the body: a functional model whose output is the last hidden layer.
    build_optimizer(): Returns a Keras optimizer.
    build_loss(): Returns a Keras loss ({label: loss} for several outputs).
      Not with a head, which brings its own.

  Optional members:
    head: A head of `generic_trainer.heads` (output layer, loss, metrics,
      predictions, export signatures), or {label: head} for several
      outputs; None (default) when build_model and build_loss say it all.
    weight_key: A feature holding each example's weight in the loss (of
      every output; a head's own weight_key takes precedence).
    loss_weights: {label: weight} of the outputs' losses in the total.
    build_metrics(): Keras metrics, computed on train and on the whole eval
      split every epoch (default: none besides the loss; with a head, the
      head's, followed by these; {label: [metrics]} for several outputs).
    feature_keys: Features the model reads; None means every feature in the
      schema except the labels and weights. Of these, only those the
      model's inputs are named after are read.
    raw_label_key: With Transform, the label's name in the raw data, which
      serving does not receive (default: label_key).
    batch_size: Train batch size (default 32); eval_batch_size defaults to it.
    epochs: Number of epochs (default 1). With `train_args.num_steps`, the
      steps are spread over the epochs; without, each epoch reads the train
      split once.
    early_stopping: Keyword arguments of `keras.callbacks.EarlyStopping`
      (monitor, min_delta, patience, mode, baseline, restore_best_weights),
      or None for no early stopping.
    checkpoint: Keyword arguments of the checkpoint handler:
      `every_epochs` (default 1), or `every_steps`, and `best_only` with
      `monitor` and `mode`. None disables checkpoints.
    handlers(): Your own `keras.callbacks.Callback`s, called after the
      built-in ones.
    backend: The Keras 3 backend to train on: 'tensorflow' or 'jax'; None
      (default) means the component's `backend` (--backend for the
      command), else TensorFlow. A setting that differs from the spec's is
      refused. On JAX the training runs in a process with KERAS_BACKEND=jax
      and the export is still a TensorFlow SavedModel (docs/guides/jax.md).
    train_step(model, data): A custom train step for what `model.fit`'s
      default cannot express; see `keras.Model.train_step`. Return the
      logs dict. On JAX it is `train_step(model, state, data)` and returns
      `(logs, state)`: state is the tuple of (trainable, non-trainable,
      optimizer, metrics) variable values, and the gradient comes from
      `jax.value_and_grad` over `model.stateless_call` (a step written with
      tf.GradientTape is refused before training).
    preprocess(features): A function of the feature dict applied in the
      input pipeline and at serving time (default: identity). On JAX it
      is converted with jax2tf to run in the tf.data pipeline, so write it
      with `keras.ops` (not `tf.*`).
    shuffle_seed: The seed of the train data's order (default 0): every
      epoch is shuffled differently, but the same way in every process, so
      the workers of a multi-worker training share one order, and a resumed
      training reads on where the interrupted one stopped
      (docs/guides/resume-and-faults.md). None: a new order at every run, read and
      parsed a little faster (files and blocks taken as they come).
    cache: Where the parsed train and eval rows are kept after the first
      epoch, so that later epochs neither read nor parse the files: None
      (default) in memory when they likely fit in a quarter of the memory
      available, else on local disk (TMPDIR, removed after training) when
      they fit in half of its free space, else nowhere; True in memory;
      'disk' on local disk; False nowhere (every epoch reads and parses the
      files). The log says what was decided and why. Applies when every
      feature the model reads is dense (fixed shape in the schema).
    warm_start: When a base model is connected (`base_model`), start from
      its weights: True (default) loads every layer that matches by name and
      shape, 'strict' fails unless all do, False trains from scratch; or
      define `warm_start(self, model, base_model_dir)` to do it your way.
      Optimizer state is not carried over. See `loop.warm_start`.
    steps_per_execution: Train steps run per call into TensorFlow (Keras's
      `compile(steps_per_execution=...)`); it must divide the steps per
      epoch and the eval steps. None (default) picks the largest such value
      up to 32, which removes most per-step overhead for small models; but
      1 when one of your handlers() has batch-level hooks (so it sees every
      batch), with checkpoint `every_steps`, or under a distribution
      strategy. Batch-level hooks of the built-in handlers run once per
      execution.

  Available to the members:
    fn_args: The `FnArgs` of this run: the pipeline's, or the command's
      and the notebook Estimator's `LocalFnArgs`; None only for a spec
      built by hand.
    hparams: Hyperparameter values: the `hyperparameters` input's values, or
      the dict given to the Estimator.
  """

  label_key: Any = None
  head: Any = None
  weight_key: Optional[str] = None
  loss_weights: Optional[Dict[str, float]] = None
  feature_keys: Optional[List[str]] = None
  raw_label_key: Optional[str] = None
  batch_size: int = 32
  eval_batch_size: Optional[int] = None
  epochs: int = 1
  early_stopping: Optional[Dict[str, Any]] = None
  checkpoint: Optional[Dict[str, Any]] = {'every_epochs': 1}
  shuffle_seed: Optional[int] = 0
  cache: Union[None, bool, str] = None
  steps_per_execution: Optional[int] = None
  warm_start: Any = True
  backend: Optional[str] = None

  def __init__(self, fn_args=None, hparams: Optional[Dict[str, Any]] = None):
    self.fn_args = fn_args
    if hparams is None and fn_args is not None:
      hparams = fn_args.hyperparameters
    if hparams and isinstance(hparams.get('values'), dict):
      hparams = hparams['values']  # keras_tuner.HyperParameters config.
    self.hparams: Dict[str, Any] = dict(hparams or {})

  @abc.abstractmethod
  def build_model(self):
    """Returns the Keras model."""

  @abc.abstractmethod
  def build_optimizer(self):
    """Returns the Keras optimizer."""

  def build_loss(self):
    """Returns the Keras loss (with a head: the head's)."""
    return outputs_lib.head_losses(self.outputs)

  def build_metrics(self) -> list:
    """Returns the Keras metrics (default: none; a head adds its own)."""
    return []

  def handlers(self) -> list:
    """Returns your own Keras callbacks (default: none)."""
    return []

  def preprocess(self, features: Dict[str, Any]) -> Dict[str, Any]:
    """Maps the parsed feature dict before the model (default: identity)."""
    return features

  train_step = None  # Override with `def train_step(self, model, data)`.

  @functools.cached_property
  def outputs(self) -> list:
    """The outputs (`generic_trainer.trainspec.outputs.Output`: label, head, weight)."""
    return outputs_lib.outputs_of(self)

  @functools.cached_property
  def model(self):
    model = member_checks.model(self, self.build_model())
    if self.head is None:
      return model
    return outputs_lib.with_heads(model, self.outputs)

  @functools.cached_property
  def optimizer(self):
    return member_checks.optimizer(self, self.build_optimizer())

  @functools.cached_property
  def loss(self):
    return member_checks.loss(self, self.build_loss())

  @functools.cached_property
  def metrics(self):
    metrics = member_checks.metrics(self, self.build_metrics())
    if self.head is None:
      return metrics if isinstance(metrics, dict) else list(metrics)
    return outputs_lib.metrics_with_heads(self.outputs, metrics)

  @functools.cached_property
  def user_handlers(self) -> list:
    """`handlers()`, called once: the callbacks training runs with."""
    return member_checks.handlers(self, self.handlers())


def missing_members(spec_class: type) -> List[str]:
  """Names of required members a TrainSpec subclass does not define."""
  missing = set(getattr(spec_class, '__abstractmethods__', ()))
  if spec_class.head is None:
    if spec_class.build_loss is TrainSpec.build_loss:
      missing.add('build_loss (or a head)')
    if spec_class.label_key is None:
      missing.add('label_key')
  elif spec_class.label_key is None and not isinstance(spec_class.head, dict):
    missing.add('label_key')
  return sorted(missing)


def conflicting_members(spec_class: type) -> Optional[str]:
  """What a TrainSpec subclass declares twice, said as an error message;
  None when nothing is."""
  if spec_class.head is not None and (
      spec_class.build_loss is not TrainSpec.build_loss):
    return (f'The TrainSpec {spec_class.__name__} declares both a head and '
            'build_loss(): a head brings the loss of its kind of problem, '
            'so one of the two losses would be silently ignored. Remove '
            "build_loss() to use the head's loss, or remove head and give "
            'the output layer, loss and metrics yourself.')
  return None


def check_complete(spec_class: type, source: str = '') -> None:
  """Refuses a TrainSpec class that cannot train: a required member it
  does not define, or two members that say the same thing. The one check,
  at load (`usercode.module_loader`) and in a notebook's `Estimator`.

  Args:
    spec_class: The TrainSpec subclass.
    source: Where it comes from, for the message ("module_file='/m.py'"),
      or ''.

  Raises:
    SpecError: naming the members and what to do.
  """
  missing = missing_members(spec_class)
  if missing:
    where = f' ({source})' if source else ''
    raise SpecError(
        f'The TrainSpec {spec_class.__name__}{where} does not define the '
        f'required member(s): {", ".join(missing)}. Define them in the class '
        '(see `help(generic_trainer.TrainSpec)`). Expected those members. '
        f'Received: {spec_class.__name__} without them.')
  conflict = conflicting_members(spec_class)
  if conflict:
    raise SpecError(conflict)


def backend_refusal(spec_name: str, backend: str, running: str) -> SpecError:
  """The refusal of a TrainSpec whose `backend` this process's Keras does
  not compute with, where no other process can train it: the one message
  of `loop.spec_checks.check_backend` and of the plan of a notebook's
  Estimator."""
  return SpecError(
      f'{spec_name}.backend is {backend!r}, but Keras in '
      f'this process computes with {running!r}: Keras reads its backend '
      'once, when it is first imported. Expected Keras on '
      f'{backend!r}. Received: KERAS_BACKEND='
      f'{os.environ.get("KERAS_BACKEND")!r}. Train it with GenericTrainer '
      f'or the generic-trainer command, which start a {backend} '
      f'process for it, or set KERAS_BACKEND={backend} before '
      'anything imports keras (in a notebook, restart the kernel first).')
