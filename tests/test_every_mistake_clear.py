"""Every mistake clear, round three (issue 30): data read as meant or
refused, no raw error from a cause we can name, user code that cannot keep
the process alive; each message with its four parts."""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import PENGUIN_MODULE, REPO
from conftest import command_env
from message_parts import assert_four_parts
from generic_trainer.errors import InvalidArgumentError

SPEC_MODULE = os.path.join(REPO, 'module_files', 'penguin_spec.py')


def _main(*argv):
  from generic_trainer.local import cli  # pylint: disable=g-import-not-at-top
  return cli.main(list(argv))


def _module(tmp_path, name, source):
  path = tmp_path / f'{name}.py'
  path.write_text(textwrap.dedent(source))
  return str(path)


# Wrong wiring is named at construction.
def test_examples_wired_to_a_schema_channel_is_named_at_construction():
  """examples=schema_gen.outputs['schema']: our error naming the input, the
  type it takes and the type it got, instead of TFX's bare TypeError."""
  from tfx.components import SchemaGen  # pylint: disable=g-import-not-at-top
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  schema_gen = SchemaGen(
      statistics=Channel(type=standard_artifacts.ExampleStatistics))
  with pytest.raises(InvalidArgumentError) as raised:
    GenericTrainer(examples=schema_gen.outputs['schema'],
                   module_file=PENGUIN_MODULE)
  message = str(raised.value)
  assert message == (
      "'examples' is wired to a channel of Schema artifacts "
      "(SchemaGen.outputs['schema']), which GenericTrainer cannot read as "
      'examples. Expected a channel of Examples artifacts. Received: '
      "examples=a channel of Schema artifacts (SchemaGen.outputs['schema'])."
      " Connect example_gen.outputs['examples'] (or Transform's "
      "outputs['transformed_examples']) to examples.")
  assert isinstance(raised.value.__cause__, TypeError)
  assert_four_parts(message)


@pytest.mark.parametrize('name', ['schema', 'transform_graph', 'base_model',
                                  'hyperparameters', 'statistics'])
def test_every_input_of_the_wrong_type_is_named(name):
  """Any input given a channel of another artifact type is refused with its
  own name and the output to connect."""
  from tfx.types import Channel, standard_artifacts  # pylint: disable=g-import-not-at-top,g-multiple-import
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  examples = Channel(type=standard_artifacts.Examples)
  with pytest.raises(InvalidArgumentError,
                     match=rf"^'{name}' is wired to a channel of Examples "
                     r'artifacts, which GenericTrainer cannot read as') as e:
    GenericTrainer(examples=examples, module_file=PENGUIN_MODULE,
                   **{name: examples})
  assert_four_parts(str(e.value))


def test_a_component_instead_of_its_channel_is_named():
  """examples=example_gen (the component): told to pass its output."""
  from tfx.components import CsvExampleGen  # pylint: disable=g-import-not-at-top
  from generic_trainer.component import GenericTrainer  # pylint: disable=g-import-not-at-top
  example_gen = CsvExampleGen(input_base='/tmp/data')
  with pytest.raises(InvalidArgumentError,
                     match=r"^'examples' is wired to the CsvExampleGen "
                     r"component itself \(its outputs: \['examples'\]\), not "
                     r'one of its output channels') as e:
    GenericTrainer(examples=example_gen, module_file=PENGUIN_MODULE)
  assert_four_parts(str(e.value))


# User code cannot keep the process alive.
_PIPELINE_SCRIPT = '''
import os, sys, textwrap, time
sys.path.insert(0, {tests!r})
from conftest import write_penguin_artifacts
from tfx.types import standard_artifacts
from generic_trainer.executor import GenericExecutor

root = {root!r}
examples, schema = write_penguin_artifacts(os.path.join(root, 'data'))
module = os.path.join(root, 'leaves_a_thread.py')
with open(module, 'w') as f:
  f.write(textwrap.dedent("""
      import sys, threading, time
      sys.path.insert(0, {testdata!r})
      from records_fn_args import run_fn as _record

      def run_fn(fn_args):
        threading.Thread(target=time.sleep, args=(3600,),
                         name='forever').start()
        _record(fn_args)
      """))
model = standard_artifacts.Model()
model.uri = os.path.join(root, 'model')
model_run = standard_artifacts.ModelRun()
model_run.uri = os.path.join(root, 'model_run')
GenericExecutor().Do(
    {{'examples': [examples], 'schema': [schema]}},
    {{'model': [model], 'model_run': [model_run]}},
    {{'train_args': '{{"num_steps": 2}}', 'eval_args': '{{"num_steps": 1}}',
     'custom_config': 'null', 'module_file': module}})
print('pipeline done', flush=True)
'''


@pytest.mark.slow
def test_thread_left_by_run_fn_does_not_keep_a_pipeline_script_alive(
    tmp_path):
  """A user's own script that runs the executor (as LocalDagRunner does, in
  its process) exits once the run ends, though run_fn left a non-daemon
  thread sleeping an hour; the log names the thread."""
  from conftest import TESTDATA  # pylint: disable=g-import-not-at-top
  script = tmp_path / 'my_pipeline.py'
  script.write_text(_PIPELINE_SCRIPT.format(
      tests=os.path.join(REPO, 'tests'), root=str(tmp_path),
      testdata=TESTDATA))
  start = time.monotonic()
  proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                        text=True, env=command_env(), cwd=str(tmp_path),
                        timeout=240, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'pipeline done' in proc.stdout
  assert ('left 1 non-daemon thread(s) running (forever). Expected user code '
          'to join its threads before returning') in proc.stderr
  assert time.monotonic() - start < 200


def test_stray_threads_become_daemons_and_are_named(caplog):
  """The mechanism itself: a non-daemon thread started by user code is a
  daemon afterwards, and not joined at exit."""
  import threading  # pylint: disable=g-import-not-at-top
  from generic_trainer.core import stray_threads  # pylint: disable=g-import-not-at-top
  before = set(threading.enumerate())
  stop = threading.Event()
  thread = threading.Thread(target=stop.wait, name='uploader')
  thread.start()
  try:
    assert stray_threads.release(before, 'run_fn') == ['uploader']
    assert thread.daemon
    assert thread._tstate_lock not in threading._shutdown_locks  # pylint: disable=protected-access
  finally:
    stop.set()
    thread.join()
  assert 'run_fn left 1 non-daemon thread(s) running (uploader)' in (
      caplog.text)
