"""Writes the pinned JSON Schemas of Kubeflow Trainer v2's TrainJob and
TrainingRuntime that tests/test_trainjob.py validates against.

They come from the project's own API models, `kubeflow-trainer-api`
(pydantic models that the Trainer project generates from the OpenAPI of
its Go types, the same source as its CRDs' openAPIV3Schema), at the version
pinned below. The CRD files themselves (manifests/base/crds/ of
kubeflow/trainer) could not be fetched where this was written (no GitHub),
so the schemas are the models' own, written with `model_json_schema`,
with one correction: the generator's oneOf wrappers (a Quantity, an
IntOrString) are pydantic objects holding `actual_instance`, and their
schema describes that object; on the wire, and in the CRD, the value is
the number or the string itself, so `on_the_wire` puts those types back.

    pip install kubeflow-trainer-api==2.3.0
    python scripts/kubeflow_schemas.py tests/schemas
"""

import json
import os
import sys

VERSION = '2.3.0'


def on_the_wire(schema):
  """The schema with each oneOf wrapper replaced by the types it holds."""
  for name, definition in schema.get('$defs', {}).items():
    held = definition.get('properties', {}).get('actual_instance')
    if held:
      schema['$defs'][name] = {
          'title': definition.get('title', name),
          'anyOf': [t for t in held['anyOf'] if t != {'type': 'null'}]}
  return schema


def main(argv) -> int:
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  from kubeflow_trainer_api import models  # pylint: disable=g-import-not-at-top
  installed = metadata.version('kubeflow-trainer-api')
  if installed != VERSION:
    sys.exit(f'kubeflow-trainer-api {installed} is installed; the pinned '
             f'schemas are {VERSION}. Install that version.')
  out = argv[0] if argv else 'tests/schemas'
  for cls, name in ((models.TrainerV1alpha1TrainJob, 'trainjob'),
                    (models.TrainerV1alpha1TrainingRuntime,
                     'trainingruntime')):
    schema = on_the_wire(cls.model_json_schema(by_alias=True))
    schema['$comment'] = f'kubeflow-trainer-api=={VERSION}, {cls.__name__}'
    path = os.path.join(out, f'{name}-v1alpha1-{VERSION}.json')
    with open(path, 'w') as f:
      json.dump(schema, f, sort_keys=True, separators=(',', ':'))
      f.write('\n')
    print(path)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
