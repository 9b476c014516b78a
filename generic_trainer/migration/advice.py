"""From a tf.estimator module to a TrainSpec: what to write instead.

TF 2.16 removed `tf.estimator`, and with it the `trainer_fn` modules that
built a canned Estimator, the `run_fn`s that called
`tf.estimator.train_and_evaluate`, and `model_to_estimator`. `advice(source)`
reads the module's source (`module_source`, without importing it) and
writes the spec that replaces it with the module's own settings: for a
canned Estimator the canned spec with its label and raw label, columns
(vocabularies, identity buckets, bucket boundaries, hash buckets, crosses,
embedding widths), the features of each part, hidden units, batch size,
optimizer and learning rate; for `model_to_estimator`, a TrainSpec whose
`build_model` calls the module's Keras model function. A value the source
computes from what is known only when it runs is named with the line to
copy it from. `module_loader` puts the advice in the error that refuses the
module, before importing it.
"""

from typing import Any, Dict, List, Optional, Tuple
import ast

from generic_trainer.system import source_tree
from generic_trainer.migration import module_source
from generic_trainer.migration import spec_lines
from generic_trainer.migration.module_source import Call
from generic_trainer.migration.module_source import Unknown
from generic_trainer.keys import RUN_FN_KEY

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
GUIDE = 'docs/guides/migration-messages.md'

_REMOVED = 'which TF 2.16 and TFX removed'
_AND_TRANSFORM = ' (and `preprocessing_fn`, for Transform)'
_RUN_FN = ('Or add a `run_fn(fn_args)` that builds and trains a Keras model '
           'and saves it to `fn_args.serving_model_dir` (docs/guides/'
           'run-fn-modules.md).')
# Estimator optimizer names (and TF1 optimizer classes) -> Keras names.
_OPTIMIZERS = {'adagrad': 'adagrad', 'adam': 'adam', 'ftrl': 'ftrl',
               'sgd': 'sgd', 'gradientdescent': 'sgd', 'rmsprop': 'rmsprop',
               'adadelta': 'adadelta', 'adamax': 'adamax', 'nadam': 'nadam',
               'adamw': 'adamw', 'proximaladagrad': 'adagrad'}


def advice(source: str, uses: Optional[List[Tuple[int, str]]] = None) -> str:
  """What to write instead of the tf.estimator module whose source this is.

  `uses`: where it uses tf.estimator (`estimator_uses.estimator_uses`), for
  the message's first line.
  """
  where = ''
  if uses:
    shown = '; '.join(f'line {n}: `{text}`' for n, text in uses[:3])
    more = f' and {len(uses) - 3} more' if len(uses) > 3 else ''
    where = f' ({shown}{more})'
  intro = (f'This module uses tf.estimator{where}, {_REMOVED}; it cannot be '
           'imported, so it was read, not run.' if uses else
           'This module defines `trainer_fn`, the tf.estimator API that TF '
           '2.16 and TFX removed.')
  try:
    reader = module_source.Reader(source)
  except SyntaxError:
    reader = None
  read = ''
  if reader is not None:
    try:
      canned = reader.calls(lambda n: n.rsplit('.', 1)[-1] in REPLACEMENTS)
      if canned:
        return f'{intro} {_canned_advice(reader, canned)}'
      keras_models = reader.calls(lambda n: n.endswith('model_to_estimator'))
      if keras_models:
        return f'{intro} {_keras_advice(reader, keras_models[0])}'
    except Exception:  # pylint: disable=broad-except
      # A module the reader cannot follow still gets the advice, with what
      # could be read of it: the module is refused either way, never with
      # a crash of the reader.
      read = _what_was_read(reader)
  return (f'{intro}{read} Replace it with a TrainSpec: a canned one '
          '(generic_trainer.canned: LinearClassifierSpec, DNNClassifierSpec, '
          'DNNLinearCombinedClassifierSpec and their Regressor twins) or '
          'your own with a head (generic_trainer.heads). ' + _RUN_FN +
          f' See {GUIDE}.')


def _what_was_read(reader) -> str:
  """' It builds a tf.estimator.DNNClassifier (line 40); its settings could
  not be read from the source: copy them from there.' (or '' when nothing
  could be read)"""
  try:
    found = [(source_tree.dotted(c.func).rsplit('.', 1)[-1], c.lineno)
             for c in reader.calls(lambda n: n.rsplit('.', 1)[-1] in
                                   REPLACEMENTS)]
  except Exception:  # pylint: disable=broad-except
    found = []
  if not found:
    return (' Its settings could not be read from its source (a construct '
            'the reader does not follow).')
  name, line = found[0]
  return (f' It builds a tf.estimator.{name} (line {line}), which the canned '
          f'spec {REPLACEMENTS[name]} replaces; its settings (columns, '
          'hidden units, optimizer) could not be read from the source: copy '
          'them from there.')


