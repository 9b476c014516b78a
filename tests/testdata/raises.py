"""run_fn that fails inside a helper, as user code does."""


def _load_vocabulary(path):
  raise FileNotFoundError(f'vocabulary {path} is missing')


def run_fn(fn_args):
  _load_vocabulary('/no/such/vocab.txt')
