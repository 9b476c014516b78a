"""Runs GenericExecutor once in this process, as an orchestrator's attempt.

    python tests/fault_runner.py WORKDIR ATTEMPT MODULE_FILE TRAIN_STEPS [CUSTOM_CONFIG_JSON]
    python tests/fault_runner.py command OUTPUT_DIR MODULE_FILE CSV STEPS [slow-publication] [no-exchange]

The penguin Examples and Schema artifacts are written under WORKDIR on the
first call; the Model and ModelRun artifacts are WORKDIR/model and
WORKDIR/model_run for every attempt (as a retry reuses them), and each
attempt gets its own stateful working dir, WORKDIR/swd/ATTEMPT, as TFX gives.
The fault-injection tests SIGKILL this process.

    python tests/fault_runner.py evict CACHE_FOLDER BUDGET_BYTES

evicts the parsed rows cache CACHE_FOLDER to BUDGET_BYTES, stopping for
120 s inside the first removal, after its first file is gone (writing
CACHE_FOLDER/../evicting then): the test SIGKILLs it there.

`command` runs the generic-trainer command instead; with
`slow-publication`, every rename, replace and exchange of the publication
(`Layout.take_model`, then the checkpoint's removal) waits 0.25 s, and
OUTPUT_DIR.publishing is created as it starts, so that a test can kill it
at any moment of it; with `no-exchange`, as on a filesystem without
renameat2's exchange.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(workdir, attempt, module_file, train_steps, custom_config='null'):
  import conftest  # pylint: disable=g-import-not-at-top
  from tfx.dsl.components.base.base_executor import BaseExecutor  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  examples, schema = conftest.write_penguin_artifacts(
      os.path.join(workdir, 'inputs'))
  model = standard_artifacts.Model()
  model.uri = os.path.join(workdir, 'model')
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(workdir, 'model_run')
  context = BaseExecutor.Context(
      stateful_working_dir=os.path.join(workdir, 'swd', attempt))
  GenericExecutor(context).Do(
      {'examples': [examples], 'schema': [schema]},
      {'model': [model], 'model_run': [model_run]},
      {'module_file': module_file, 'custom_config': custom_config,
       'train_args': json.dumps({'num_steps': int(train_steps)}),
       'eval_args': '{}'})


def evict(folder, budget_bytes):
  import time  # pylint: disable=g-import-not-at-top
  from generic_trainer.data.kept import cache as kept_cache  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import removal  # pylint: disable=g-import-not-at-top

  def rmtree_cut_short(path, *unused_args, **unused_kwargs):
    for root, _, files in os.walk(path):
      if files:
        os.unlink(os.path.join(root, sorted(files)[0]))
        break
    with open(os.path.join(os.path.dirname(folder), 'evicting'), 'w') as f:
      f.write(path)
    time.sleep(120)

  removal.remove_tree = rmtree_cut_short  # The one way a tree is removed.
  kept_cache.SpanCache(folder, budget_bytes=int(budget_bytes)
                       ).evict_to_budget()


def command(output_dir, module_file, csv, steps, *options):
  import time  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import cli  # pylint: disable=g-import-not-at-top
  from generic_trainer.command import layout  # pylint: disable=g-import-not-at-top
  from generic_trainer.system import atomic_files  # pylint: disable=g-import-not-at-top
  if 'no-exchange' in options:
    atomic_files.exchange = lambda first, second: False
  if 'slow-publication' in options:
    take_model = layout.Layout.take_model

    def slowly(real):
      def call(*args, **kwargs):
        time.sleep(0.25)
        return real(*args, **kwargs)
      return call

    def slow_take_model(self):
      with open(output_dir.rstrip('/') + '.publishing', 'w'):
        pass
      os.rename, os.replace = slowly(os.rename), slowly(os.replace)
      atomic_files.exchange = slowly(atomic_files.exchange)
      take_model(self)

    layout.Layout.take_model = slow_take_model
  sys.exit(cli.main(['--module-file', module_file, '--train-data', csv,
                     '--output-dir', output_dir, '--steps', steps]))


if __name__ == '__main__':
  if sys.argv[1] == 'evict':
    evict(*sys.argv[2:])
  elif sys.argv[1] == 'command':
    command(*sys.argv[2:])
  else:
    main(*sys.argv[1:])
