"""What the distribution declares: licence, version, dependencies, command.

Read from pyproject.toml and the package's source with `ast`, without
building anything; tests/test_installed_wheel.py builds and installs the
wheel."""

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

import pytest

try:
  import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own tomli.
  import tomli as tomllib

from conftest import REPO, command_env

PACKAGE = 'generic_trainer'
# Imported only when installed, with a fallback when not: not declared.
USED_IF_INSTALLED = {
    # kubeflow-training's SDK models, to rebuild a TFJob manifest as its
    # client would (kubeflow/tfjob.py, sdk_available).
    'kubeflow': 'kubeflow-training',
}


def _pyproject():
  with open(os.path.join(REPO, 'pyproject.toml'), 'rb') as f:
    return tomllib.load(f)


def _name(requirement: str) -> str:
  """'tfx[kfp]>=1.16,<1.17' -> 'tfx': a requirement's normalized name."""
  name = re.match(r'[A-Za-z0-9._-]+', requirement).group(0)
  return re.sub(r'[-_.]+', '-', name).lower()


def _imported_top_level_names():
  """{top-level module: first file importing it} over the package, the
  lazy modules of `system.lazy` included."""
  found = {}
  for folder, _, files in os.walk(os.path.join(REPO, PACKAGE)):
    for filename in sorted(files):
      if not filename.endswith('.py'):
        continue
      path = os.path.join(folder, filename)
      with open(path) as f:
        tree = ast.parse(f.read())
      for node in ast.walk(tree):
        if isinstance(node, ast.Import):
          names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
          names = [node.module]
        elif isinstance(node, ast.Call) and getattr(
            node.func, 'id', None) == 'LazyModule':
          names = [node.args[0].value]  # Imported on first use: system.lazy.
        else:
          continue
        for name in names:
          found.setdefault(name.split('.')[0], os.path.relpath(path, REPO))
  return found


def _distributions_by_module():
  """{top-level module: {distribution}} of the installed distributions,
  from top_level.txt or, where a wheel has none (attrs), its RECORD."""
  found = {}
  for dist in importlib.metadata.distributions():
    top = (dist.read_text('top_level.txt') or '').split()
    if not top:
      top = {str(f).split('/')[0].removesuffix('.py') for f in dist.files or []
             if '.dist-info' not in str(f).split('/')[0]}
    for module in top:
      found.setdefault(module, set()).add(_name(dist.metadata['Name']))
  return found


def test_licence_is_apache_2_and_declared():
  """LICENSE holds the Apache License 2.0, and the metadata says so."""
  project = _pyproject()['project']
  assert project['license'] == 'Apache-2.0'
  assert project['license-files'] == ['LICENSE']
  with open(os.path.join(REPO, 'LICENSE')) as f:
    text = f.read()
  assert text.split('\n', 2)[:2] == [
      ' ' * 33 + 'Apache License', ' ' * 27 + 'Version 2.0, January 2004']
  assert 'END OF TERMS AND CONDITIONS' in text


def test_the_version_has_one_source():
  """pyproject.toml reads generic_trainer/version.py; __version__ is it; the
  changelog has an entry for it."""
  from generic_trainer import version  # pylint: disable=g-import-not-at-top
  import generic_trainer  # pylint: disable=g-import-not-at-top
  config = _pyproject()
  assert config['project']['dynamic'] == ['version']
  assert config['tool']['setuptools']['dynamic']['version'] == {
      'attr': 'generic_trainer.version.__version__'}
  assert generic_trainer.__version__ == version.__version__ == '0.2.0'
  with open(os.path.join(REPO, 'CHANGELOG.md')) as f:
    headings = re.findall(r'^## (\S+)', f.read(), re.M)
  if headings[:1] == ['Unreleased']:  # What the next version will hold.
    headings = headings[1:]
  assert headings[:2] == [version.__version__, '0.1.0']


def test_version_flag_prints_the_version_without_tensorflow():
  """`generic-trainer --version` answers without importing TensorFlow."""
  code = ('import sys\nfrom generic_trainer.command import cli\n'
          'try:\n  cli.main(["--version"])\nexcept SystemExit as e:\n'
          '  print("exit", e.code)\n'
          "print(sorted(m for m in ('tensorflow', 'tfx', 'keras') "
          'if m in sys.modules))')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                       text=True, env=command_env(), check=True, timeout=120)
  assert out.stdout.splitlines() == ['generic-trainer 0.2.0', 'exit 0',
                                     '[]'], out.stdout + out.stderr


