"""TrainingRequest: everything one training needs, in one object.

The executor builds it; whichever process trains receives it: this one
(`core.training`), a child under the other Keras or a local worker
(`launch`), as JSON in between. Keeping it one object is what keeps every
path passing the same things (a `checkpoint_dir` included).
"""

from typing import Any, Dict, List, Optional

import attr


@attr.s(frozen=True)
class TrainingRequest:
  """The inputs, settings and output places of one training.

  Attributes:
    input_dict: The component's input artifacts, by key.
    output_dict: Its output artifacts (Model, ModelRun), by key.
    exec_properties: Its execution properties (train_args, module_file...).
    serving_dir: Where the entry point exports the serving SavedModel: the
      staging folder of the Model artifact for the chief, scratch for the
      other workers.
    eval_dir: Where an eval SavedModel may go, beside it.
    checkpoint_dir: Where the training checkpoints, and resumes from after
      a kill (`generic_trainer.resume`); None: no resume.
  """
  input_dict = attr.ib(type=Dict[str, List[Any]])
  output_dict = attr.ib(type=Dict[str, List[Any]])
  exec_properties = attr.ib(type=Dict[str, Any])
  serving_dir = attr.ib(type=str)
  eval_dir = attr.ib(type=str)
  checkpoint_dir = attr.ib(type=Optional[str], default=None)

  @property
  def keras_version(self) -> Optional[str]:
    """'keras3', 'tf_keras', or None (whatever the process has)."""
    from generic_trainer.keys import KERAS_VERSION_KEY  # pylint: disable=g-import-not-at-top
    return self.exec_properties.get(KERAS_VERSION_KEY) or None

  @property
  def backend(self) -> Optional[str]:
    """'tensorflow', 'jax', or None (the TrainSpec's, else the process's)."""
    from generic_trainer.keys import BACKEND_KEY  # pylint: disable=g-import-not-at-top
    return self.exec_properties.get(BACKEND_KEY) or None

  def with_scratch_outputs(self, root: str) -> 'TrainingRequest':
    """This request with Model and ModelRun copies under `root`, for a
    worker whose export and logs are thrown away (see
    `distribution.scratch_outputs`)."""
    from generic_trainer.core import distribution  # pylint: disable=g-import-not-at-top
    outputs, serving_dir, eval_dir = distribution.scratch_outputs(
        self.output_dict, root)
    return attr.evolve(self, output_dict=outputs, serving_dir=serving_dir,
                       eval_dir=eval_dir)

  def to_json(self) -> Dict[str, Any]:
    """A JSON-able dict: artifacts as TFX serialises them."""
    from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
    from tfx.utils import json_utils  # pylint: disable=g-import-not-at-top
    return {
        'input_dict': artifact_utils.jsonify_artifact_dict(self.input_dict),
        'output_dict': artifact_utils.jsonify_artifact_dict(self.output_dict),
        'exec_properties': json_utils.dumps(self.exec_properties),
        'serving_dir': self.serving_dir,
        'eval_dir': self.eval_dir,
        'checkpoint_dir': self.checkpoint_dir,
    }

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> 'TrainingRequest':
    from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
    from tfx.utils import json_utils  # pylint: disable=g-import-not-at-top
    return cls(
        input_dict=artifact_utils.parse_artifact_dict(value['input_dict']),
        output_dict=artifact_utils.parse_artifact_dict(value['output_dict']),
        exec_properties=json_utils.loads(value['exec_properties']),
        serving_dir=value['serving_dir'], eval_dir=value['eval_dir'],
        checkpoint_dir=value.get('checkpoint_dir'))

  def model_run_dir(self) -> str:
    """The ModelRun artifact's URI (logs, history, workers.json)."""
    from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
    from tfx.types import standard_component_specs as keys  # pylint: disable=g-import-not-at-top
    return artifact_utils.get_single_uri(self.output_dict[keys.MODEL_RUN_KEY])

