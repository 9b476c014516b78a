"""The step that TFJob and TrainJob tests render: the step's container
(`IMAGE`, `COMMAND`, `ARGS`), a team's pod settings (`SETTINGS`), and a
compiled pipeline with one GenericTrainer step, written by hand as KFP's
pipeline spec 2.1 writes it (every number a double, `pod_settings` a JSON
string), for rendering a job from a step without compiling a pipeline.
tests/test_tfjob.py and tests/test_trainjob.py share these."""

from typing import Any, Dict

from generic_trainer.kubeflow import kfp_step
from generic_trainer.kubeflow import tfjob

IMAGE = 'example.com/trainer:1'
COMMAND = list(tfjob.KFP_ENTRYPOINT)
ARGS = ['--executor_class_path', kfp_step.TRAINER_EXECUTOR,
        '--json_serialized_invocation_args', '{"inputs": {}}']
SETTINGS = {'service_account': 'pipeline-runner',
            'annotations': {'example.com/team': 'penguins'},
            'labels': {'team': 'penguins'},
            'env': {'GOOGLE_CLOUD_PROJECT': 'p'},
            'volumes': [{'name': 'data', 'persistentVolumeClaim': {
                'claimName': 'penguin'}}],
            'volume_mounts': [{'name': 'data', 'mountPath': '/data'}],
            'security_context': {'fsGroup': 0, 'runAsNonRoot': True}}
_DECLARED = {'num_workers': 'NUMBER_INTEGER',
             'max_restarts': 'NUMBER_INTEGER', 'pod_settings': 'STRING'}


def job(parameters: Dict[str, Any]) -> Dict[str, Any]:
  """The PipelineJob whose `GenericTrainer` task has these constant
  parameters (keys among num_workers, max_restarts, pod_settings)."""
  return {'pipelineSpec': {
      'schemaVersion': kfp_step.SCHEMA_VERSION,
      'root': {'dag': {'tasks': {'GenericTrainer': {
          'componentRef': {'name': 'comp-GenericTrainer'},
          'inputs': {'parameters': {
              key: {'runtimeValue': {'constant': value}}
              for key, value in parameters.items()}}}}}},
      'components': {'comp-GenericTrainer': {
          'executorLabel': 'exec-GenericTrainer',
          'inputDefinitions': {'parameters': {
              key: {'parameterType': kind}
              for key, kind in _DECLARED.items()}}}},
      'deploymentSpec': {'executors': {'exec-GenericTrainer': {'container': {
          'image': IMAGE, 'command': list(tfjob.KFP_ENTRYPOINT),
          'args': ['--executor_class_path', kfp_step.TRAINER_EXECUTOR,
                   '--json_serialized_invocation_args',
                   kfp_step.EXECUTOR_INPUT_PLACEHOLDER]}}}}}}