def test_every_imported_distribution_is_declared():
  """Each third-party module the package imports comes from a distribution
  that pyproject.toml names, in its dependencies or an extra."""
  project = _pyproject()['project']
  declared = {_name(r) for r in project['dependencies']}
  for requirements in project['optional-dependencies'].values():
    declared |= {_name(r) for r in requirements}
  distributions = _distributions_by_module()
  missing = {}
  for module, where in _imported_top_level_names().items():
    if (module in sys.stdlib_module_names or module == PACKAGE or
        module in USED_IF_INSTALLED):
      continue
    names = distributions.get(module, {module})
    if not names & declared:
      missing[module] = (sorted(names), where)
  assert not missing, f'imported but not declared: {missing}'


def test_extras_name_the_optional_parts():
  """jax, kubeflow, docs and test are extras; the core does not pull in the
  JAX or docs packages."""
  project = _pyproject()['project']
  extras = project['optional-dependencies']
  assert {'jax', 'kubeflow', 'docs', 'test'} <= set(extras)
  assert {_name(r) for r in extras['jax']} == {'jax', 'jaxlib'}
  assert 'mkdocs-material' in {_name(r) for r in extras['docs']}
  core = {_name(r) for r in project['dependencies']}
  assert not core & {'jax', 'jaxlib', 'flax', 'mkdocs', 'pytest',
                     'kubernetes'}


def test_only_the_package_is_installed():
  """The wheel's packages are generic_trainer and its subpackages (no bare
  `component`, `pipelines` or `module_files`)."""
  assert _pyproject()['tool']['setuptools']['packages']['find'] == {
      'include': [PACKAGE, f'{PACKAGE}.*']}


def test_lazy_modules_name_what_installs_them():
  """Each module of `system.lazy` names, for its ImportError, an extra
  pyproject.toml has, or a distribution it declares (or the standard
  library, or a package used only when installed)."""
  from generic_trainer.system import lazy  # pylint: disable=g-import-not-at-top
  project = _pyproject()['project']
  extras = project['optional-dependencies']
  declared = {_name(r) for r in project['dependencies']}
  declared |= {_name(r) for rs in extras.values() for r in rs}
  declared |= set(USED_IF_INSTALLED.values())
  modules = [m for m in vars(lazy).values() if isinstance(m, lazy.LazyModule)]
  assert len(modules) >= 20
  wrong = []
  for module in modules:
    # pylint: disable=protected-access
    name, package, extra = (module._lazy_name, module._lazy_package,
                            module._lazy_extra)
    if extra is not None:
      if extra not in extras:
        wrong.append(f'{name}: no extra {extra!r}')
    elif package not in sys.stdlib_module_names and (
        _name(package) not in declared):
      wrong.append(f'{name}: {package} is not declared')
  assert not wrong, wrong


@pytest.mark.slow
@pytest.mark.parametrize('tfx, python, resolves', [
    ('1.21.0', '3.12', True),  # TFX 1.21 without its kfp extra.
    ('1.21.0', '3.13', True),  # TFX 1.21's newest Python here.
    ('1.17.3', '3.10', False),  # A TFX release that is not tested.
])
def test_the_declared_ranges_resolve_with_the_tested_tfx_only(
    tmp_path, tfx, python, resolves):
  """`uv pip compile` of the package beside tfx==X, for Python Y on the
  glibc of TFX 1.17's and 1.21's wheels (manylinux_2_39), resolves for TFX
  1.21 and refuses TFX 1.17 for the package's own range (TFX 1.16 on
  Python 3.10: tests/test_installed_wheel.py installs the wheel beside
  it)."""
  source = tmp_path / 'source'  # Built for its metadata: a copy, writable.
  source.mkdir()
  for name in ('pyproject.toml', 'setup.py', 'README.md', 'LICENSE'):
    shutil.copy(os.path.join(REPO, name), source / name)
  shutil.copytree(os.path.join(REPO, PACKAGE), source / PACKAGE,
                  ignore=shutil.ignore_patterns('__pycache__'))
  (tmp_path / 'in.txt').write_text(f'tfx=={tfx}\n{source}\n')
  proc = subprocess.run(
      [sys.executable, '-m', 'uv', 'pip', 'compile', '--quiet',
       '--python-version', python, '--python-platform',
       'x86_64-manylinux_2_39', str(tmp_path / 'in.txt'), '-o',
       str(tmp_path / 'lock.txt')], capture_output=True, text=True,
      timeout=300, check=False,
      env=dict(os.environ, UV_PYTHON_DOWNLOADS='never'))
  assert (proc.returncode == 0) == resolves, proc.stderr[-3000:]
  if resolves:
    pins = (tmp_path / 'lock.txt').read_text()
    assert f'\ntfx=={tfx}\n' in pins and '\ntensorflow==2.21.' in pins
  else:
    assert 'tfx-generic-trainer' in proc.stderr, proc.stderr[-3000:]
