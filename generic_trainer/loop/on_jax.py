"""What a TrainSpec does differently when Keras computes with JAX.

The input pipeline stays tf.data and the export stays a TensorFlow
SavedModel; in between, Keras's JAX trainer takes over `model.fit`.
Three things cannot stay as on TensorFlow:

  - `preprocess`, which runs in the tf.data pipeline: its `keras.ops` are
    JAX's, and JAX cannot take tf.data's symbolic tensors. It is converted
    with jax2tf into a TensorFlow function (lowered for CPU, where tf.data
    runs), with autograph off: tf.data's autograph would otherwise walk
    jax's own code (15-20 s measured, instead of 0.02 s).
  - The export. A tf.function calling a JAX model fails ("Cannot convert a
    symbolic tf.Tensor to a numpy array"), so Keras's ExportArchive
    converts `model(preprocess(features))` with jax2tf (native
    serialization: one XlaCallModule op holding StableHLO, which the
    serving TensorFlow runs with XLA), lowered for CPU and CUDA; the
    TensorFlow signatures parse tf.Example and apply Transform, then call
    it. Its variables are named by their Keras path, as the TensorFlow
    backend names them, so warm start reads a JAX export as a TensorFlow
    one, and the signatures are those of a TensorFlow export, so the
    signature gate lets a model change backends.
  - A custom `train_step`: Keras's JAX trainer calls
    `train_step(state, data)` and expects `(logs, state)` back (pure
    functions: a tf.GradientTape over the variables sees nothing). See
    `checks.check_train_step`, which refuses a TensorFlow step on JAX.

Both jax2tf functions are serialized for the StableHLO version the
installed TensorFlow reads (`_stablehlo_for_tensorflow`): jax 0.4.34 writes
StableHLO 1.5.0 (a version 4 weeks older than itself), TensorFlow 2.16's
XlaCallModule reads up to 0.17.7 and fails on newer ops ("unregistered
operation 'vhlo.gather_v2'", from an Embedding layer; the same failure:
google-research/perch-hoplite#35).

Features must be dense numbers (JAX has no strings and no sparse or ragged
arrays): `check_features` refuses others before training.

Several steps per execution (`fit_loop.steps_per_execution`, chosen as on
TensorFlow) do less on JAX: Keras 3.12's JAX trainer runs them as a Python
loop of jitted steps, each batch converted from tf.data to arrays, so they
save the callbacks' per-step work but not the dispatch (benchmark model,
1M rows: 290k examples/s with 32, 190-240k with 1; TensorFlow, which runs
the 32 steps inside one graph call, 360-690k).
"""

import collections.abc
import contextlib
from typing import Any, Callable, Dict, Iterator

import tensorflow as tf
from tensorflow.compiler.mlir.stablehlo import stablehlo

from generic_trainer.errors import SpecError
from generic_trainer.keys import JAX_BACKEND
from generic_trainer.system import versions
from generic_trainer.system.lazy import jax2tf
from generic_trainer.system.lazy import jax_export
from generic_trainer.system.lazy import keras_export_utils
import keras

# Where the exported model may be served: the serving TensorFlow runs the
# module XLA lowered for its device (docs/guides/jax.md).
SERVING_PLATFORMS = ('cpu', 'cuda')


def active() -> bool:
  """Whether Keras in this process computes with JAX."""
  return keras.backend.backend() == JAX_BACKEND


def check_features(features_spec: Dict[str, Any]) -> None:
  """Every feature the model gets is a dense number tensor.

  `features_spec`: {name: tf.TypeSpec} of a dataset's features.

  Raises:
    SpecError: naming the first feature that is not.
  """
  for name, type_spec in sorted(features_spec.items()):
    if not isinstance(type_spec, tf.TensorSpec):
      kind = type(type_spec).__name__.replace('Spec', '')
    elif type_spec.dtype == tf.string:
      kind = 'string Tensor'
    else:
      continue
    raise SpecError(
        f'On the JAX backend every feature the model reads must be a dense '
        f'tensor of numbers: JAX has no strings and no sparse or ragged '
        f'arrays. Received: {name!r}, a {kind}. Make it '
        'a fixed-length number (in the schema, or with Transform, e.g. '
        'tft.compute_and_apply_vocabulary), leave it out of '
        "feature_keys, or train on TensorFlow (backend='tensorflow').")


