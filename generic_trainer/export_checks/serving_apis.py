"""How TF Serving's Classify, Regress and Predict APIs call a signature.

For each API, as the model server's classifier, regressor and predictor
do: the request built from label-less examples (`request`), the checks of
the signature and of its answer (`serve`), and the PredictionLog of the
request for the warmup file (`log`). `api` picks the API from the
signature's method name. Each mistake raises `ServingCheckError` with what
is wrong, what a client expected, what the export gave and what to do.
Used by `serving_check`.
"""

import re
from typing import Optional, Any, Dict

from generic_trainer.errors import ServingCheckError
from generic_trainer.errors import summarize
from generic_trainer.heads.serving_methods import CLASSIFY
from generic_trainer.heads.serving_methods import named_method
from generic_trainer.heads.serving_methods import PREDICT
from generic_trainer.heads.serving_methods import REGRESS
from tensorflow.core.framework import types_pb2
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import prediction_log_pb2
from tensorflow_serving.apis import regression_pb2
from tensorflow_serving.apis import predict_pb2

API = {CLASSIFY: 'Classify', REGRESS: 'Regress', PREDICT: 'Predict'}
_POSITIONAL = re.compile(r'output_\d+$')
_REQUIRED = re.compile(r'Feature: (\S+) \(data type: \w+\) is required')
_EXAMPLE_INPUT_NAMES = ('examples', 'inputs', 'input_example_tensor',
                        'serialized_examples', 'serialized_tf_example')
_SET_METHODS = ('generic_trainer.heads.serving_methods.set_method_names('
                'export_dir) after saving')


def api(name: str, signature) -> str:
  """The API clients call `signature` with, as its method name says."""
  method = signature.method_name
  wanted = named_method(name)
  if wanted and method != wanted:
    raise ServingCheckError(
        f'Signature {name!r} is named for TF Serving\'s {API[wanted]} API, '
        f'but its method name is {method!r}: a model server that checks '
        'method names (--enable_signature_method_name_check, as TF1-era '
        f'servers did) refuses {API[wanted]} requests to it. Expected '
        f'method_name={wanted!r}. Received: method_name={method!r}. TF2\'s '
        'tf.saved_model.save writes every signature as Predict. Call '
        f'{_SET_METHODS}, or name the signature otherwise to serve it with '
        'Predict.')
  return method if method in (CLASSIFY, REGRESS) else PREDICT


def _one_example_input(name: str, signature, api: str) -> str:
  """The key of the one string [batch] input of a Classify or Regress
  signature (the server takes the only input, whatever its key)."""
  inputs = dict(signature.inputs)
  if len(inputs) != 1:
    raise ServingCheckError(
        f'Signature {name!r} is a {API[api]} signature ({api}) with '
        f'{len(inputs)} inputs {sorted(inputs)}. TF Serving\'s {API[api]} '
        'feeds exactly one input: the serialized tf.Examples of the request. '
        'Expected one tf.string input. Received: '
        f'{len(inputs)} inputs. Take one tf.string [None] input and parse the '
        'features from it.')
  (key, info), = inputs.items()
  _check_examples_input(name, key, info, f'{API[api]} requests')
  return key


def _check_examples_input(name: str, key: str, info, who: str) -> None:
  if info.dtype != types_pb2.DT_STRING:
    raise ServingCheckError(
        f'Input {key!r} of signature {name!r} is {_tensor_describe(info)}, but '
        f'{who} carry serialized tf.Examples: a tf.string tensor. Expected '
        f"tf.TensorSpec([None], tf.string, name={key!r}). Received: "
        f'{_tensor_describe(info)}. Parse the features inside the signature with '
        'tf.io.parse_example.')
  rank = _tensor_rank(info)
  if rank is not None and rank != 1:
    raise ServingCheckError(
        f'Input {key!r} of signature {name!r} is {_tensor_describe(info)}, but '
        f'{who} send the serialized tf.Examples as a vector, one string per '
        f'example: shape [batch]. Expected tf.TensorSpec([None], tf.string, '
        f"name={key!r}). Received: rank {rank}. Change the input's shape to "
        '[None].')


