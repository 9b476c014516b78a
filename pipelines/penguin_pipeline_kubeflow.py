"""The penguin pipeline for Kubeflow Pipelines, compiled for the backend it
runs on (`generic_trainer.kubeflow.compile`).

The same `create_pipeline` as the local pipeline, with what changes in a
cluster: every step runs in the project's image (the `Dockerfile` at the
repository root), which carries the package, the module file (importable as
`penguin_keras`) and the penguin CSV; there is no SQLite metadata store (the
cluster has its own). For open-source Kubeflow Pipelines 2.x:

    python -m pipelines.penguin_pipeline_kubeflow --target kubeflow \\
        --image REGISTRY/tfx-generic-trainer:0.2.0 \\
        --pipeline-root gs://BUCKET/penguin --serving-model-dir gs://BUCKET/serving \\
        --output penguin_kubeflow.yaml

and upload `penguin_kubeflow.yaml`; `--target vertex --output NAME.json`
writes the PipelineJob Vertex AI Pipelines takes (docs/guides/
scaling-out.md). The latest-blessed-model baseline is a Resolver, which only
Vertex runs: it is left out on the other targets (`--baseline` there is
refused, with the reason).
"""

import argparse
import os
import sys
from typing import Any, Dict, Optional

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.kubeflow import compile as compile_lib
from generic_trainer.kubeflow import kfp_platform
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
                    accuracy_threshold: float = 0.6, baseline: bool = False,
                    trainer_resources: Optional[Dict[str, Any]] = None,
                    trainer_pod_settings: Optional[Dict[str, Any]] = None):
  """The penguin pipeline with the module and data as the image has them;
  `trainer_resources` and `trainer_pod_settings` are GenericTrainer's
  `resources` (its pod's CPU, memory and accelerator) and `pod_settings`
  (service account, annotations, env, volumes...). `baseline` adds the
  latest-blessed-model Resolver, which only Vertex AI runs."""
  return penguin_pipeline_local.create_pipeline(
      PIPELINE_NAME, pipeline_root, data_root, module_file=None,
      serving_model_dir=serving_model_dir, metadata_path=None,
      train_steps=train_steps, eval_steps=eval_steps,
      accuracy_threshold=accuracy_threshold, num_workers=num_workers,
      module_path=MODULE_PATH, baseline=baseline,
      trainer_resources=trainer_resources,
      trainer_pod_settings=trainer_pod_settings)


