"""run_fn that leaves a saved_model.pb that is not a SavedModel."""

import os


def run_fn(fn_args):
  os.makedirs(fn_args.serving_model_dir)
  with open(os.path.join(fn_args.serving_model_dir, 'saved_model.pb'),
            'wb') as f:
    f.write(b'not a protobuf')
