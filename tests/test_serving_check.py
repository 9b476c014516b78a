"""The serving check: each export is called as TF Serving's clients call it,
and each serving mistake is refused before publication with its message.

The exports are tiny tf.Modules (a few lines each), saved per test; the
requests come from four label-less tf.Examples of a float `x`, an int `n`
and a string `word`, with a float `label` and `weight` that no client sends.
"""

import os

import pytest

from generic_trainer.export_checks import serving_check
from generic_trainer.errors import ExportValidationError, ServingCheckError
from generic_trainer.heads import serving_methods

NOT_SERVED = {'label': 'the label', 'weight': 'the weight'}


def _example(i):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  f = tf.train.Feature
  return tf.train.Example(features=tf.train.Features(feature={
      'x': f(float_list=tf.train.FloatList(value=[i / 4])),
      'n': f(int64_list=tf.train.Int64List(value=[i])),
      'word': f(bytes_list=tf.train.BytesList(value=[b'w%d' % i])),
      'label': f(float_list=tf.train.FloatList(value=[i % 2])),
      'weight': f(float_list=tf.train.FloatList(value=[1.0])),
  })).SerializeToString()


@pytest.fixture(scope='module')
def eval_files(tmp_path_factory):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = str(tmp_path_factory.mktemp('eval') / 'data.tfrecord')
  with tf.io.TFRecordWriter(path) as writer:
    for i in range(4):
      writer.write(_example(i))
  return [path]


def _requests():
  examples = serving_check.without([_example(i) for i in range(4)],
                                   NOT_SERVED)
  return serving_check.Requests(
      examples, serving_check.features_of(examples), NOT_SERVED,
      transformed_only=['x_xf'])


# The building blocks of the tiny exports.
def _tf():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf


def _parse(examples, label=False, extra=None):
  tf = _tf()
  spec = {'x': tf.io.FixedLenFeature([1], tf.float32),
          'n': tf.io.FixedLenFeature([1], tf.int64)}
  if label:
    spec['label'] = tf.io.FixedLenFeature([1], tf.float32)
  spec.update(extra or {})
  return tf.io.parse_example(examples, spec)


def _p(examples, **kwargs):
  tf = _tf()
  return tf.sigmoid(_parse(examples, **kwargs)['x'])  # [batch, 1]


def _examples_fn(body, shape=(None,), dtype=None, name='examples'):
  tf = _tf()
  return tf.function(body, input_signature=[
      tf.TensorSpec(list(shape), dtype or tf.string, name=name)])


def _good_default(examples):
  return {'probabilities': _p(examples)}


def _good_classify(examples):
  tf = _tf()
  p = _p(examples)
  batch = tf.shape(p)[0]
  return {'classes': tf.tile(tf.constant([['no', 'yes']]), [batch, 1]),
          'scores': tf.concat([1 - p, p], axis=1)}


def _good_regress(examples):
  return {'outputs': _p(examples)}


def _save(path, signatures, methods=None):
  """Saves a tf.Module with `signatures` ({name: tf.function}); the method
  names set by name (classification, regression) unless `methods` says."""
  tf = _tf()
  module = tf.Module()
  for i, fn in enumerate(signatures.values()):
    setattr(module, f'fn{i}', fn)
  export = str(path / 'export')
  tf.saved_model.save(module, export, signatures=signatures)
  serving_methods.set_method_names(export, methods)
  return export


def _check(export, requests=None):
  tf = _tf()
  return serving_check.check(export, tf.saved_model.load(export),
                             requests or _requests())


