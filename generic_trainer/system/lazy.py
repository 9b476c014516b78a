"""The heavy modules the package uses, declared once, imported on first use.

Importing `tfx.v1` costs 20-30 s, TensorFlow about 8 s; TFX, Apache Beam and
tfx_bsl's Beam parts must stay out of a TrainSpec's training path; and two
imports decide the process (`keras_env`): TF reads `TF_USE_LEGACY_KERAS`
when `tf.keras` is first used, Keras reads `KERAS_BACKEND` when `keras` is
first imported (and `tensorflow_transform` sets the first when it is
imported). So a module that must import light, or leave those undecided,
imports the module object declared here, at its top, and uses it inside
its functions:

    from generic_trainer.system.lazy import tf

    def records(path):
      return tf.data.TFRecordDataset(path)

The import happens where the first attribute is read, as Keras does for its
optional modules (`keras/src/utils/module_utils.py`, `LazyModule`); a module
that is not installed raises ImportError naming it and what installs it.
A module never reads these objects while it is itself being imported (in a
default argument, a class body, a module constant or an evaluated
annotation): that would import them then.

Each module is declared once, here; this module imports nothing heavy, so
any module may import it (`tests/test_layout.py` checks all three).
"""

import importlib
import sys
import types
from typing import Optional

_PACKAGE = 'tfx-generic-trainer'
# Attributes that tools read on any global they meet (pytest's collection
# and fixture lookup, `inspect.unwrap`): before the import they are
# missing, so that collecting a module that holds a LazyModule imports
# nothing. No module defines them.
_PROBES = frozenset({'__test__', '__wrapped__', '__func__', '_mock_name',
                     '_pytestfixturefunction', '_fixture_function_marker'})


class LazyModule:
  """A module imported when one of its attributes is first read.

  Once imported, this object reads the module's own namespace (its
  `__dict__` is the module's): an attribute costs one dict lookup, as on
  the module, and what is set on the module later (a test's patch) is
  what the caller gets. What the namespace lacks goes to the module
  (`__getattr__`), so a module's own `__getattr__` still answers.

  Args:
    name: The module's dotted name ('tensorflow',
      'tfx.types.artifact_utils').
    package: The distribution that installs it, for the message (default:
      the first part of `name`).
    extra: The extra of tfx-generic-trainer that installs it, when it is an
      optional dependency.
  """

  # Slots, not the __dict__ that becomes the module's.
  __slots__ = ('_lazy_name', '_lazy_package', '_lazy_extra', '_lazy_module',
               '__dict__')

  def __init__(self, name: str, package: Optional[str] = None,
               extra: Optional[str] = None):
    self._lazy_name = name
    self._lazy_package = package or name.split('.')[0]
    self._lazy_extra = extra
    self._lazy_module = None

  def _lazy_load(self) -> types.ModuleType:
    try:
      module = importlib.import_module(self._lazy_name)
    except ImportError as e:  # ModuleNotFoundError stays one.
      error = (ModuleNotFoundError if isinstance(e, ModuleNotFoundError)
               else ImportError)
      raise error(self._lazy_missing(e), name=self._lazy_name) from e
    self._lazy_module = module
    if type(module) is types.ModuleType:  # pylint: disable=unidiomatic-typecheck
      # Not a module subclass, whose class may answer for its namespace.
      self.__dict__ = vars(module)
    return module

  def _lazy_missing(self, error: ImportError) -> str:
    if self._lazy_extra:
      how = (f"the '{self._lazy_extra}' extra installs it: pip install "
             f"'{_PACKAGE}[{self._lazy_extra}]'")
    elif self._lazy_package in sys.stdlib_module_names:
      how = ("it is part of Python's standard library, which this Python "
             'was built without')
    else:
      how = (f'the package {self._lazy_package} installs it: pip install '
             f'{self._lazy_package}')
    return (f'GenericTrainer needs the module {self._lazy_name!r} here, '
            f'which cannot be imported ({error}). Expected it installed; '
            f'{how}.')

  def __getattr__(self, attr: str):
    if attr.startswith('_lazy_'):  # A slot not set yet (no __init__).
      raise AttributeError(attr)
    module = self._lazy_module
    if module is None:
      if attr in _PROBES:
        raise AttributeError(attr)
      module = self._lazy_load()
    return getattr(module, attr)

  def __repr__(self) -> str:
    imported = (self._lazy_module is not None or
                self._lazy_name in sys.modules)
    state = 'imported' if imported else 'not imported yet'
    return f'<LazyModule {self._lazy_name!r} ({state})>'


