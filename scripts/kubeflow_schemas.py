"""Writes the CRDs pinned in tests/schemas/, which tests/test_trainjob.py and
tests/test_tfjob.py check every rendered manifest against
(tests/crd_schema.py), byte for byte as the projects publish them.

Each comes from a git clone of kubeflow/trainer (which holds the Training
Operator's v1 releases too: kubeflow/training-operator was renamed), at the
tag pinned below, and is checked against the SHA-256 written in
tests/schemas/README.md, so a changed tag or file is noticed:

    git clone https://github.com/kubeflow/trainer /tmp/trainer
    python scripts/kubeflow_schemas.py /tmp/trainer tests/schemas

To move to a newer release, change the tag here, run it with --update,
and write the new tag, commit and SHA-256 in tests/schemas/README.md.
"""

import argparse
import hashlib
import os
import re
import subprocess
import sys

# (tag, path in the repository, file written in tests/schemas/).
PINNED = (
    ('v2.3.0', 'manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml',
     'trainer.kubeflow.org_trainjobs-v2.3.0.yaml'),
    ('v2.3.0', 'manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml',
     'trainer.kubeflow.org_trainingruntimes-v2.3.0.yaml'),
    ('v1.9.4', 'manifests/base/crds/kubeflow.org_tfjobs.yaml',
     'kubeflow.org_tfjobs-v1.9.4.yaml'),
)


_README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))), 'tests', 'schemas', 'README.md')


def _recorded():
  """file -> SHA-256, from tests/schemas/README.md's table."""
  with open(_README) as f:
    return dict(re.findall(r'`([^`]+\.yaml)`.*\|\s*([0-9a-f]{64})\s*\|',
                           f.read()))


def main(argv) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('repo', help='A git clone (or bare mirror) of '
                      'kubeflow/trainer with its tags.')
  parser.add_argument('out', nargs='?', default='tests/schemas')
  parser.add_argument('--update', action='store_true',
                      help='Write files whose SHA-256 differs from the '
                      "README's (after changing a tag).")
  args = parser.parse_args(argv)
  recorded = _recorded()
  for tag, path, name in PINNED:
    data = subprocess.run(['git', '-C', args.repo, 'show', f'{tag}:{path}'],
                          check=True, capture_output=True).stdout
    commit = subprocess.run(
        ['git', '-C', args.repo, 'rev-parse', f'{tag}^{{commit}}'],
        check=True, capture_output=True, text=True).stdout.strip()
    digest = hashlib.sha256(data).hexdigest()
    if digest != recorded.get(name) and not args.update:
      sys.exit(f'{path} at {tag} ({commit}) has SHA-256 {digest}; '
               f'tests/schemas/README.md records {recorded.get(name)} for '
               f'{name}. Expected the same file. Check the tag, or pass '
               '--update and record the new digest.')
    with open(os.path.join(args.out, name), 'wb') as f:
      f.write(data)
    print(f'{name}: {tag} {commit} {digest}')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
