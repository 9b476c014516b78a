"""TFX's own Trainer executor tests pass against GenericExecutor.

`tfx/components/trainer/executor_test.py` of the installed TFX, unchanged
but for the executor (`tfx_trainer_executor_cases.py`), in a pytest process
of its own with TF_USE_LEGACY_KERAS=1: TFX's test module files are written
for tf.keras 2, and TFX's own executor needs the same.
"""

import os
import subprocess
import sys

import pytest

from conftest import REPO, command_env

CASES = os.path.join(REPO, 'tests', 'tfx_trainer_executor_cases.py')


@pytest.mark.slow
def test_tfx_trainer_executor_tests_pass_with_generic_executor():
  """testDo, testDoWithHyperParameters and testMultipleArtifacts (two
  Examples artifacts) pass."""
  env = dict(command_env(), TF_USE_LEGACY_KERAS='1')
  result = subprocess.run(
      [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
       '-o', 'addopts=', CASES], cwd=os.path.join(REPO, 'tests'), env=env,
      capture_output=True, text=True, timeout=900, check=False)
  out = result.stdout + result.stderr
  assert result.returncode == 0, out[-8000:]
  assert '3 passed' in result.stdout, out[-3000:]
