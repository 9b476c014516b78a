"""`system.lazy`: a module declared once, imported on first use."""

import sys

import pytest

from generic_trainer.system import lazy


@pytest.fixture
def module_file(tmp_path, monkeypatch):
  """A module `lazy_probe` on the path, not imported yet."""
  (tmp_path / 'lazy_probe.py').write_text('VALUE = 42\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.delitem(sys.modules, 'lazy_probe', raising=False)
  yield 'lazy_probe'
  sys.modules.pop('lazy_probe', None)


def test_a_lazy_module_imports_on_first_use(module_file):
  """Declaring one imports nothing; reading an attribute imports it."""
  probe = lazy.LazyModule(module_file)
  assert module_file not in sys.modules
  assert repr(probe) == "<LazyModule 'lazy_probe' (not imported yet)>"
  assert probe.VALUE == 42
  assert sys.modules[module_file].VALUE == 42
  assert repr(probe) == "<LazyModule 'lazy_probe' (imported)>"


def test_once_imported_it_reads_the_module_itself(module_file, monkeypatch):
  """What is set on the module later (a test's patch) is what it gives."""
  probe = lazy.LazyModule(module_file)
  assert probe.VALUE == 42
  monkeypatch.setattr(sys.modules[module_file], 'VALUE', 7)
  assert probe.VALUE == 7
  with pytest.raises(AttributeError, match='MISSING'):
    probe.MISSING  # pylint: disable=pointless-statement


def test_what_tools_probe_imports_nothing(module_file):
  """pytest's and inspect's probes (`__test__`, `__wrapped__`) find
  nothing before the import, and do not import."""
  probe = lazy.LazyModule(module_file)
  assert getattr(probe, '__test__', None) is None
  assert getattr(probe, '__wrapped__', None) is None
  assert module_file not in sys.modules


def test_a_missing_module_names_the_extra_that_installs_it():
  """The ImportError names the module and the pip command of its extra."""
  missing = lazy.LazyModule('no_such_module.client', extra='kubeflow')
  with pytest.raises(ImportError, match=(
      r"needs the module 'no_such_module.client' here, which cannot be "
      r"imported \(No module named 'no_such_module'\)\. Expected it "
      r"installed; the 'kubeflow' extra installs it: pip install "
      r"'tfx-generic-trainer\[kubeflow\]'\.")) as raised:
    missing.models  # pylint: disable=pointless-statement
  assert raised.value.name == 'no_such_module.client'
  assert isinstance(raised.value, ModuleNotFoundError)
  assert not lazy.installed(missing)


def test_a_missing_module_names_the_package_that_installs_it():
  """Without an extra, the message names the distribution to install."""
  missing = lazy.LazyModule('no_such_module', package='no-such-package')
  with pytest.raises(ImportError, match=(
      'the package no-such-package installs it: pip install '
      'no-such-package')):
    missing.anything  # pylint: disable=pointless-statement


def test_installed_tells_an_importable_module(module_file):
  """`installed` imports the module when it can."""
  assert lazy.installed(lazy.LazyModule(module_file))
  assert module_file in sys.modules
