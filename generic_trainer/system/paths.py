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
"""

import glob
import os
from typing import Iterable, List, Tuple

from generic_trainer.keys import EVAL_MODEL_DIR, SERVING_MODEL_DIR
from generic_trainer.system.lazy import tf

GLOB_CHARS = '*?['


def is_remote(path: str) -> bool:
  """Whether `path` is on an object store (has a scheme: gs://, s3://)."""
  return '://' in path


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