def test_a_good_export_answers_every_api_and_writes_its_warmup_file(
    tmp_path, eval_files):
  """Classify, Regress and Predict requests without the label pass, and
  the warmup file holds them as PredictionLogs the serving protos parse."""
  from generic_trainer.export_checks.export_validation import validate_export  # pylint: disable=g-import-not-at-top
  export = _save(tmp_path, {
      'serving_default': _examples_fn(_good_default),
      'classification': _examples_fn(_good_classify, name='inputs'),
      'regression': _examples_fn(_good_regress, name='inputs')})
  report = validate_export(export, eval_files, not_served=NOT_SERVED)
  serving = report['serving']
  assert {k: v['api'] for k, v in serving['signatures'].items()} == {
      'classification': 'Classify', 'regression': 'Regress',
      'serving_default': 'Predict'}
  assert serving['not_served'] == ['label', 'weight']
  logs = serving_check.read_warmup_requests(export)
  assert len(logs) == serving['warmup_requests'] == 6
  kinds = sorted(log.WhichOneof('log_type') for log in logs)
  assert kinds == ['classify_log'] * 2 + ['predict_log'] * 2 + [
      'regress_log'] * 2
  request = next(l for l in logs if l.HasField('classify_log')
                 ).classify_log.request
  assert request.model_spec.signature_name == 'classification'
  assert len(request.input.example_list.examples) == 4
  assert 'label' not in request.input.example_list.examples[0].features.feature


