"""Paths taken literally: a user's pattern is globbed once, then files travel
as literal names.

TFX's FnArgs carry file *patterns* (`.../Split-train/*`), and TFXIO, tf.data
and this package glob them. A folder named `exp[1]` then matches `exp1/`,
and a file named `part[0].gz` matches nothing (or `part0.gz`). So:

- a user's pattern is expanded once, here (`user_files`): a path that names
  an existing file is that file, even if it holds `[`, `*` or `?`;
- a literal path put where a pattern is expected is escaped (`as_pattern`:
  `exp[[]1]/data.gz`, which TensorFlow's glob and Python's read back as the
  literal name);
- whatever expands patterns into files calls `expand`, which also takes an
  existing literal path as itself.

And whether this process can open a path at all (`check_openable`): TFX
and the training open artifacts through TensorFlow's file systems, which
open the schemes registered in this process (`gs://`, local paths; not
`minio://` nor, without tensorflow-io, `s3://`).
"""

import glob
import os
from typing import Iterable, List, Mapping, Tuple

from generic_trainer.errors import InvalidArgumentError
from generic_trainer.keys import EVAL_MODEL_DIR, SERVING_MODEL_DIR
from generic_trainer.system.lazy import tf

GLOB_CHARS = '*?['
# Kubeflow Pipelines' root when neither the run nor the namespace's
# `kfp-launcher` ConfigMap names one (KFP's backend/src/v2/config/env.go,
# `defaultPipelineRoot`).
KFP_DEFAULT_ROOT = 'minio://mlpipeline/v2/artifacts'


def is_remote(path: str) -> bool:
  """Whether `path` is on an object store (has a scheme: gs://, s3://)."""
  return '://' in path


def scheme(path: str) -> str:
  """'gs' for 'gs://b/x'; '' for a local path."""
  return path.split('://', 1)[0] if '://' in path else ''


def check_openable(uris: Mapping[str, str]) -> None:
  """Refuses artifacts this process's file systems cannot open, before
  anything reads or writes them: `uris` maps what each is (e.g. 'the
  model output') to its URI.

  Raises:
    InvalidArgumentError: a URI whose scheme no file system here opens,
      naming it, the root it is under and where a pipeline's root is set.
  """
  remote = {name: uri for name, uri in uris.items() if is_remote(uri)}
  if not remote:
    return
  known = set(tf.io.gfile.get_registered_schemes())
  refused = {name: uri for name, uri in remote.items()
             if scheme(uri) not in known}
  if not refused:
    return
  name, uri = next(iter(refused.items()))
  others = len(refused) - 1
  root = (f" (Kubeflow Pipelines' default root {KFP_DEFAULT_ROOT}: the run "
          "was given no pipeline_root and the namespace's kfp-launcher "
          'ConfigMap sets no defaultPipelineRoot)'
          if uri.startswith(KFP_DEFAULT_ROOT) else '')
  raise InvalidArgumentError(
      f'The artifacts of this step are under {scheme(uri)}://, which '
      'TensorFlow\'s file systems here cannot open (they open '
      f'{sorted(s + "://" for s in known if s and s != "file")} and local '
      f'paths){root}. Expected a pipeline root they open, such as '
      f"gs://BUCKET/PATH. Received: {name} at {uri!r}"
      f"{f' and {others} more' if others else ''}. Give the Kubeflow "
      "Pipelines run its root: kfp.Client().create_run_from_pipeline_package("
      "..., pipeline_root='gs://BUCKET/PATH') (the UI pre-fills the field "
      'from the package), or set defaultPipelineRoot in the kfp-launcher '
      "ConfigMap of the run's namespace. Nothing was read or written.")


def is_pattern(path: str) -> bool:
  """Whether `path` holds a glob character."""
  return any(c in path for c in GLOB_CHARS)


def as_pattern(path: str) -> str:
  """A pattern that matches the literal `path` only."""
  return glob.escape(path) if is_pattern(path) else path


def folder_pattern(pattern: str) -> str:
  """`folder/*` with the literal `folder` escaped (TFX's split patterns)."""
  folder, name = os.path.split(pattern)
  return os.path.join(as_pattern(folder), name) if name == '*' else pattern


def user_files(pattern: str) -> List[str]:
  """The files a user's path or glob names: the path itself when it is an
  existing file, else the files its glob matches, sorted."""
  if os.path.isfile(pattern) or not is_pattern(pattern):
    return [pattern] if os.path.isfile(pattern) else []
  return sorted(f for f in glob.glob(pattern) if os.path.isfile(f))


def expand(patterns: Iterable[str]) -> List[str]:
  """The files of `patterns` (local or remote), sorted, each once: a path
  without glob characters, or the name of an existing file, is itself."""
  found = set()
  for pattern in patterns:
    if not is_pattern(pattern) or tf.io.gfile.exists(pattern):
      found.add(pattern)  # A missing file is named by whoever reads it.
    else:
      found.update(tf.io.gfile.glob(pattern))
  return sorted(found)


def user_cache_dir(name: str) -> str:
  """`$XDG_CACHE_HOME/tfx-generic-trainer/<name>` (`~/.cache` when
  XDG_CACHE_HOME is unset or not absolute, as the XDG spec says)."""
  base = os.environ.get('XDG_CACHE_HOME', '')
  if not os.path.isabs(base):
    base = os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(base, 'tfx-generic-trainer', name)


def cwd_note(path: str) -> str:
  """' (working directory /x)' for a relative `path`, '' for an absolute
  one: what a message adds so that a relative path can be found."""
  return '' if os.path.isabs(path) else f' (working directory {os.getcwd()})'


def model_dirs(model_uri: str) -> Tuple[str, str]:
  """(serving, eval) SavedModel folders of a Model artifact at `model_uri`,
  laid out as TFX lays them (`tfx.utils.path_utils`): the one owner of that
  layout here, for staging, publishing and a worker's scratch outputs."""
  return (os.path.join(model_uri, SERVING_MODEL_DIR),
          os.path.join(model_uri, EVAL_MODEL_DIR))
