"""The resume folder: where a training checkpoints and resumes from.

Its name is a key of what defines the training (`resume_key`: what
identifies its inputs, the content of its module file, its settings), so a
killed training run again with the same inputs, module and settings finds
its checkpoint, and any change starts afresh. Each entry point says where
the folders go and what identifies its inputs (`ResumeAt`): a pipeline
beside the node's stateful working dirs, keyed by the input artifacts'
URIs (`pipeline_resume`); the command in its output folder, keyed by its
files' paths, sizes and modification times (`command.run.resume_at`). The
plan names the folder once (`checkpoint_folder`).
"""

import hashlib
import json
import os
from typing import Any, Dict, List, Optional

import attr

from generic_trainer.usercode import module_loader

# A pipeline's resume folders: `resume-<key>`, beside the node's stateful
# working dirs.
RESUME_PREFIX = 'resume-'


def resume_key(inputs: Dict[str, Any], module_file: Optional[str],
               settings: Dict[str, Any]) -> str:
  """A short hash of what defines a training: what identifies its inputs,
  the content of its module file, and its settings. The one resume key:
  a pipeline passes its input artifacts' URIs (`pipeline_resume`), the
  command its files' paths, sizes and modification times (its folders'
  paths never change)."""
  module_hash = ''
  if module_file and os.path.isfile(module_file):
    with open(module_file, 'rb') as f:
      module_hash = hashlib.sha256(f.read()).hexdigest()
  blob = json.dumps({'inputs': inputs, 'module': module_hash,
                     'settings': settings}, sort_keys=True, default=str)
  return hashlib.sha256(blob.encode()).hexdigest()[:16]


@attr.s(frozen=True)
class ResumeAt:
  """What names a training's checkpoint folder, which the plan decides
  (`checkpoint_folder`): the folder's parent and the prefix of its name,
  and what identifies the training (`resume_key`'s inputs and settings;
  the module file is the plan's source).

  Attributes:
    base: The folder resume folders go in.
    prefix: Their names' prefix.
    inputs: What identifies the inputs (JSON-able).
    settings: The settings that change the training (JSON-able).
  """
  base = attr.ib(type=str)
  prefix = attr.ib(type=str)
  inputs = attr.ib(type=Dict[str, Any])
  settings = attr.ib(type=Dict[str, Any])


def checkpoint_folder(resume: ResumeAt, source_key: str,
                      source: Any) -> str:
  """The checkpoint folder of a training: `resume`'s base and prefix, and
  the key of its inputs, its module's content and its settings. Where the
  user code is given by module path or `run_fn`, the module's source file
  is found without importing it (`usercode.module_loader.source_file`)."""
  module = (module_loader.source_file(source_key, source)
            if isinstance(source, str) else None)
  return os.path.join(resume.base, resume.prefix + resume_key(
      resume.inputs, module, resume.settings))


def pipeline_resume(input_dict: Dict[str, List[Any]],
                    exec_properties: Dict[str, Any], model_run_uri: str,
                    stateful_working_dir: Optional[str]) -> ResumeAt:
  """Where a pipeline's training resumes from. Under TFX it sits beside
  the node's stateful working dirs
  (`<node>/.system/stateful_working_dir/resume-<key>`), which TFX neither
  deletes on failure nor shares between nodes; called directly, in the
  ModelRun artifact (stable when a retry reuses the output URIs, as
  Kubeflow's retries do). The key: the input artifacts' URIs, the module's
  content and the execution properties."""
  base = (os.path.dirname(stateful_working_dir.rstrip('/'))
          if stateful_working_dir else model_run_uri)
  inputs = {key: sorted(a.uri for a in artifacts)
            for key, artifacts in sorted(input_dict.items())}
  return ResumeAt(base, RESUME_PREFIX, inputs, dict(exec_properties))
