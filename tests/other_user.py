"""Another user on the same machine, as the attack tests play it.

The suite runs as root; the other user is uid 65534 (`nobody`), whose
files, links and moves are made by a real process of that user
(`setpriv`), in a folder that user can reach (pytest's base folder is
0700). tests/test_trust_by_descriptor.py and
tests/test_other_users_files.py share these.
"""

import contextlib
import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import Iterator, Optional

NOBODY = 65534


def as_nobody(*command):
  """Runs `command` as uid and gid 65534, of no other group."""
  subprocess.run(['setpriv', f'--reuid={NOBODY}', f'--regid={NOBODY}',
                  '--clear-groups', *command], check=True)


@contextlib.contextmanager
def reachable_folder(name: str, mode: int,
                     group: Optional[int] = None) -> Iterator[pathlib.Path]:
  """A folder `name` of root's with `mode` (and `group`, when given) in a
  fresh 0755 folder under /tmp, where uid 65534 can reach it; removed
  with everything in it afterwards."""
  reachable = tempfile.mkdtemp(prefix=f'{name}-', dir='/tmp')
  try:
    os.chmod(reachable, 0o755)
    path = os.path.join(reachable, name)
    os.mkdir(path)
    if group is not None:
      os.chown(path, 0, group)
    os.chmod(path, mode)
    yield pathlib.Path(path)
  finally:
    shutil.rmtree(reachable)
