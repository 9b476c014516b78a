"""JSON Schema of the TFJob manifests `tfjob.py` writes (kubeflow.org/v1).

Written from the Kubeflow Training Operator's own definitions, for when its
SDK (`kubeflow-training`) is not installed:
  - the CRD `manifests/base/crds/kubeflow.org_tfjobs.yaml` of
    kubeflow/training-operator (v1 `openAPIV3Schema`): the fields of
    `spec` (`runPolicy`, `successPolicy`, `tfReplicaSpecs`,
    `enableDynamicWorker`) and of a replica spec (`replicas`,
    `restartPolicy`, `template`), with their types;
  - the operator's admission checks for TFJobs (`ValidateV1TFJob`): replica
    types are Chief/Master, Worker, PS or Evaluator; at most one Chief or
    Master and one Evaluator; every replica has a container named
    `tensorflow` with an image;
  - the webhook's rule for the job's name, an RFC 1035 label
    (`pkg/webhooks/tensorflow/tfjob_webhook.go`, v1.9.4: NameIsDNS1035Label),
    and Kubernetes' for the container's (a DNS-1123 label).
The package does not ship the CRD itself (600 kB); tests/test_tfjob.py
checks every TFJob `tfjob.render` writes against it, pinned in
tests/schemas/, so this schema cannot drift from what the API server takes.
Only what a GenericTrainer TFJob uses is described in depth; the pod
template's other fields are left to the API server, as the CRD does.
"""

from generic_trainer.kubeflow.names import DNS1035_LABEL
from generic_trainer.kubeflow.names import DNS1123_LABEL

_DNS1123_LABEL = DNS1123_LABEL.pattern
_DNS1035_LABEL = DNS1035_LABEL.pattern

_CONTAINER = {
    'type': 'object',
    'required': ['name', 'image'],
    'properties': {
        'name': {'type': 'string', 'pattern': _DNS1123_LABEL},
        'image': {'type': 'string', 'minLength': 1},
        'command': {'type': 'array', 'items': {'type': 'string'}},
        'args': {'type': 'array', 'items': {'type': 'string'}},
        'workingDir': {'type': 'string'},
        'env': {
            'type': 'array',
            'items': {
                'type': 'object',
                'required': ['name'],
                'properties': {'name': {'type': 'string', 'minLength': 1},
                               'value': {'type': 'string'}},
            },
        },
        'resources': {
            'type': 'object',
            'properties': {
                'limits': {'type': 'object',
                           'additionalProperties': {'type': ['string',
                                                             'integer']}},
                'requests': {'type': 'object',
                             'additionalProperties': {'type': ['string',
                                                               'integer']}},
            },
        },
    },
}

_REPLICA_SPEC = {
    'type': 'object',
    'required': ['template'],
    'additionalProperties': False,
    'properties': {
        'replicas': {'type': 'integer', 'minimum': 0},
        'restartPolicy': {'enum': ['Always', 'OnFailure', 'Never',
                                   'ExitCode']},
        'template': {
            'type': 'object',
            'required': ['spec'],
            'properties': {
                'metadata': {'type': 'object'},
                'spec': {
                    'type': 'object',
                    'required': ['containers'],
                    'properties': {
                        'serviceAccountName': {'type': 'string'},
                        'nodeSelector': {'type': 'object',
                                         'additionalProperties': {
                                             'type': 'string'}},
                        'tolerations': {'type': 'array',
                                        'items': {'type': 'object'}},
                        'terminationGracePeriodSeconds': {
                            'type': 'integer', 'minimum': 0},
                        'containers': {
                            'type': 'array',
                            'minItems': 1,
                            'items': _CONTAINER,
                            'contains': {
                                'type': 'object',
                                'required': ['name'],
                                'properties': {
                                    'name': {'const': 'tensorflow'}},
                            },
                        },
                    },
                },
            },
        },
    },
}

_SINGLE_REPLICA = {'allOf': [{'$ref': '#/$defs/replicaSpec'},
                             {'properties': {'replicas': {'maximum': 1}}}]}

TFJOB_SCHEMA = {
    '$schema': 'https://json-schema.org/draft/2020-12/schema',
    'title': 'TFJob (kubeflow.org/v1)',
    'type': 'object',
    'required': ['apiVersion', 'kind', 'metadata', 'spec'],
    'properties': {
        'apiVersion': {'const': 'kubeflow.org/v1'},
        'kind': {'const': 'TFJob'},
        'metadata': {
            'type': 'object',
            'required': ['name'],
            'properties': {
                'name': {'type': 'string', 'maxLength': 63,
                         'pattern': _DNS1035_LABEL},
                'namespace': {'type': 'string', 'pattern': _DNS1123_LABEL},
                'labels': {'type': 'object',
                           'additionalProperties': {'type': 'string'}},
            },
        },
        'spec': {
            'type': 'object',
            'required': ['tfReplicaSpecs'],
            'additionalProperties': False,
            'properties': {
                'enableDynamicWorker': {'type': 'boolean'},
                'successPolicy': {'enum': ['', 'AllWorkers']},
                'runPolicy': {
                    'type': 'object',
                    'additionalProperties': False,
                    'properties': {
                        'activeDeadlineSeconds': {'type': 'integer',
                                                  'minimum': 1},
                        'backoffLimit': {'type': 'integer', 'minimum': 0},
                        'cleanPodPolicy': {'enum': ['None', 'Running',
                                                    'All']},
                        'schedulingPolicy': {'type': 'object'},
                        'suspend': {'type': 'boolean'},
                        'ttlSecondsAfterFinished': {'type': 'integer',
                                                    'minimum': 0},
                    },
                },
                'tfReplicaSpecs': {
                    'type': 'object',
                    'minProperties': 1,
                    'propertyNames': {'enum': ['Chief', 'Master', 'Worker',
                                               'PS', 'Evaluator']},
                    'properties': {'Chief': _SINGLE_REPLICA,
                                   'Master': _SINGLE_REPLICA,
                                   'Evaluator': _SINGLE_REPLICA},
                    'additionalProperties': {'$ref': '#/$defs/replicaSpec'},
                    'not': {'required': ['Chief', 'Master']},
                },
            },
        },
    },
    '$defs': {'replicaSpec': _REPLICA_SPEC},
}