def installed(module: LazyModule) -> bool:
  """Whether `module` imports (importing it now, if it does)."""
  try:
    module._lazy_load()  # pylint: disable=protected-access
  except ImportError:
    return False
  return True


# TensorFlow and Keras: importing them costs seconds, and decides the
# process (`system.keras_env`).
tf = LazyModule('tensorflow')
tf_deprecation = LazyModule('tensorflow.python.util.deprecation',
                            package='tensorflow')
saved_model_pb2 = LazyModule('tensorflow.core.protobuf.saved_model_pb2',
                             package='tensorflow')
keras = LazyModule('keras')
# Keras's own TensorSpecs of an export signature (`loop.on_jax`, Keras 3.14+).
keras_export_utils = LazyModule('keras.src.export.export_utils',
                                package='keras')
tf_keras = LazyModule('tf_keras', package='tf-keras')
np = LazyModule('numpy')
# Importing tensorflow_transform sets TF_USE_LEGACY_KERAS when unset.
tft = LazyModule('tensorflow_transform', package='tensorflow-transform')
saved_transform_io_v2 = LazyModule(
    'tensorflow_transform.saved.saved_transform_io_v2',
    package='tensorflow-transform')
schema_pb2 = LazyModule('tensorflow_metadata.proto.v0.schema_pb2',
                        package='tensorflow-metadata')
statistics_pb2 = LazyModule('tensorflow_metadata.proto.v0.statistics_pb2',
                            package='tensorflow-metadata')
# tfx_bsl: `public.tfxio` imports Apache Beam (about 4 s); the others do
# not.
dataset_options = LazyModule('tfx_bsl.tfxio.dataset_options',
                             package='tfx-bsl')
dataset_util = LazyModule('tfx_bsl.tfxio.dataset_util', package='tfx-bsl')
tensor_representation_util = LazyModule(
    'tfx_bsl.tfxio.tensor_representation_util', package='tfx-bsl')
tfxio = LazyModule('tfx_bsl.public.tfxio', package='tfx-bsl')
# TFX: seconds to import, and off a TrainSpec's training path.
artifact_utils = LazyModule('tfx.types.artifact_utils')
standard_artifacts = LazyModule('tfx.types.standard_artifacts')
standard_component_specs = LazyModule('tfx.types.standard_component_specs')
json_utils = LazyModule('tfx.utils.json_utils')
io_utils = LazyModule('tfx.utils.io_utils')
udf_utils = LazyModule('tfx.components.util.udf_utils')
fileio = LazyModule('tfx.dsl.io.fileio')
# The optional extras.
kubeflow_v2_entrypoint_utils = LazyModule(
    'tfx.orchestration.kubeflow.v2.container.kubeflow_v2_entrypoint_utils',
    extra='kubeflow')
kubeflow_v2_dag_runner = LazyModule(
    'tfx.orchestration.kubeflow.v2.kubeflow_v2_dag_runner', extra='kubeflow')
pipeline_spec_pb2 = LazyModule('kfp.pipeline_spec.pipeline_spec_pb2',
                               extra='kubeflow')
k8s_client = LazyModule('kubernetes.client', extra='kubeflow')
k8s_config = LazyModule('kubernetes.config', extra='kubeflow')
k8s_watch = LazyModule('kubernetes.watch', extra='kubeflow')
# A TFJob manifest checked against its schema: TFX 1.16's environment has
# jsonschema, TFX 1.21's does not (it would add four packages).
jsonschema = LazyModule('jsonschema', extra='kubeflow')
kubeflow_trainer_api = LazyModule('kubeflow_trainer_api', extra='kubeflow')
kubeflow_trainer_api_models = LazyModule('kubeflow_trainer_api.models',
                                         extra='kubeflow')
# The Training Operator's SDK (TFJob models), which no extra installs.
kubeflow_training = LazyModule('kubeflow.training',
                               package='kubeflow-training')
kubeflow_training_models = LazyModule('kubeflow.training.models',
                                      package='kubeflow-training')
jax2tf = LazyModule('jax.experimental.jax2tf', extra='jax')
jax_export = LazyModule('jax._src.export._export', extra='jax')
# absl's logging: light, but absl is TFX's and TensorFlow's, kept out of
# what must import light.
absl_logging = LazyModule('absl.logging', package='absl-py')
ctypes = LazyModule('ctypes')
