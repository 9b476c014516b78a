"""GenericTrainerSpec: TFX's TrainerSpec plus GenericTrainer's additions.

Built from `TrainerSpec`'s own dicts, so every parameter, input and output of
`tfx.components.Trainer` is here with the same type and optionality. Added:
  - input `statistics` (ExampleStatistics): fills `fn_args.num_examples`
    (TFX's own TrainerSpec has the same input from TFX 1.21);
  - parameter `keras_version` ('keras3' or 'tf_keras'): the Keras the
    training runs under (see `generic_trainer.system.keras_env`);
  - parameters `num_workers` and `strategy`: how many processes train
    together, with which tf.distribute strategy (see
    `generic_trainer.plan.settings` and the scaling-out guide);
  - parameter `allow_signature_change`: publish a model whose signatures
    differ from the base model's (see `generic_trainer.export_checks.signature_gate`);
  - parameter `max_restarts`: how many times a multi-worker training
    restarts its workers from the last checkpoint after one died (see
    `generic_trainer.launch.restarts`);
  - parameter `backend` ('tensorflow' or 'jax'): the Keras 3 backend the
    training computes with (see `generic_trainer.system.keras_env`);
  - input `parsed_rows` and output `updated_parsed_rows` (ParsedRows): the
    parsed rows an earlier execution kept, and those this one keeps for the
    next (see `generic_trainer.data.kept.cache`).
"""

from tfx.types import standard_artifacts
from tfx.types import standard_component_specs
from tfx.types.component_spec import ChannelParameter
from tfx.types.component_spec import ComponentSpec
from tfx.types.component_spec import ExecutionParameter
from tfx.types.system_executions import Train

from generic_trainer.keys import ALLOW_SIGNATURE_CHANGE_KEY
from generic_trainer.keys import BACKEND_KEY
from generic_trainer.keys import KERAS_VERSION_KEY
from generic_trainer.keys import MAX_RESTARTS_KEY
from generic_trainer.keys import POD_SETTINGS_KEY
from generic_trainer.keys import NUM_WORKERS_KEY
from generic_trainer.keys import STATISTICS_KEY
from generic_trainer.keys import STRATEGY_KEY
from generic_trainer.keys import PARSED_ROWS_KEY
from generic_trainer.keys import UPDATED_PARSED_ROWS_KEY
from generic_trainer.data.kept.artifact import ParsedRows

_TRAINER = standard_component_specs.TrainerSpec


class GenericTrainerSpec(ComponentSpec):
  """ComponentSpec of GenericTrainer."""

  PARAMETERS = {
      **_TRAINER.PARAMETERS,
      KERAS_VERSION_KEY: ExecutionParameter(type=str, optional=True),
      NUM_WORKERS_KEY: ExecutionParameter(type=(int, str), optional=True),
      STRATEGY_KEY: ExecutionParameter(type=str, optional=True),
      ALLOW_SIGNATURE_CHANGE_KEY: ExecutionParameter(type=(bool, int),
                                                     optional=True),
      BACKEND_KEY: ExecutionParameter(type=str, optional=True),
      MAX_RESTARTS_KEY: ExecutionParameter(type=int, optional=True),
      POD_SETTINGS_KEY: ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
      **_TRAINER.INPUTS,
      STATISTICS_KEY: ChannelParameter(
          type=standard_artifacts.ExampleStatistics, optional=True),
      PARSED_ROWS_KEY: ChannelParameter(type=ParsedRows, optional=True),
  }
  OUTPUTS = {
      **_TRAINER.OUTPUTS,
      UPDATED_PARSED_ROWS_KEY: ChannelParameter(type=ParsedRows,
                                                optional=True),
  }
  TYPE_ANNOTATION = Train