def test_what_was_checked_becomes_model_custom_properties():
  """The check's record lands on the Model artifact as custom properties."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  model = standard_artifacts.Model()
  serving_check.attach([model], {'serving': {
      'signatures': {'classification': {'api': 'Classify', 'requests': 2},
                     'serving_default': {'api': 'Predict', 'requests': 2}},
      'not_served': ['label'], 'warmup_requests': 4}})
  assert model.get_string_custom_property('serving_check') == (
      '{"classification": "Classify", "serving_default": "Predict"}')
  assert model.get_int_custom_property('serving_requests_checked') == 4
  assert model.get_string_custom_property('serving_not_served') == 'label'
  assert model.get_int_custom_property('serving_warmup_requests') == 4


def test_feature_inputs_are_sent_by_name(tmp_path):
  """A Predict signature taking features by name (Keras's model.export) is
  fed each feature as a TensorProto; ints go to a float input."""
  tf = _tf()
  fn = tf.function(lambda x, n: {'y': x + tf.cast(n, tf.float32)},
                   input_signature=[tf.TensorSpec([None, 1], tf.float32, 'x'),
                                    tf.TensorSpec([None], tf.float32, 'n')])
  report = _check(_save(tmp_path, {'serving_default': fn}))
  assert report['signatures']['serving_default']['inputs'] == ['n', 'x']


# The mistakes: (id, signatures, methods, message). Each is a row of
# docs/errors.md (180-204).
def _label_parsed(examples):
  return {'p': _p(examples, label=True)}


def _weight_parsed(examples):
  tf = _tf()
  return {'p': _p(examples, extra={
      'weight': tf.io.FixedLenFeature([1], tf.float32)})}


def _transformed_parsed(examples):
  tf = _tf()
  return {'p': tf.sigmoid(tf.io.parse_example(examples, {
      'x_xf': tf.io.FixedLenFeature([1], tf.float32)})['x_xf'])}


def _unknown_feature_parsed(examples):
  tf = _tf()
  return {'p': tf.io.parse_example(examples, {
      'fare': tf.io.FixedLenFeature([1], tf.float32)})['fare']}


def _features_fn(specs, body):
  tf = _tf()
  return tf.function(body, input_signature=[
      {k: tf.TensorSpec(s, d, k) for k, (s, d) in specs.items()}])


def _squeezed_classify(examples):
  tf = _tf()
  out = _good_classify(examples)
  return {'classes': tf.squeeze(out['classes']),
          'scores': tf.squeeze(out['scores'])}


def _mistakes():
  tf = _tf()
  classify = lambda body: {'serving_default': _examples_fn(_good_default),  # pylint: disable=g-long-lambda
                           'classification': _examples_fn(body,
                                                          name='inputs')}
  regress = lambda body: {'serving_default': _examples_fn(_good_default),  # pylint: disable=g-long-lambda
                          'regression': _examples_fn(body, name='inputs')}
  p = _p
  return [
      ('label-required', {'serving_default': _examples_fn(_label_parsed)},
       None, r"Signature 'serving_default' requires the feature 'label' in "
       r"every request, but 'label' is a label or weight \(the label\): a "
       r'client asking for a prediction does not have it.*set '
       r'raw_label_key'),
      ('label-input', {'serving_default': _features_fn(
          {'x': ([None, 1], tf.float32), 'label': ([None, 1], tf.float32)},
          lambda f: {'y': f['x'] + f['label']})}, None,
       r"Signature 'serving_default' requires the feature 'label'"),
      ('weight-required', {'serving_default': _examples_fn(_weight_parsed)},
       None, r"requires the feature 'weight' in every request, but 'weight' "
       r'is a label or weight \(the weight\)'),
      ('transform-not-attached',
       {'serving_default': _examples_fn(_transformed_parsed)}, None,
       r"parses 'x_xf', a feature that only Transform's output has.*the "
       r'Transform graph is not applied in it.*model.tft_layer'),
      ('unknown-feature-parsed',
       {'serving_default': _examples_fn(_unknown_feature_parsed)}, None,
       r"requires the feature 'fare', which the eval examples do not have"),
      ('wrong-input-key', {'serving_default': _features_fn(
          {'input_1': ([None, 1], tf.float32)},
          lambda f: {'y': f['input_1'] * 2})}, None,
       r"takes an input 'input_1' \(float32\[None, 1\]\) that names no "
       r'feature of the data.*keras.Input\(..., name=.feature.\)'),
      ('dtype-mismatch', {'serving_default': _features_fn(
          {'x': ([None, 1], tf.int64)},
          lambda f: {'y': tf.cast(f['x'], tf.float32)})}, None,
       r"Input 'x' of signature 'serving_default' is int64\[None, 1\], but "
       r"the feature 'x' holds float32 values"),
      ('string-feature-as-number', {'serving_default': _features_fn(
          {'word': ([None, 1], tf.float32)}, lambda f: {'y': f['word']})},
       None, r"Input 'word' .* is float32\[None, 1\], but the feature 'word' "
       r'holds string values'),
      ('examples-not-string', {'serving_default': _examples_fn(
          lambda examples: {'y': examples * 2}, dtype=tf.float32)}, None,
       r"Input 'examples' of signature 'serving_default' is "
       r'float32\[None\], but clients that send tf.Examples carry serialized '
       r'tf.Examples: a tf.string tensor'),
      ('examples-scalar', {'serving_default': _examples_fn(
          lambda examples: {'p': _p(tf.reshape(examples, [-1]))}, shape=())},
       None, r"Input 'examples' .* is string\[\], but clients that send "
       r'tf.Examples send the serialized tf.Examples as a vector'),
      ('examples-column', {'serving_default': _examples_fn(
          lambda examples: {'p': _p(tf.reshape(examples, [-1]))},
          shape=(None, 1))}, None,
       r"is string\[None, 1\], but clients that send tf.Examples send the "
       r'serialized tf.Examples as a vector, one string per example'),
      ('classify-method-missing', classify(_good_classify),
       {'classification': serving_methods.PREDICT},
       r"Signature 'classification' is named for TF Serving's Classify API, "
       r"but its method name is 'tensorflow/serving/predict'.*Expected "
       r"method_name='tensorflow/serving/classify'.*set_method_names"),
      ('regress-method-missing', regress(_good_regress),
       {'regression': serving_methods.PREDICT},
       r"'regression' is named for TF Serving's Regress API"),
      ('classes-not-strings', classify(lambda e: {
          'classes': tf.cast(p(e) > 0.5, tf.int64),
          'scores': _good_classify(e)['scores']}), None,
       r"Output 'classes' of signature 'classification' is int64, but "
       r"Classify's classes \(class names\) must be string"),
      ('scores-not-float32', classify(lambda e: {
          'classes': _good_classify(e)['classes'],
          'scores': tf.cast(_good_classify(e)['scores'], tf.float64)}), None,
       r"Output 'scores' .* is float64, but Classify's scores must be "
       r'float32.*tf.cast'),
      ('scores-one-per-example', classify(lambda e: {'scores': p(e)[:, 0]}),
       None, r"Output 'scores' of signature 'classification' has shape "
       r"\[4\]; TF Serving's Classify expects \[batch, num_classes\].*"
       r'\[1 - p, p\]'),
      ('classify-outputs-unnamed', classify(lambda e: {
          'probabilities': _good_classify(e)['scores']}), None,
       r"Classify signature whose outputs are \['probabilities'\]; TF "
       r"Serving's Classify reads 'classes'"),
      ('classes-scores-disagree', classify(lambda e: {
          'classes': _good_classify(e)['classes'],
          'scores': tf.concat([_good_classify(e)['scores'], p(e)], 1)}),
       None, r'returns 2 classes but 3 scores per example'),
      ('classify-two-inputs', {
          'serving_default': _examples_fn(_good_default),
          'classification': tf.function(
              lambda inputs, extra: _good_classify(inputs), input_signature=[
                  tf.TensorSpec([None], tf.string, 'inputs'),
                  tf.TensorSpec([None], tf.string, 'extra')])}, None,
       r"is a Classify signature \(tensorflow/serving/classify\) with 2 "
       r"inputs \['extra', 'inputs'\]"),
      ('classify-three-outputs', classify(lambda e: dict(
          _good_classify(e), logits=p(e))), None,
       r"Classify signature with 3 outputs \['classes', 'logits', "
       r"'scores'\]; TF Serving's Classify returns one or two"),
      ('regress-output-unnamed', regress(lambda e: {'prediction': p(e)}),
       None, r"Regress signature whose outputs are \['prediction'\]; TF "
       r"Serving's Regress reads exactly one, named 'outputs'"),
      ('regress-two-numbers', regress(lambda e: {
          'outputs': tf.concat([p(e), p(e)], 1)}), None,
       r"Output 'outputs' of signature 'regression' has shape \[4, 2\]; TF "
       r"Serving's Regress returns one number per example"),
      ('regress-not-float32', regress(lambda e: {
          'outputs': tf.cast(p(e), tf.float64)}), None,
       r"Output 'outputs' .* is float64, but Regress's outputs must be "
       r'float32'),
      ('outputs-unnamed', {'serving_default': _examples_fn(
          lambda e: (p(e), 1 - p(e)))}, None,
       r"returns 2 outputs named only by position \(output_0, output_1\)"),
      ('non-finite', {'serving_default': _examples_fn(
          lambda e: {'p': p(e) / 0.0 * 0.0})}, None,
       r"Output 'p' of signature 'serving_default' is not finite"),
      ('reduced-over-batch', {'serving_default': _examples_fn(
          lambda e: {'mean': tf.reduce_mean(p(e))})}, None,
       r"Output 'mean' .* has shape \[\] for a request of 4 example\(s\); "
       r'Predict needs one row per example.*reduces over the batch'),
      ('squeezed-single-example', classify(_squeezed_classify), None,
       r"Output 'classes' of signature 'classification' has shape \[2\] "
       r'for a request of 1 example\(s\).*drops the batch dimension of a '
       r'single example'),
  ]


def _mistake_ids():
  return [m[0] for m in _mistakes()]


@pytest.mark.parametrize('index', range(27), ids=_mistake_ids())
def test_each_serving_mistake_is_refused_with_what_to_do(tmp_path, index):
  """Each realistic signature mistake is refused, saying what is wrong,
  what a client expected and what to do."""
  _, signatures, methods, message = _mistakes()[index]
  export = _save(tmp_path, signatures, methods)
  with pytest.raises(ServingCheckError, match=message) as info:
    _check(export)
  assert isinstance(info.value, ExportValidationError)
  assert not os.path.exists(os.path.join(export, serving_check.WARMUP_FILE))


def test_the_catalogue_is_complete():
  """Twenty-seven mistakes, each with its own name."""
  assert len(set(_mistake_ids())) == len(_mistakes()) == 27