def _call(name: str, fn, feed: Dict[str, Any], count: int, requests,
          api: str):
  """Runs the signature, turning a failure into what a client sees."""
  try:
    return {k: v.numpy() for k, v in fn(**feed).items()}
  except Exception as e:  # pylint: disable=broad-except
    message = summarize(e)
    required = _REQUIRED.search(str(e))
    if required:
      _missing_feature(name, required.group(1), requests, api)
    what = ('a request of one example' if count == 1 else
            f'a {API[api]} request of {count} examples')
    raise ServingCheckError(
        f'Signature {name!r} failed on {what} without labels and weights, '
        f'as a client sends it: {type(e).__name__}: {message}. Expected '
        'the signature to answer a request of features alone. Received: '
        'the error above. '
        + ('It works on a batch but not on one example: a squeeze or '
           'reshape drops the batch dimension. Keep [batch, ...] shapes. '
           if count == 1 else
           'Check that it parses and transforms the features as training '
           'did.')) from e


def _missing_feature(name: str, feature: str, requests, api: str) -> None:
  if feature in requests.not_served:
    raise ServingCheckError(
        f'Signature {name!r} requires the feature {feature!r} in every '
        f'request, but {feature!r} is a label or weight '
        f'({requests.not_served[feature]}): a client asking for a '
        'prediction does not have it. Expected a signature that parses only '
        f'the features the model reads. Received: {feature!r} among the '
        'features it parses. Leave {feature!r} out of the feature '
        'spec the signature parses (canned specs and heads do; with '
        'Transform set raw_label_key, or pop it from '
        'tf_transform_output.raw_feature_spec()).')
  if feature in requests.transformed_only:
    raise ServingCheckError(
        f'Signature {name!r} parses {feature!r}, a feature that only '
        'Transform\'s output has, from requests that carry raw features: '
        'the Transform graph is not applied in it. Expected a signature that '
        f'parses raw features. Received: {feature!r} among the features it '
        'parses. Parse the raw feature '
        'spec (tf_transform_output.raw_feature_spec()), then call the '
        'Transform layer, tracked on the model (model.tft_layer = '
        'tf_transform_output.transform_features_layer()).')
  raise ServingCheckError(
      f'Signature {name!r} requires the feature {feature!r}, which the eval '
      f'examples do not have (they have {sorted(requests.features)}): a '
      f'client sending {API[api]} requests with the data\'s features cannot '
      'call it. Expected features of the data only. Received: '
      f'{feature!r}. Parse only features of the data, with the names they '
      'have there.')


def _check_batch(name: str, key: str, value, count: int, what: str) -> None:
  if value.ndim == 0 or value.shape[0] != count:
    raise ServingCheckError(
        f'Output {key!r} of signature {name!r} has shape '
        f'{list(value.shape)} for a request of {count} example(s); '
        f'{what} needs one row per example: shape [{count}, ...]. Received: '
        f'shape {list(value.shape)}. '
        + ('It drops the batch dimension of a single example (a squeeze?); '
           if count == 1 else 'It reduces over the batch; ') +
        'Keep the batch as the first dimension.')


def _check_finite(name: str, key: str, value, count: int) -> None:
  if value.dtype.kind == 'f' and not np.all(np.isfinite(value)):
    raise ServingCheckError(
        f'Output {key!r} of signature {name!r} is not finite (NaN or Inf) '
        f'for a request of {count} example(s): '
        f'{str(value.tolist())[:200]}. Expected finite numbers. Received: '
        'NaN or Inf, above. The model diverged or was exported untrained. '
        'Check the training loss and the learning rate.')


def _check_dtype(name: str, key: str, info, wanted: str, what: str) -> None:
  if _tensor_dtype(info) != wanted:
    raise ServingCheckError(
        f'Output {key!r} of signature {name!r} is {_tensor_dtype(info)}, but '
        f'{what} must be {wanted}. Received: {key}={_tensor_describe(info)}. '
        f'Cast it: tf.cast(..., tf.{wanted}).')


def _example_list_request(request, name, examples):
  """`request` (a Classification or Regression request) for signature
  `name`, carrying the serialized tf.Examples `examples`."""
  request.model_spec.signature_name = name
  request.input.example_list.examples.extend(
      tf.train.Example.FromString(e) for e in examples)
  return request


