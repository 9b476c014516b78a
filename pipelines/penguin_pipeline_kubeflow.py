"""The penguin pipeline for Kubeflow Pipelines, compiled by KubeflowV2DagRunner.

The same `create_pipeline` as the local pipeline, with what changes in a
cluster: every step runs in the project's image (the `Dockerfile` at the
repository root), which carries the package, the module file (importable as
`penguin_keras`) and the penguin CSV; there is no SQLite metadata store (the
cluster has its own). Compile it with

    python -m pipelines.penguin_pipeline_kubeflow \\
        --image REGISTRY/tfx-generic-trainer:0.1.0 \\
        --pipeline-root gs://BUCKET/penguin --serving-model-dir gs://BUCKET/serving \\
        --num-workers 2 --output penguin_kubeflow.yaml

and submit `penguin_kubeflow.yaml` to Kubeflow Pipelines (v2); `--output
NAME.json` writes the PipelineJob JSON that Vertex AI Pipelines also takes
(docs/guides/scaling-out.md). The baseline Resolver compiles to a KFP
`resolver` executor, which Vertex AI Pipelines runs; `--no-baseline` leaves
it out for a Kubeflow Pipelines backend that does not.
"""

import argparse
import os
import sys
from typing import Any, Dict, Optional

from pipelines import penguin_pipeline_local

PIPELINE_NAME = 'penguin-generic-trainer'
# Where the Dockerfile puts the module file and the data in the image.
IMAGE_ROOT = '/pipeline'
IMAGE_DATA_ROOT = f'{IMAGE_ROOT}/data'
MODULE_PATH = 'penguin_keras'  # /pipeline/module_files is on PYTHONPATH.
TRAINER_EXECUTOR = 'generic_trainer.component.executor.GenericExecutor'


def create_pipeline(pipeline_root: str, serving_model_dir: str,
                    data_root: str = IMAGE_DATA_ROOT, train_steps: int = 100,
                    eval_steps: int = 5, num_workers: Optional[int] = None,
                    accuracy_threshold: float = 0.6, baseline: bool = True,
                    trainer_resources: Optional[Dict[str, Any]] = None):
  """The penguin pipeline with the module and data as the image has them;
  `trainer_resources` is GenericTrainer's `resources` (its pod's CPU,
  memory and accelerator, which the compiled step carries)."""
  return penguin_pipeline_local.create_pipeline(
      PIPELINE_NAME, pipeline_root, data_root, module_file=None,
      serving_model_dir=serving_model_dir, metadata_path=None,
      train_steps=train_steps, eval_steps=eval_steps,
      accuracy_threshold=accuracy_threshold, num_workers=num_workers,
      module_path=MODULE_PATH, baseline=baseline,
      trainer_resources=trainer_resources)


def compile_pipeline(output_path: str, image: str, pipeline_root: str,
                     serving_model_dir: str, **pipeline_args) -> Dict[str, Any]:
  """Compiles the pipeline; returns the PipelineJob as a dict.

  `output_path` ending in .yaml gets the PipelineSpec (the package Kubeflow
  Pipelines' client uploads), in .json the whole PipelineJob.
  """
  from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner  # pylint: disable=g-import-not-at-top
  runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
      config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
          default_image=image),
      output_dir=os.path.dirname(os.path.abspath(output_path)),
      output_filename=os.path.basename(output_path))
  return runner.run(create_pipeline(pipeline_root, serving_model_dir,
                                    **pipeline_args))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--image', required=True,
                      help='The image built from the Dockerfile, as the '
                      'cluster pulls it.')
  parser.add_argument('--pipeline-root', required=True,
                      help='Where the cluster writes artifacts (gs://, s3:// '
                      'or a path every pod mounts).')
  parser.add_argument('--serving-model-dir', required=True,
                      help="Pusher's destination.")
  parser.add_argument('--data-root', default=IMAGE_DATA_ROOT,
                      help='Folder of the penguin CSV (default: the copy in '
                      'the image, %(default)s).')
  parser.add_argument('--train-steps', type=int, default=100)
  parser.add_argument('--eval-steps', type=int, default=5)
  parser.add_argument('--num-workers', type=int, default=None,
                      help='Worker processes the trainer step starts in its '
                      'pod (default: one process).')
  parser.add_argument('--trainer-cpu', default=None,
                      help="The trainer pod's cores, e.g. 4 or 500m.")
  parser.add_argument('--trainer-memory', default=None,
                      help="The trainer pod's memory, e.g. 16G.")
  parser.add_argument('--trainer-accelerator', default=None,
                      help='The trainer pod\'s accelerator type and count, '
                      'e.g. NVIDIA_TESLA_T4:1.')
  parser.add_argument('--no-baseline', dest='baseline', action='store_false',
                      help='Leave out the latest-blessed-model Resolver.')
  parser.add_argument('--output', default='penguin_kubeflow.yaml',
                      help='.yaml: the KFP package; .json: the PipelineJob.')
  args = parser.parse_args(argv)
  resources = {key: value for key, value in (
      ('cpu', args.trainer_cpu), ('memory', args.trainer_memory)) if value}
  if args.trainer_accelerator:
    kind, _, count = args.trainer_accelerator.partition(':')
    resources.update(accelerator_type=kind,
                     accelerator_count=int(count or 1))
  compile_pipeline(args.output, args.image, args.pipeline_root,
                   args.serving_model_dir, data_root=args.data_root,
                   train_steps=args.train_steps, eval_steps=args.eval_steps,
                   num_workers=args.num_workers, baseline=args.baseline,
                   trainer_resources=resources or None)
  print(f'Compiled {PIPELINE_NAME} to {os.path.abspath(args.output)}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