def compile_pipeline(output_path: str, image: str, pipeline_root: str,
                     serving_model_dir: str, target: str = 'kubeflow',
                     step_job: Optional[str] = compile_lib.DEFAULT_STEP_JOB,
                     kfp_release: str = kfp_platform.OLDEST,
                     **pipeline_args) -> Dict[str, Any]:
  """Compiles the pipeline for `target` ('kubeflow', 'vertex' or
  'kfp-local'); returns the PipelineJob as a dict. With several workers,
  the trainer step launches a `step_job` for them ('TrainJob', 'TFJob',
  None: `generic_trainer.kubeflow.compile.compile_pipeline`), in the forms
  the cluster's Kubeflow Pipelines `kfp_release` parses.

  `output_path` ending in .yaml gets the PipelineSpec package (and the
  platform spec, when the trainer's pod settings need one), in .json the
  whole PipelineJob.
  """
  return compile_lib.compile_pipeline(
      create_pipeline(pipeline_root, serving_model_dir, **pipeline_args),
      output_path, image, target=target, step_job=step_job,
      kfp_release=kfp_release)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--target', choices=compile_lib.TARGETS,
                      default='kubeflow',
                      help="The backend: 'kubeflow' (open-source Kubeflow "
                      "Pipelines 2.x), 'vertex' (Vertex AI Pipelines) or "
                      "'kfp-local' (KFP's local runner). Default: %(default)s.")
  parser.add_argument('--kfp-release', choices=kfp_platform.RELEASES,
                      default=kfp_platform.OLDEST,
                      help="The Kubeflow Pipelines backend release the "
                      "cluster runs: the step's platform spec holds only "
                      'what it parses (pod security from 2.16). Default: '
                      '%(default)s, the oldest supported.')
  parser.add_argument('--image', required=True,
                      help='The image built from the Dockerfile, as the '
                      'cluster pulls it.')
  parser.add_argument('--pipeline-root', required=True,
                      help='Where the steps write artifacts: gs://BUCKET/PATH '
                      "on 'kubeflow' and 'vertex', a local folder on "
                      "'kfp-local'.")
  parser.add_argument('--serving-model-dir', required=True,
                      help="Pusher's destination.")
  parser.add_argument('--data-root', default=IMAGE_DATA_ROOT,
                      help='Folder of the penguin CSV (default: the copy in '
                      'the image, %(default)s).')
  parser.add_argument('--train-steps', type=int, default=100)
  parser.add_argument('--eval-steps', type=int, default=5)
  parser.add_argument('--num-workers', type=int, default=None,
                      help='Workers that train together (default: one). On '
                      'kubeflow, the trainer step launches a job of that '
                      'many pods (--step-job); elsewhere they are processes '
                      'of its pod.')
  parser.add_argument('--step-job', choices=('TrainJob', 'TFJob', 'none'),
                      default=None,
                      help='What the trainer step launches for its workers '
                      'on kubeflow: a Kubeflow Trainer v2 TrainJob (the '
                      'default there), a Training Operator TFJob, or none '
                      '(they run in the step\'s pod).')
  parser.add_argument('--trainer-cpu', default=None,
                      help="The trainer pod's cores, e.g. 4 or 500m.")
  parser.add_argument('--trainer-memory', default=None,
                      help="The trainer pod's memory, e.g. 16G.")
  parser.add_argument('--trainer-accelerator', default=None,
                      help='The trainer pod\'s accelerator and count: '
                      'nvidia.com/gpu:1 on kubeflow, NVIDIA_TESLA_T4:1 on '
                      'vertex.')
  parser.add_argument('--trainer-service-account', default=None,
                      help="The trainer's pods' service account (the TFJob "
                      "and TrainJob pods; KFP sets the step's per run).")
  parser.add_argument('--baseline', dest='baseline', action='store_true',
                      default=None,
                      help='Add the latest-blessed-model Resolver (Vertex '
                      'only; the default there).')
  parser.add_argument('--no-baseline', dest='baseline', action='store_false',
                      help='Leave out the latest-blessed-model Resolver (the '
                      'default on kubeflow and kfp-local, whose backends do '
                      'not run it).')
  parser.add_argument('--output', default='penguin_kubeflow.yaml',
                      help='.yaml: the KFP package; .json: the PipelineJob.')
  args = parser.parse_args(argv)
  resources = {key: value for key, value in (
      ('cpu', args.trainer_cpu), ('memory', args.trainer_memory)) if value}
  if args.trainer_accelerator:
    kind, _, count = args.trainer_accelerator.partition(':')
    resources.update(accelerator_type=kind,
                     accelerator_count=int(count or 1))
  baseline = (args.target == 'vertex') if args.baseline is None else (
      args.baseline)
  pod_settings = ({'service_account': args.trainer_service_account}
                  if args.trainer_service_account else None)
  try:
    step_job = {None: compile_lib.DEFAULT_STEP_JOB, 'none': None}.get(
        args.step_job, args.step_job)
    compile_pipeline(args.output, args.image, args.pipeline_root,
                     args.serving_model_dir, target=args.target,
                     step_job=step_job, kfp_release=args.kfp_release,
                     data_root=args.data_root, train_steps=args.train_steps,
                     eval_steps=args.eval_steps, num_workers=args.num_workers,
                     baseline=baseline, trainer_resources=resources or None,
                     trainer_pod_settings=pod_settings)
  except InvalidArgumentError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(f'Compiled {PIPELINE_NAME} for {args.target} to '
        f'{os.path.abspath(args.output)}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