# Canned Estimators.
def _canned_advice(reader, calls) -> str:
  node = calls[0]
  estimator = source_tree.dotted(node.func).rsplit('.', 1)[-1]
  spec = REPLACEMENTS[estimator]
  call = reader.value(node, reader.scope_at(node))
  if not isinstance(call, Call):
    call = Call(estimator, [], {}, node)
  lines, names = _spec_lines(reader, estimator, call)
  also = ''.join(f' The {source_tree.dotted(c.func).rsplit(".", 1)[-1]} '
                 f'of line {c.lineno} becomes '
                 f'{REPLACEMENTS[source_tree.dotted(c.func).rsplit(".", 1)[-1]]}.'
                 for c in calls[1:])
  keep = ('Keep `preprocessing_fn` for Transform and replace'
          if 'preprocessing_fn' in reader.functions else 'Replace')
  entry = ' and '.join(f'`{n}`' for n in ('trainer_fn', RUN_FN_KEY)
                       if n in reader.functions) or 'the training code'
  imports = ', '.join(sorted(set(names) | {spec}))
  body = '\n'.join(lines)
  return (
      f'It builds a tf.estimator.{estimator} (line {node.lineno}): the canned '
      f'spec {spec} replaces it (the same kind of model, Keras preprocessing '
      'layers in place of the feature columns). '
      f'{keep} {entry} and the Estimator code with these lines, read '
      'from the module:\n\n'
      f'from generic_trainer.canned import {imports}\n\n'
      f'class Spec({spec}):\n{body}\n\n'
      f'See {GUIDE}.{also} {_RUN_FN}')


def _spec_lines(reader, estimator: str, call: Call):
  """The class body's lines, and the column names they use."""
  lines, names = [], set()
  label, raw_label, label_note = _labels(reader)
  lines.append(spec_lines.setting('label_key', label, label_note or (
      'the label (its transformed name with Transform)')))
  if raw_label is not None:
    lines.append(spec_lines.setting('raw_label_key', raw_label,
                          'the raw label: no serving request carries it'))
  weight = call.kwargs.get('weight_column')
  if weight is not None:
    lines.append(spec_lines.setting('weight_key', spec_lines.column_key(weight), 'weight_column'))
  classifier = estimator.endswith('Classifier')
  if classifier:
    n_classes = call.kwargs.get('n_classes', 2)
    vocabulary = call.kwargs.get('label_vocabulary')
    if vocabulary is not None:
      lines.append(spec_lines.setting('label_vocabulary', vocabulary,
                            'label_vocabulary'))
    else:
      lines.append(spec_lines.setting('n_classes', n_classes,
                            'the Estimator\'s n_classes (2 by default)'))
  if estimator.endswith('Regressor') and 'label_dimension' in call.kwargs:
    lines.append(spec_lines.setting('label_dimension', call.kwargs['label_dimension'],
                          'label_dimension'))
  columns: Dict[str, Tuple[str, str]] = {}
  crosses: List[str] = []
  if estimator.startswith('DNNLinearCombined'):
    parts = [('linear_feature_keys', 'linear_feature_columns'),
             ('dnn_feature_keys', 'dnn_feature_columns')]
  else:
    parts = [('feature_keys', 'feature_columns')]
  for member, argument in parts:
    value = call.kwargs.get(argument)
    if value is None and argument == 'feature_columns' and call.args:
      value = call.args[0]
    if value is None:
      continue
    if isinstance(value, Unknown) or not isinstance(value, (list, tuple)):
      lines.append(spec_lines.setting(member, value, argument))
      continue
    keys = []
    for column in value:
      spec_lines.read_column(column, columns, crosses, keys, names)
    lines.append(spec_lines.setting(member, keys, argument))
  if columns:
    lines.append('  columns = {')
    for key, (expression, note) in columns.items():
      comment = f'  # {note}' if note else ''
      lines.append(f'      {key!r}: {expression},{comment}')
    lines.append('  }')
  if crosses:
    names.add('Crossed')
    lines.append('  crosses = [' + ', '.join(crosses) + ']')
  hidden = call.kwargs.get('dnn_hidden_units', call.kwargs.get('hidden_units'))
  if hidden is not None:
    member = 'dnn_hidden_units' if estimator.startswith(
        'DNNLinear') else 'hidden_units'
    lines.append(spec_lines.setting(member, hidden, 'the Estimator\'s hidden units'))
  dropout = call.kwargs.get('dnn_dropout', call.kwargs.get('dropout'))
  if dropout is not None:
    lines.append(spec_lines.setting('dnn_dropout' if estimator.startswith('DNNLinear')
                          else 'dropout', dropout, 'dropout'))
  activation = call.kwargs.get('dnn_activation_fn',
                               call.kwargs.get('activation_fn'))
  if isinstance(activation, Unknown) and activation.text.startswith(
      ('tf.nn.', 'tf.keras.activations.')):
    lines.append(spec_lines.setting('dnn_activation' if estimator.startswith(
        'DNNLinear') else 'activation', activation.text.rsplit('.', 1)[-1],
                          activation.text))
  batch_size = _batch_size(reader)
  if batch_size is not None:
    lines.append(spec_lines.setting('batch_size', batch_size[0], batch_size[1]))
  lines += _optimizer_lines(call, estimator)
  return lines, names