class _Classify:
  """TF Serving's classifier: ClassificationRequest -> classes, scores."""

  @staticmethod
  def request(name, signature, examples, requests):
    del requests
    return _example_list_request(classification_pb2.ClassificationRequest(),
                                 name, examples)

  @staticmethod
  def serve(name, signature, fn, request, count, requests):
    key = _one_example_input(name, signature, CLASSIFY)
    outputs = dict(signature.outputs)
    if len(outputs) not in (1, 2):
      raise ServingCheckError(
          f'Signature {name!r} is a Classify signature with {len(outputs)} '
          f'outputs {sorted(outputs)}; TF Serving\'s Classify returns one or '
          "two: 'classes' and/or 'scores'. Expected those outputs only. "
          f'Received: {sorted(outputs)}. Move the other outputs to a '
          "Predict signature ('predict').")
    if 'classes' not in outputs and 'scores' not in outputs:
      raise ServingCheckError(
          f'Signature {name!r} is a Classify signature whose outputs are '
          f"{sorted(outputs)}; TF Serving's Classify reads 'classes' (class "
          "names, tf.string [batch, n]) and/or 'scores' (float32 [batch, "
          "n]). Expected 'classes' or 'scores'. Received: "
          f"{sorted(outputs)}. Name the outputs {{'classes': ..., "
          "'scores': ...}}.")
    if 'classes' in outputs:
      _check_dtype(name, 'classes', outputs['classes'], 'string',
                   "Classify's classes (class names)")
    if 'scores' in outputs:
      _check_dtype(name, 'scores', outputs['scores'], 'float32',
                   "Classify's scores")
    serialized = [e.SerializeToString()
                  for e in request.input.example_list.examples]
    values = _call(name, fn, {key: tf.constant(serialized)}, count, requests,
                   CLASSIFY)
    widths = {}
    for out in ('classes', 'scores'):
      if out in values:
        value = values[out]
        _check_batch(name, out, value, count, 'Classify')
        if value.ndim != 2:
          raise ServingCheckError(
              f'Output {out!r} of signature {name!r} has shape '
              f'{list(value.shape)}; TF Serving\'s Classify expects [batch, '
              'num_classes]: one row per example, one column per class. '
              f'Expected a rank-2 output. Received: shape '
              f'{list(value.shape)}. To give one '
              'probability per example, Return [1 - p, p].')
        widths[out] = value.shape[1]
        _check_finite(name, out, value, count)
    if len(set(widths.values())) > 1:
      raise ServingCheckError(
          f'Signature {name!r} returns {widths["classes"]} classes but '
          f'{widths["scores"]} scores per example; TF Serving\'s Classify '
          'pairs them. Expected one score per class name. Received: '
          f'{widths["classes"]} classes, {widths["scores"]} scores. Return '
          'as many scores as classes.')

  @staticmethod
  def log(request):
    log = prediction_log_pb2.PredictionLog()
    log.classify_log.request.CopyFrom(request)
    return log


class _Regress:
  """TF Serving's regressor: RegressionRequest -> outputs."""

  @staticmethod
  def request(name, signature, examples, requests):
    del requests
    return _example_list_request(regression_pb2.RegressionRequest(), name,
                                 examples)

  @staticmethod
  def serve(name, signature, fn, request, count, requests):
    key = _one_example_input(name, signature, REGRESS)
    outputs = dict(signature.outputs)
    if len(outputs) != 1 or 'outputs' not in outputs:
      raise ServingCheckError(
          f'Signature {name!r} is a Regress signature whose outputs are '
          f"{sorted(outputs)}; TF Serving's Regress reads exactly one, "
          "named 'outputs' (float32 [batch] or [batch, 1]). Expected "
          f"'outputs' alone. Received: {sorted(outputs)}. Return "
          "{'outputs': value}, and the rest from a Predict signature.")
    _check_dtype(name, 'outputs', outputs['outputs'], 'float32',
                 "Regress's outputs")
    serialized = [e.SerializeToString()
                  for e in request.input.example_list.examples]
    value = _call(name, fn, {key: tf.constant(serialized)}, count, requests,
                  REGRESS)['outputs']
    _check_batch(name, 'outputs', value, count, 'Regress')
    if value.ndim > 2 or (value.ndim == 2 and value.shape[1] != 1):
      raise ServingCheckError(
          f'Output \'outputs\' of signature {name!r} has shape '
          f'{list(value.shape)}; TF Serving\'s Regress returns one number '
          'per example. Expected [batch] or [batch, 1]. Received: shape '
          f'{list(value.shape)}. Serve several numbers with Predict '
          "(Move them to a 'predict' signature).")
    _check_finite(name, 'outputs', value, count)

  @staticmethod
  def log(request):
    log = prediction_log_pb2.PredictionLog()
    log.regress_log.request.CopyFrom(request)
    return log


