"""The image under a cluster's rules, read from the Dockerfile, and its tag
following the package's version: static checks, no container runs here
(tests/test_containers.py runs the image).

The rules (OpenShift's restricted SCC, a read-only root filesystem, KFP's
launcher before 2.3 making /gcs, /minio and /s3 at the root) and why the
Dockerfile meets them are in its comments; docs/guides/scaling-out.md says
how to run it so.
"""

import glob
import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO
from message_parts import assert_four_parts

from generic_trainer.version import __version__

# Where a reader copies an image tag from.
TAGGED = ['README.md', 'Makefile', 'Dockerfile.gpu', 'docs/**/*.md',
          'pipelines/*.py']
VERSIONED_TAG = re.compile(r'tfx-generic-trainer:(\d[\w.+-]*)')
LAUNCHER_FOLDERS = ('/gcs', '/minio', '/s3')


def _dockerfile() -> str:
  with open(os.path.join(REPO, 'Dockerfile')) as f:
    return f.read()


def _instructions(text: str):
  """The Dockerfile's instructions, continuation lines joined, comments
  left out."""
  lines = [line for line in text.splitlines()
           if not line.lstrip().startswith('#')]
  return re.sub(r'\\\n', ' ', '\n'.join(lines)).splitlines()


def test_every_versioned_image_tag_names_the_package_version():
  """Each `tfx-generic-trainer:<version>` in the docs, the Makefile,
  Dockerfile.gpu and the pipelines is generic_trainer.__version__."""
  stale = []
  for pattern in TAGGED:
    for path in sorted(glob.glob(os.path.join(REPO, pattern),
                                 recursive=True)):
      with open(path) as f:
        for number, line in enumerate(f, 1):
          for tag in VERSIONED_TAG.findall(line):
            if tag != __version__:
              stale.append(f'{os.path.relpath(path, REPO)}:{number}: {tag}')
  assert not stale, (f'image tags that do not name the version '
                     f'{__version__}: {stale}')


def test_make_image_tags_the_package_version_by_default():
  """`make image` tags localhost/tfx-generic-trainer:<__version__>, read
  from generic_trainer/version.py (make -n: nothing is built)."""
  env = {k: v for k, v in os.environ.items() if k not in ('IMAGE', 'VERSION')}
  result = subprocess.run(['make', '-s', '-n', '-C', REPO, 'image-gpu'],
                          capture_output=True, text=True, env=env,
                          timeout=60, check=True)
  image = f'localhost/tfx-generic-trainer:{__version__}'
  assert f'--build-arg IMAGE={image} ' in result.stdout, result.stdout
  assert f'-t {image}-gpu ' in result.stdout, result.stdout


def test_home_is_tmp_for_every_uid():
  """HOME is /tmp: an arbitrary uid has no passwd entry, and with a
  read-only root /tmp is the one writable folder."""
  env = [line for line in _instructions(_dockerfile())
         if line.startswith('ENV ')]
  assert any(re.search(r'\bHOME=/tmp(\s|$)', line) for line in env), env


def test_launcher_folders_exist_for_group_0_and_are_not_world_writable():
  """/gcs, /minio and /s3 are made in the image, group 0, group-writable
  as the owner (g=u), not writable by others."""
  made = [line for line in _instructions(_dockerfile())
          if 'install -d' in line and all(
              re.search(rf'{folder}(\s|$)', line)
              for folder in LAUNCHER_FOLDERS)]
  assert made, 'no `install -d ... /gcs /minio /s3` in the Dockerfile'
  command = made[0][made[0].index('install -d'):].split('&&')[0]
  assert re.search(r'\s-g 0\s', command), command
  mode = re.search(r'\s-m (\d{3,4})\s', command).group(1)
  user, group, other = (int(digit) for digit in mode[-3:])
  assert group == user, f'group bits {group} are not the owner\'s {user}'
  assert not other & 2, f'mode {mode} lets others write'


def test_nothing_is_made_world_writable_without_the_sticky_bit():
  """No chmod or install -m in the Dockerfile gives others write without
  the sticky bit."""
  for line in _instructions(_dockerfile()):
    for mode in re.findall(r'(?:chmod(?: -R)?|install\b[^&]*?-m) (\d{3,4})\b',
                           line):
      sticky = len(mode) == 4 and int(mode[0]) & 1
      assert not int(mode[-1]) & 2 or sticky, f'mode {mode} in: {line}'
    assert not re.search(r'chmod(?: -R)? [^ ]*o\+w', line), line
    assert not re.search(r'chmod(?: -R)? (?:a\+|\+)[rx]*w', line), line


def test_bytecode_is_compiled_at_build():
  """The lock, this package, what a step imports from /pipeline and the
  standard library are compiled when the image is built: no uid can write
  __pycache__ when it runs."""
  instructions = ' '.join(_instructions(_dockerfile()))
  assert instructions.count('--compile-bytecode') >= 2  # lock, package
  assert re.search(r'compileall .*generic_trainer pipelines module_files',
                   instructions)
  assert 'sysconfig.get_path("stdlib")' in instructions


def test_make_image_without_a_pullable_base_says_how_to_build_one(tmp_path):
  """`make image` with a BASE this machine cannot pull (a registry that
  does not resolve, as docker.io does not here) stops before the build
  with the way that works (make image-base, then make image BASE=...),
  not with podman's "no such host" and make's Error 125 alone."""
  engine = os.path.join(REPO, 'scripts', 'container.sh')
  if not shutil.which('make'):
    pytest.skip('no make on this machine')
  installed = subprocess.run([engine, '--install'], capture_output=True,
                             text=True, timeout=900, check=False)
  if installed.returncode != 0:
    pytest.skip('no container engine here and none could be installed '
                f'(scripts/container.sh --install): {installed.stderr}')
  base = 'registry.invalid/python:3.10-slim'  # .invalid never resolves.
  done = subprocess.run(
      ['make', '-C', REPO, 'image', f'BASE={base}',
       'IMAGE=localhost/tfx-generic-trainer:never-built'],
      capture_output=True, text=True, timeout=120, check=False)
  assert done.returncode != 0
  lines = done.stderr.splitlines()
  (said,) = [l for l in lines if l.startswith("container.sh: the image's ")]
  assert said.startswith(
      f"container.sh: the image's base {base} is not on this machine and "
      'cannot be pulled from here (')
  assert_four_parts(said)
  assert lines[lines.index(said) + 1:lines.index(said) + 3] == [
      '  make image-base',
      '  make image BASE=localhost/tfx-generic-trainer-base:bookworm-py3.10']
  assert 'STEP 1/' not in done.stdout + done.stderr  # No build started.