def _labels(reader) -> Tuple[Any, Any, str]:
  """(label_key, raw_label_key or None, where the label was read)."""
  transformed = {}
  if 'preprocessing_fn' in reader.functions:
    out = reader.call_function('preprocessing_fn', None, {})
    transformed = out if isinstance(out, dict) else {}
  constants = [(name, value) for name, value in reader.constants.items()
               if 'LABEL' in name.upper() and isinstance(value, str)]
  candidates = []
  for node in reader.calls(lambda n: True):
    for keyword in node.keywords:
      if keyword.arg == 'label_key':
        candidates.append((reader.value(keyword.value, reader.scope_at(node)),
                           f'label_key= at line {node.lineno}'))
  for node in reader.calls(lambda n: n.endswith('.pop')):
    if node.args:
      candidates.append((reader.value(node.args[0], reader.scope_at(node)),
                         f'popped from the features at line {node.lineno}'))
  for name, value in constants:
    candidates.append((value, f'{name}, line {reader.lines.get(name, 0)}'))
  known = [(v, why) for v, why in candidates if isinstance(v, str)]
  if transformed:
    label = next(((v, why) for v, why in known if v in transformed), None)
    raw = next(((v, why) for v, why in known if v not in transformed), None)
    if label is None and raw is not None:
      derived = [k for k in transformed if isinstance(k, str) and
                 raw[0] in k and k != raw[0]]
      if len(derived) == 1:
        label = (derived[0], f'preprocessing_fn\'s output for {raw[0]!r}')
    return ((label[0] if label else '...'),
            (raw[0] if raw and (not label or raw[0] != label[0]) else None),
            label[1] if label else 'the name preprocessing_fn gives the label')
  if known:
    return known[0][0], None, known[0][1]
  return '...', None, ''


def _batch_size(reader) -> Optional[Tuple[int, str]]:
  found = []
  for node in ast.walk(reader.tree):
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
      for target in node.targets:
        if isinstance(target, ast.Name) and 'batch_size' in target.id.lower(
        ) and isinstance(node.value.value, int):
          rank = 0 if 'train' in target.id.lower() else 1
          found.append((rank, node.lineno, node.value.value,
                        f'{target.id}, line {node.lineno}'))
  if not found:
    return None
  _, _, value, why = min(found)
  return value, why


def _optimizer_lines(call: Call, estimator: str) -> List[str]:
  arguments = (['dnn_optimizer', 'linear_optimizer']
               if estimator.startswith('DNNLinear') else ['optimizer'])
  given = [(a, call.kwargs[a]) for a in arguments if a in call.kwargs]
  if not given:
    default = {'DNNLinearCombined': 'Ftrl for the linear part and Adagrad '
                                    '(learning rate 0.05) for the DNN',
               'DNN': 'Adagrad (learning rate 0.05)',
               'Linear': 'Ftrl'}
    which = next(v for k, v in default.items() if estimator.startswith(k))
    return [f'  # The Estimator used its default optimizers: {which}.',
            "  # The spec trains with optimizer_name = 'adam' and",
            '  # learning_rate = 0.01 unless you set them here.']
  argument, value = given[0]
  lines = []
  name, rate = None, None
  if isinstance(value, str):
    name = value
  elif isinstance(value, Call):
    name = value.short
    rate = value.arg(0, 'learning_rate')
  if name is not None:
    key = name.lower().replace('optimizer', '').replace('_', '')
    if key in _OPTIMIZERS:
      lines.append(spec_lines.setting('optimizer_name', _OPTIMIZERS[key],
                            f'{argument}'))
    else:
      lines.append(f'  # {argument}: {name} has no Keras name here; set '
                   'optimizer_name.')
  else:
    lines.append(spec_lines.setting('optimizer_name', value, argument))
  if rate is not None:
    lines.append(spec_lines.setting('learning_rate', rate, f'{argument}\'s'))
  if len(given) > 1:
    lines.append(f'  # {given[1][0]} is not carried over: one optimizer '
                 'trains both parts.')
  return lines


