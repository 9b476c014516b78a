"""A module that imports a package that is not installed."""

import no_such_package_for_generic_trainer  # noqa: F401


def run_fn(fn_args):
  del fn_args
