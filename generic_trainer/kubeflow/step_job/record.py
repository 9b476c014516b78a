"""The chief's record of what it published: written by the job's chief
(`write_record`), read by the step once the job completed, which checks it
names this job and that the SavedModel is the one the chief published
(`read_record`), and put on the step's output artifacts (`apply_record`).

The record carries a digest of the published SavedModel (`model_digest`:
sha256 over `saved_model.pb` and every file under `variables/`, each with
its name and size), computed by the chief after publication and computed
again by the step before it attaches anything (issue 55). The job's name
and nonce say which job the record is of; they are no secret (the nonce is
in the job's annotation and every pod's environment), so without the
digest a record and a 0-byte `saved_model.pb` that anything writing the
Model and ModelRun folders put there were taken. With it, a model changed
or replaced after the chief published, or a record left by another job, is
refused; a writer that can replace both the model and the record with
consistent ones is the bucket's owner, which no check here can stop.
"""

import hashlib
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

# The Model output's key, TFX's `standard_component_specs.MODEL_KEY` (not
# imported: it costs the step seconds).
MODEL_KEY = 'model'

# The SavedModel's folder of variables, as `tf.saved_model` writes it.
_VARIABLES_DIR = 'variables'


def model_digest(model_uri: str) -> str:
  """'sha256:<hex>' over the serving SavedModel of the Model artifact at
  `model_uri`: `saved_model.pb` and every file under `variables/`, in
  order of their names, each as its name, its size and its bytes.

  Raises:
    tf.errors.NotFoundError: no `saved_model.pb`.
  """
  serving = paths.model_dirs(model_uri)[0]
  names = [SAVED_MODEL_FILE]
  variables = os.path.join(serving, _VARIABLES_DIR)
  if tf.io.gfile.isdir(variables):
    for folder, _, files in tf.io.gfile.walk(variables):
      rel = os.path.relpath(folder, serving)
      names.extend(os.path.join(rel, f) for f in files)
  digest = hashlib.sha256()
  for name in sorted(names):
    with tf.io.gfile.GFile(os.path.join(serving, name), 'rb') as f:
      data = f.read()
    digest.update(f'{name}\0{len(data)}\0'.encode('utf-8'))
    digest.update(data)
  return 'sha256:' + digest.hexdigest()


def write_record(value: Optional[str],
                 outputs: Mapping[str, List[Any]]) -> None:
  """In the job's chief, after it published: the custom properties it
  attached to each output artifact, for the step (`read_record`), where
  `value` says (`plan.cluster.ClusterEnvironment.step_record`, the step's
  `keys.STEP_JOB_RECORD_ENV`). Does nothing outside a step's job (None)."""
  if not value:
    return
  where = json.loads(value)
  record = {'job': where['job'], 'nonce': where['nonce'],
            'model_digest': model_digest(outputs[MODEL_KEY][0].uri),
            'outputs': {
      key: [{prop: json_format.MessageToDict(v) for prop, v in
             a.mlmd_artifact.custom_properties.items()} for a in artifacts]
      for key, artifacts in outputs.items()}}
  tf.io.gfile.makedirs(os.path.dirname(where['path']))
  atomic_files.write_json(where['path'], record, sort_keys=True)


def read_record(path: str, name: str, nonce: str,
                model_uri: str) -> Dict[str, Any]:
  """The chief's record of job `name` (its `nonce`), after the step checked
  that the Model artifact holds the SavedModel the chief published (its
  digest, `model_digest`).

  Raises:
    StepJobError: no record of this job, no SavedModel, or not the one
      the chief published.
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
  found = model_digest(model_uri)
  if record.get('model_digest') != found:
    raise StepJobError(
        f'The job {name} completed, but the SavedModel in the step\'s Model '
        f'artifact ({serving}) is not the one its chief published: its '
        f'digest is {found}. Expected the digest in the chief\'s record '
        f'({path}): {record.get("model_digest")!r}. Received: another '
        'model (changed or replaced after the chief published, or a record '
        'another job wrote). Nothing was taken; check who else writes the '
        'Model and ModelRun folders, and run the pipeline again.')
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
