"""The entry points a training is asked for by, and what each one means.

The component (a pipeline), the `generic-trainer` command and the notebook
`Estimator` resolve the same plan (`plan.plan.resolve`); what differs
between them is data the plan carries, never a test of who is asking:

  - how a setting is spelled in a message: the component and the
    notebook say `keras_version='x'`, the command `--keras-version=x`;
  - whether the training may join the cluster its environment describes
    (TF_CONFIG, a JobSet): only a pipeline's step is run as a member;
  - whether it must train in the caller's process (the notebook, whose
    model stays there for `evaluate` and `predict`), never in a child;
  - whether an error of the user's code is reported as a RunFnError with
    its traceback (a pipeline's log, the command's message) or raised as
    it is (a notebook shows the traceback itself).
"""

from typing import Any

import attr


@attr.s(frozen=True)
class EntryPoint:
  """One entry point's spelling and rules.

  Attributes:
    name: 'component', 'command' or 'notebook'.
    flags: Settings are spelled as command-line flags (`--num-workers`).
    joins_cluster: A TF_CONFIG or a JobSet in the environment makes this
      process a member of that cluster (`launch.cluster_environment`);
      otherwise it trains on this machine alone, whatever the environment.
    trains_in_caller: The training runs in the caller's process, which
      must already give what the plan asks (its Keras, its backend).
    wraps_user_errors: An error raised by the user's code becomes a
      RunFnError with its traceback in the message.
    hparams: Where its hyperparameters come from, as a message names it.
  """
  name = attr.ib(type=str)
  flags = attr.ib(type=bool, default=False)
  joins_cluster = attr.ib(type=bool, default=False)
  trains_in_caller = attr.ib(type=bool, default=False)
  wraps_user_errors = attr.ib(type=bool, default=True)
  hparams = attr.ib(type=str, default="the 'hyperparameters' input")

  def setting(self, key: str) -> str:
    """The setting `key` as this entry point spells it: `--num-workers` or
    `'num_workers'`."""
    return '--' + key.replace('_', '-') if self.flags else f"'{key}'"

  def value(self, key: str, value: Any) -> str:
    """The setting with its value: `--num-workers=2` or `num_workers=2`."""
    if self.flags:
      return f"--{key.replace('_', '-')}={value}"
    return f'{key}={value!r}'


COMPONENT = EntryPoint('component', joins_cluster=True)
COMMAND = EntryPoint('command', flags=True, hparams='--hparams')
NOTEBOOK = EntryPoint('notebook', trains_in_caller=True,
                      wraps_user_errors=False, hparams='Estimator(hparams=...)')
