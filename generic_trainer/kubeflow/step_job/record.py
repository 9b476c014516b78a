"""The chief's record of what it published: written by the job's chief
(`write_record`), read by the step once the job completed, which checks it
names this job and that the SavedModel is there (`read_record`), and put
on the step's output artifacts (`apply_record`)."""

import json
import os
from typing import Any, Dict, List, Mapping, Optional

from google.protobuf import json_format

from generic_trainer.errors import StepJobError
from generic_trainer.keys import SAVED_MODEL_FILE
from generic_trainer.system import atomic_files
from generic_trainer.system import paths
from generic_trainer.system.lazy import tf

# The record's file, in the step's ModelRun artifact.
RECORD_NAME = 'step-job-record.json'


def write_record(value: Optional[str],
                 outputs: Mapping[str, List[Any]]) -> None:
  """In the job's chief, after it published: the custom properties it
  attached to each output artifact, for the step (`read_record`), where
  `value` says (`plan.cluster.ClusterEnvironment.step_record`, the step's
  `keys.STEP_JOB_RECORD_ENV`). Does nothing outside a step's job (None)."""
  if not value:
    return
  where = json.loads(value)
  record = {'job': where['job'], 'nonce': where['nonce'], 'outputs': {
      key: [{prop: json_format.MessageToDict(v) for prop, v in
             a.mlmd_artifact.custom_properties.items()} for a in artifacts]
      for key, artifacts in outputs.items()}}
  tf.io.gfile.makedirs(os.path.dirname(where['path']))
  atomic_files.write_json(where['path'], record, sort_keys=True)


def read_record(path: str, name: str, nonce: str,
                model_uri: str) -> Dict[str, Any]:
  """The chief's record of job `name` (its `nonce`), after the step checked
  that the SavedModel is in the Model artifact.

  Raises:
    StepJobError: no record of this job, or no SavedModel.
  """
  try:
    with tf.io.gfile.GFile(path) as f:
      record = json.loads(f.read())
  except (tf.errors.NotFoundError, ValueError) as e:
    record = {'error': str(e)}
  if record.get('job') != name or record.get('nonce') != nonce:
    raise StepJobError(
        f'The job {name} completed, but its chief left no record of this '
        f'job at {path} ({record.get("error") or "another job wrote it"}). '
        'Expected the record the chief writes after it published. '
        f'Received: {record.get("job")!r}. Nothing was taken; run the '
        'pipeline again.')
  serving = paths.model_dirs(model_uri)[0]
  if not tf.io.gfile.exists(os.path.join(serving, SAVED_MODEL_FILE)):
    raise StepJobError(
        f'The job {name} completed, but the step\'s Model artifact holds no '
        f'SavedModel ({serving}/{SAVED_MODEL_FILE}). Expected the chief\'s '
        'validated export there. Received: none. Nothing was taken; run the '
        'pipeline again.')
  return record


def apply_record(record: Mapping[str, Any],
                 outputs: Mapping[str, List[Any]]) -> None:
  """Puts the chief's custom properties on the step's output artifacts,
  which TFX's entrypoint then writes to the executor-output file."""
  for key, artifacts in outputs.items():
    for artifact, props in zip(artifacts, record['outputs'].get(key, ())):
      for prop, value in props.items():
        target = artifact.mlmd_artifact.custom_properties[prop]
        target.Clear()
        json_format.ParseDict(value, target)
