"""Where the supported releases' APIs differ, decided here by what is installed.

GenericTrainer runs beside TFX 1.16 (TensorFlow 2.16, Keras 3.12, jax
0.4.34) and TFX 1.21 (TensorFlow 2.21, Keras 3.12 on Python 3.10 and 3.15
on 3.11 and later, jax 0.6 to 0.12): docs/getting-started/install.md has
the matrix. Where an API we use differs between them, this module alone
decides which one this process has, by asking the installed library (a
probe of the API itself, not a version string), once; the code that uses
the API asks here. Nothing else in the package compares versions.

| difference | where it changed | decided by | asked by |
|---|---|---|---|
| `keras.export.ExportArchive()` builds the backend's own archive class | Keras 3.14 (Keras 3.12 and 3.13: ExportArchive inherits the backend's archive) | `export_archive_is_a_factory`: an ExportArchive() that is not an ExportArchive | `loop.on_jax` |
| `tensorboard` is installed, which `tf.summary` (Keras's TensorBoard callback) needs | TensorFlow 2.20 (up to 2.19 TensorFlow installs it) | `tensorboard_installed`: the package is found | `loop.fit_loop` |

It also reads, for what a run says it trained on (`keras_env.trained_on`),
the release of the Keras a training uses (`keras_release`): nothing is
chosen by it.

TFX 1.21's own Trainer also takes the `statistics` input that
GenericTrainer adds: `component.spec` builds its inputs from TFX's and adds
the same channel, which is the same on both.
"""

import functools
import importlib.metadata
import importlib.util

from generic_trainer.system.lazy import keras


@functools.lru_cache(maxsize=None)
def export_archive_class() -> type:
  """The class of a SavedModel export archive on this process's Keras
  backend: `keras.export.ExportArchive` itself up to Keras 3.13; from Keras
  3.14 `ExportArchive()` returns an instance of the backend's own class (on
  JAX, `JaxExportArchive`), which a subclass of ExportArchive never is."""
  return type(keras.export.ExportArchive())


def export_archive_is_a_factory() -> bool:
  """Whether `keras.export.ExportArchive()` builds the backend's own class
  (Keras 3.14 and later). The backend's conversion of an endpoint is then
  its `_backend_add_endpoint(name, fn, input_signature, **kwargs)`, given
  TensorSpecs; before, it was the `add_endpoint` of ExportArchive's base
  class, given the signature as it is."""
  return export_archive_class() is not keras.export.ExportArchive


def tensorboard_installed() -> bool:
  """Whether `tensorboard` is installed (without importing it): TensorFlow
  2.20 and later no longer install it, and without it every `tf.summary`
  write, so Keras's TensorBoard callback, fails (TBNotInstalledError)."""
  return importlib.util.find_spec('tensorboard') is not None


def keras_release(tf_keras: bool) -> str:
  """'Keras 3.12.4', or with `tf_keras` 'tf_keras 2.16.0': the installed
  release of the Keras a training uses."""
  if tf_keras:
    return f'tf_keras {importlib.metadata.version("tf_keras")}'
  return f'Keras {keras.__version__}'