def tf_preprocess(spec, features_spec: Dict[str, Any]) -> Callable:
  """`spec.preprocess` as a TensorFlow function of feature dicts shaped as
  `features_spec` (batch first), for tf.data on the JAX backend."""
  converted = jax2tf.convert(
      spec.preprocess, polymorphic_shapes=[_polymorphic(features_spec)],
      with_gradient=False, native_serialization_platforms=('cpu',))
  return tf.autograph.experimental.do_not_convert(_for_tensorflow(converted))


def _for_tensorflow(fn: Callable) -> Callable:
  """`fn`, serializing what jax2tf lowers while it runs (it lowers when
  TensorFlow traces it) for the installed TensorFlow."""

  def call(*args):
    with _stablehlo_for_tensorflow():
      return fn(*args)

  return call


@contextlib.contextmanager
def _stablehlo_for_tensorflow() -> Iterator[None]:
  """While in it, jax serializes StableHLO no newer than the version the
  installed TensorFlow's XLA reads (see the module docstring)."""
  hlo = jax_export.hlo
  jax_choice = hlo.get_version_from_compatibility_requirement
  target = min(jax_choice(hlo.StablehloCompatibilityRequirement.WEEK_4),
               stablehlo.get_current_version(),
               key=lambda v: tuple(int(p) for p in v.split('.')))
  hlo.get_version_from_compatibility_requirement = lambda _: target
  try:
    yield
  finally:
    hlo.get_version_from_compatibility_requirement = jax_choice


def _polymorphic(features_spec: Dict[str, Any]) -> Dict[str, str]:
  """jax2tf's polymorphic shapes: 'b' for the batch, shared by all
  features; a name of its own for every other unknown dimension."""
  names = iter(f'd{i}' for i in range(10**6))
  return {k: '(' + ', '.join(
      ['b'] + [str(d) if d is not None else next(names)
               for d in list(s.shape)[1:]]) + ')'
          for k, s in features_spec.items()}


def export_archive():
  """A `keras.export.ExportArchive` that also gives the jax2tf function of
  an endpoint without making it a signature (`jax2tf_function`), and names
  its variables by their Keras path ('dense_1/kernel', as on TensorFlow;
  Keras's JAX archive names them 'kernel').

  It subclasses the class `ExportArchive()` builds on JAX, which is
  ExportArchive itself up to Keras 3.13 and the backend's own archive from
  Keras 3.14 (`system.versions`): a subclass of ExportArchive would not be
  what Keras 3.14 builds, and its overrides would be dropped."""
  factory = versions.export_archive_is_a_factory()

  class Archive(versions.export_archive_class()):

    def _convert_to_tf_variable(self, backend_variable):
      return tf.Variable(backend_variable.value, dtype=backend_variable.dtype,
                         trainable=backend_variable.trainable,
                         name=backend_variable.path)

    def jax2tf_function(self, fn, input_signature):
      """`fn` (of the tracked variables) as a TensorFlow function: the JAX
      archive's conversion, which ExportArchive.add_endpoint would also
      register as a signature."""
      jax2tf_kwargs = {'with_gradient': False,
                       'native_serialization_platforms': SERVING_PLATFORMS}
      if factory:  # Keras 3.14+: the backend's hook, given TensorSpecs.
        return self._backend_add_endpoint(
            'model', fn, keras.tree.map_structure(
                keras_export_utils.make_tf_tensor_spec, input_signature),
            jax2tf_kwargs=jax2tf_kwargs)
      return super(keras.export.ExportArchive, self).add_endpoint(
          'model', fn, input_signature, jax2tf_kwargs=jax2tf_kwargs)

  return Archive()


def model_function(archive, spec, model, features_spec: Dict[str, Any]):
  """`model(spec.preprocess(features))` in inference mode, as a TensorFlow
  function of feature dicts shaped as `features_spec`; `archive` has
  tracked `model`."""
  return _for_tensorflow(archive.jax2tf_function(
      lambda features: model(spec.preprocess(features), training=False),
      [features_spec]))


def train_step(spec) -> Callable:
  """The spec's JAX `train_step(model, state, data)`, refusing (when JAX
  traces it) one that does not return `(logs, state)`."""

  def step(model, state, data):
    result = spec.train_step(model, state, data)
    if not (isinstance(result, tuple) and len(result) == 2 and
            isinstance(result[0], collections.abc.Mapping) and result[0]):
      raise SpecError(
          'TrainSpec.train_step must return (logs, state) on JAX: the logs '
          "dict, e.g. {'loss': loss}, and the new state tuple. Received: "
          f'{type(result).__name__} {result!r:.100}. Return both at the end '
          'of train_step.')
    return result

  return step