class _Predict:
  """TF Serving's predictor: PredictRequest inputs by key -> outputs."""

  @staticmethod
  def _takes_examples(signature) -> bool:
    inputs = dict(signature.inputs)
    if len(inputs) != 1:
      return False
    (key, info), = inputs.items()
    return info.dtype == types_pb2.DT_STRING or key in _EXAMPLE_INPUT_NAMES

  @staticmethod
  def request(name, signature, examples, requests):
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = name
    inputs = dict(signature.inputs)
    if _Predict._takes_examples(signature):
      (key, info), = inputs.items()
      if key not in requests.features:
        batch = np.array(examples, dtype=object)
        if name != 'serving_default' and _tensor_rank(info) == 2:
          batch = batch.reshape([-1, 1])  # A Predict client sends [N, 1].
        else:  # TFX's Evaluator and BulkInferrer send a [N] vector.
          _check_examples_input(name, key, info,
                                'clients that send tf.Examples')
        request.inputs[key].CopyFrom(tf.make_tensor_proto(batch))
        return request
    count = len(examples)
    for key, info in sorted(inputs.items()):
      if key in requests.not_served:
        _missing_feature(name, key, requests, PREDICT)
      if key not in requests.features:
        raise ServingCheckError(
            f'Signature {name!r} takes an input {key!r} ({_tensor_describe(info)}) '
            'that names no feature of the data, so a client sending the '
            f'features by name cannot fill it. Expected one of the data\'s '
            f'features: {sorted(requests.features)}. Received: {key!r}. Name '
            'each input after the '
            "feature it takes (keras.Input(..., name='feature')), or take "
            'serialized tf.Examples.')
      value = requests.features[key][:count]
      wanted = tf.dtypes.as_dtype(info.dtype)
      have = 'string' if value.dtype == object else value.dtype.name
      if (have == 'string') != (wanted == tf.string) or (
          have.startswith('float') and wanted.is_integer):
        raise ServingCheckError(
            f'Input {key!r} of signature {name!r} is {_tensor_describe(info)}, but '
            f'the feature {key!r} holds {have} values: a client sending it '
            'as it is in the data gets "Expects arg to be '
            f'{wanted.name} but {have} is provided". Expected {have}, as in '
            f'the data. Received: {wanted.name}. Take {have} (Cast '
            'inside the signature), or change the feature in the schema.')
      value = value.astype(wanted.as_numpy_dtype) if wanted != tf.string else (
          value)
      rank = _tensor_rank(info)
      if rank is not None and rank != value.ndim:
        value = value.reshape([count] + [
            d.size if d.size > 0 else 1
            for d in info.tensor_shape.dim[1:]] if rank else [])
      request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
    return request

  @staticmethod
  def serve(name, signature, fn, request, count, requests):
    outputs = dict(signature.outputs)
    if not outputs:
      raise ServingCheckError(
          f'Signature {name!r} has no outputs; a Predict client gets an '
          'empty answer. Expected at least one output. Received: none. '
          'Return a dict of the predictions.')
    if len(outputs) > 1 and all(_POSITIONAL.match(k) for k in outputs):
      raise ServingCheckError(
          f'Signature {name!r} returns {len(outputs)} outputs named only by '
          f'position ({", ".join(sorted(outputs))}): the function returns a '
          'tuple or list, and a client cannot tell which is which, nor keep '
          'working when their order changes. Expected outputs named by '
          f'what they hold. Received: {sorted(outputs)}. Return a dict, e.g. '
          "{'probabilities': p, 'class_ids': c}.")
    feed = {k: tf.constant(tf.make_ndarray(v))
            for k, v in request.inputs.items()}
    values = _call(name, fn, feed, count, requests, PREDICT)
    for key, value in sorted(values.items()):
      _check_batch(name, key, value, count, 'Predict')
      _check_finite(name, key, value, count)

  @staticmethod
  def log(request):
    log = prediction_log_pb2.PredictionLog()
    log.predict_log.request.CopyFrom(request)
    return log


SERVERS = {CLASSIFY: _Classify, REGRESS: _Regress, PREDICT: _Predict}


# A SignatureDef's TensorInfo (a signature's input or output, as the
# SavedModel's MetaGraphDef stores it) as a message says it: 'float32[None, 3]'.


def _tensor_dtype(info) -> str:
  """'float32', 'string': the tensor's dtype name."""
  return tf.dtypes.as_dtype(info.dtype).name


def _tensor_shape(info) -> str:
  """'[None, 3]', or '<unknown>' for an unknown rank."""
  if info.tensor_shape.unknown_rank:
    return '<unknown>'
  return str([d.size if d.size >= 0 else None for d in info.tensor_shape.dim])


def _tensor_rank(info) -> Optional[int]:
  """The number of dimensions, or None when unknown."""
  return None if info.tensor_shape.unknown_rank else len(
      info.tensor_shape.dim)


def _tensor_describe(info) -> str:
  """'float32[None, 3]': dtype and shape."""
  return f'{_tensor_dtype(info)}{_tensor_shape(info)}'
