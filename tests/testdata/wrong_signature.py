"""run_fn with the wrong signature."""


def run_fn(fn_args, schema):
  del fn_args, schema
