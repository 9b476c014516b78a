"""From a tf.estimator module to a canned spec: what to write instead.

TF 2.16 removed `tf.estimator`, and with it the `trainer_fn` modules that
built a canned Estimator. `advice(source)` reads which Estimators a
module's source builds and says which canned spec replaces each, with the
few lines to write; `module_loader` puts it in the error that refuses a
`trainer_fn` module.
"""

import re

# tf.estimator's canned Estimators and the canned specs that replace them.
REPLACEMENTS = {
    'DNNLinearCombinedClassifier': 'DNNLinearCombinedClassifierSpec',
    'DNNLinearCombinedRegressor': 'DNNLinearCombinedRegressorSpec',
    'DNNLinearCombinedEstimator': 'DNNLinearCombinedSpec',
    'DNNClassifier': 'DNNClassifierSpec',
    'DNNRegressor': 'DNNRegressorSpec',
    'DNNEstimator': 'DNNSpec',
    'LinearClassifier': 'LinearClassifierSpec',
    'LinearRegressor': 'LinearRegressorSpec',
    'LinearEstimator': 'LinearSpec',
}

# The attributes of the spec that take each Estimator's main arguments.
_LINES = {
    'DNNLinearCombined': ('  linear_feature_keys = [...]  # linear_feature_columns\n'
                          '  dnn_feature_keys = [...]     # dnn_feature_columns\n'
                          '  dnn_hidden_units = [100, 70, 50, 25]\n'),
    'DNN': '  hidden_units = [...]  # hidden_units\n',
    'Linear': '  feature_keys = [...]  # feature_columns\n',
}

_INTRO = ('This module defines `trainer_fn`, the tf.estimator API that TF '
          '2.16 and TFX removed.')
_RUN_FN = ('Or add a `run_fn(fn_args)` that builds and trains the model and '
           'saves it to `fn_args.serving_model_dir` (see the docs, "Module '
           'files (run_fn)", docs/guides/run-fn-modules.md).')


def estimators_in(source: str):
  """The canned Estimators `source` names, in order of first appearance."""
  pattern = r'\b(' + '|'.join(sorted(REPLACEMENTS, key=len, reverse=True)) + (
      r')\b')
  found = []
  for match in re.finditer(pattern, source):
    if match.group(1) not in found:
      found.append(match.group(1))
  return found


def advice(source: str) -> str:
  """What to write instead of the `trainer_fn` module whose source this is."""
  found = estimators_in(source)
  if not found:
    return (f'{_INTRO} Replace it with a TrainSpec: a canned one '
            '(generic_trainer.canned: LinearClassifierSpec, DNNClassifierSpec, '
            'DNNLinearCombinedClassifierSpec and their Regressor twins) or '
            'your own with a head (generic_trainer.heads). ' + _RUN_FN)
  estimator = found[0]
  spec = REPLACEMENTS[estimator]
  family = next(k for k in _LINES if estimator.startswith(k))
  also = ''.join(f' {e} becomes {REPLACEMENTS[e]}.' for e in found[1:])
  return (
      f'{_INTRO} It builds a tf.estimator.{estimator}: the canned spec '
      f'{spec} replaces it (the same kind of model, Keras preprocessing '
      'layers in place of the feature columns, read from the schema). Keep '
      '`preprocessing_fn` for Transform and replace `trainer_fn` and the '
      'Estimator code with:\n\n'
      f'from generic_trainer.canned import {spec}\n\n'
      f'class Spec({spec}):\n'
      "  label_key = '...'  # the label (its transformed name with Transform)\n"
      f'{_LINES[family]}'
      '\nSee the docs, "Migrating from tf.estimator" '
      f'(docs/guides/migrating-from-estimator.md).{also} {_RUN_FN}')