# model_to_estimator.
def _keras_advice(reader, node) -> str:
  keras_arg = next((k.value for k in node.keywords if k.arg == 'keras_model'),
                   node.args[0] if node.args else None)
  builder, builder_line, model_name = None, None, None
  if isinstance(keras_arg, ast.Call) and source_tree.dotted(
      keras_arg.func) in reader.functions:
    builder = reader.segment(keras_arg)
    builder_line = reader.functions[source_tree.dotted(
        keras_arg.func)].lineno
  elif isinstance(keras_arg, ast.Name):
    model_name = keras_arg.id
    function = reader.enclosing_function(node)
    for statement in ast.walk(function) if function else []:
      if isinstance(statement, ast.Assign) and any(
          isinstance(t, ast.Name) and t.id == model_name
          for t in statement.targets) and isinstance(statement.value,
                                                     ast.Call):
        name = source_tree.dotted(statement.value.func)
        if name in reader.functions:
          builder = reader.segment(statement.value)
          builder_line = reader.functions[name].lineno
  label, raw_label, label_note = _labels(reader)
  compile_call = next(iter(reader.calls(lambda n: n.endswith('.compile'))),
                      None)
  optimizer = loss = None
  if compile_call is not None:
    for keyword in compile_call.keywords:
      if keyword.arg == 'optimizer':
        optimizer = _keras3(reader.segment(keyword.value))
      elif keyword.arg == 'loss':
        loss = _keras3(reader.segment(keyword.value))
  lines = [spec_lines.setting('label_key', label, label_note or 'the label')]
  if raw_label is not None:
    lines.append(spec_lines.setting('raw_label_key', raw_label,
                          'the raw label: no serving request carries it'))
  batch_size = _batch_size(reader)
  if batch_size is not None:
    lines.append(spec_lines.setting('batch_size', batch_size[0], batch_size[1]))
  call_builder = builder or '...'
  where = (f'  # the Keras model model_to_estimator wrapped (line '
           f'{builder_line}); its inputs named after the features'
           if builder else '  # return the Keras model model_to_estimator '
           f'wrapped (line {node.lineno})')
  lines += ['', '  def build_model(self):', f'    return {call_builder}{where}']
  if optimizer:
    lines += ['', '  def build_optimizer(self):',
              f'    return keras.optimizers.get({optimizer})  # its compile(), '
              f'line {compile_call.lineno}'
              if optimizer.startswith(("'", '"')) else
              f'    return {optimizer}  # its compile(), line '
              f'{compile_call.lineno}']
  else:
    lines += ['', '  def build_optimizer(self):',
              '    return keras.optimizers.Adam()  # the model\'s optimizer']
  if loss:
    lines += ['', '  def build_loss(self):',
              f'    return keras.losses.get({loss})  # its compile(), line '
              f'{compile_call.lineno}'
              if loss.startswith(("'", '"')) else
              f'    return {loss}  # its compile(), line '
              f'{compile_call.lineno}']
  else:
    lines += ['', '  def build_loss(self):',
              '    return ...  # the loss the model was compiled with']
  body = '\n'.join(lines)
  return (
      f'It wraps a Keras model with model_to_estimator (line {node.lineno}): '
      'train the Keras model itself with a TrainSpec, which exports it with '
      'serving signatures. Keep the function that builds the model'
      f'{_AND_TRANSFORM if "preprocessing_fn" in reader.functions else ""}'
      ', use Keras 3 (`import keras` in place of '
      '`tf.keras`), and replace the Estimator code with these lines, read '
      'from the module:\n\n'
      'import keras\nfrom generic_trainer import TrainSpec\n\n'
      f'class Spec(TrainSpec):\n{body}\n\n'
      f'See {GUIDE}. {_RUN_FN}')


def _keras3(text: str) -> str:
  return text.replace('tf.keras.', 'keras.').replace('lr=', 'learning_rate=')
