"""LocalFnArgs: FnArgs' fields, and a data accessor that reads as TFXIO does."""

import os

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx_bsl.public.tfxio import TensorFlowDatasetOptions
from tfx_bsl.public.tfxio import TFExampleRecord

from generic_trainer.data import schema_file
from generic_trainer.data import tf_example_dataset

# Dense, variable-length, sometimes-missing and multi-column (sparse and
# ragged) features: each kind of tensor representation TFXIO infers or reads.
_SCHEMA = '''
feature { name: "label" type: INT shape { dim { size: 1 } }
          presence { min_fraction: 1.0 } }
feature { name: "pair" type: FLOAT shape { dim { size: 2 } }
          presence { min_fraction: 1.0 } }
feature { name: "tokens" type: BYTES }
feature { name: "maybe" type: INT }
feature { name: "idx" type: INT }
feature { name: "val" type: FLOAT }
feature { name: "row_values" type: FLOAT }
tensor_representation_group {
  key: ""
  value {
    tensor_representation {
      key: "sparse"
      value { sparse_tensor { dense_shape { dim { size: 10 } }
                              index_column_names: "idx"
                              value_column_name: "val" } }
    }
    tensor_representation {
      key: "ragged"
      value { ragged_tensor { feature_path { step: "row_values" } } }
    }
  }
}
'''


def _write_examples(path, count=23):
  with tf.io.TFRecordWriter(path, options='GZIP') as writer:
    for i in range(count):
      example = tf.train.Example()
      features = example.features.feature
      features['label'].int64_list.value.append(i % 3)
      features['pair'].float_list.value.extend([i, -i / 2])
      features['tokens'].bytes_list.value.extend(
          [f't{j}'.encode() for j in range(i % 4)])
      if i % 2:
        features['maybe'].int64_list.value.append(i)
      features['idx'].int64_list.value.extend([i % 10])
      features['val'].float_list.value.extend([i * 0.1])
      features['row_values'].float_list.value.extend([1.0] * (i % 3))
      writer.write(example.SerializeToString())


def _as_lists(batch):
  out = {}
  for name, value in batch.items():
    if isinstance(value, tf.SparseTensor):
      out[name] = ('sparse', value.indices.numpy().tolist(),
                   value.values.numpy().tolist(),
                   value.dense_shape.numpy().tolist(), value.dtype)
    elif isinstance(value, tf.RaggedTensor):
      out[name] = ('ragged', value.to_list(), value.dtype)
    else:
      out[name] = ('dense', np.asarray(value).tolist(), value.dtype)
  return out


def _elements(dataset, with_label):
  if with_label:
    return [(_as_lists(f), np.asarray(l).tolist()) for f, l in dataset]
  return [_as_lists(f) for f in dataset]


@pytest.mark.parametrize('options', [
    TensorFlowDatasetOptions(batch_size=5, shuffle=False, num_epochs=1),
    TensorFlowDatasetOptions(batch_size=4, shuffle=False, num_epochs=1,
                             label_key='label'),
    TensorFlowDatasetOptions(batch_size=6, shuffle=True, shuffle_seed=7,
                             num_epochs=2, label_key='label'),
])
def test_same_batches_as_tfxio(tmp_path, options):
  """Dense, sparse, ragged features and the label come out as from TFXIO."""
  path = str(tmp_path / 'data.gz')
  _write_examples(path)
  schema = text_format.Parse(_SCHEMA, schema_pb2.Schema())
  ours = tf_example_dataset.dataset([path], options, schema)
  theirs = TFExampleRecord([path], schema=schema).TensorFlowDataset(options)
  assert ours.element_spec == theirs.element_spec
  with_label = options.label_key is not None
  assert _elements(ours, with_label) == _elements(theirs, with_label)


def test_same_batches_as_tfxio_on_the_penguins(penguin_artifacts):
  """The penguin examples read the same as through TFXIO."""
  examples, schema = penguin_artifacts
  files = [os.path.join(examples.uri, 'Split-eval', '*')]
  schema = schema_file.read(os.path.join(schema.uri, 'schema.pbtxt'))
  options = TensorFlowDatasetOptions(batch_size=16, shuffle=False,
                                     num_epochs=1, label_key='species')
  ours = tf_example_dataset.dataset(files, options, schema)
  theirs = TFExampleRecord(files, schema=schema).TensorFlowDataset(options)
  assert _elements(ours, True) == _elements(theirs, True)


def test_unknown_label_refused_as_tfxio_does(tmp_path):
  """A label_key the schema lacks is refused with TFXIO's message."""
  path = str(tmp_path / 'data.gz')
  _write_examples(path, 2)
  schema = text_format.Parse(_SCHEMA, schema_pb2.Schema())
  options = TensorFlowDatasetOptions(batch_size=2, label_key='nope')
  message = r'The `label_key` provided \(nope\) must be one of the following'
  with pytest.raises(ValueError, match=message):
    TFExampleRecord([path], schema=schema).TensorFlowDataset(options)
  with pytest.raises(ValueError, match=message):
    tf_example_dataset.dataset([path], options, schema)


def test_local_fn_args_has_the_fields_of_fn_args():
  """LocalFnArgs has every field of the component's FnArgs, same order."""
  import attr  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs.fn_args import FnArgs  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs.local import LocalFnArgs  # pylint: disable=g-import-not-at-top
  assert [f.name for f in attr.fields(LocalFnArgs)] == [
      f.name for f in attr.fields(FnArgs)]
  fn_args = LocalFnArgs(schema_path='s.pbtxt')
  assert (fn_args.schema_file, fn_args.is_chief, fn_args.num_workers) == (
      's.pbtxt', True, 1)


def test_local_inputs_are_one_typed_object_that_gives_local_fn_args(tmp_path):
  """LocalInputs.of_splits makes the split folders' files patterns, is
  frozen, every field is a LocalFnArgs field, and a request carries it to
  the process that trains as JSON and back into the same LocalFnArgs."""
  import attr  # pylint: disable=g-import-not-at-top
  from generic_trainer.fnargs import local  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan.plan import TrainingPlan  # pylint: disable=g-import-not-at-top
  from generic_trainer.plan.request import LocalInputs, TrainingRequest  # pylint: disable=g-import-not-at-top
  inputs = LocalInputs.of_splits(
      {'train': [str(tmp_path / 'Split-train' / 'data.gz')],
       'eval': [str(tmp_path / 'Split-[eval]' / 'data.gz')]},
      str(tmp_path / 'run'), train_steps=7, hyperparameters={'units': 4})
  assert inputs.train_files == [str(tmp_path / 'Split-train' / 'data.gz')]
  assert inputs.eval_files == [str(tmp_path / 'Split-[[]eval]' / 'data.gz')]
  with pytest.raises(attr.exceptions.FrozenInstanceError):
    inputs.train_steps = 8
  assert {f.name for f in attr.fields(LocalInputs)} <= {
      f.name for f in attr.fields(local.LocalFnArgs)}
  request = TrainingRequest({}, {}, {}, str(tmp_path / 'serving'), '',
                            TrainingPlan('run_fn', 'm.Spec'),
                            local_inputs=inputs)
  again = TrainingRequest.from_json(request.to_json())
  assert again.local_inputs == inputs
  fn_args = local.from_request(again)
  assert (fn_args.train_steps, fn_args.hyperparameters, fn_args.model_run_dir,
          fn_args.serving_model_dir) == (7, {'units': 4}, str(tmp_path / 'run'),
                                         str(tmp_path / 'serving'))
  assert request.with_scratch_outputs(str(tmp_path / 's')).local_inputs == (
      attr.evolve(inputs, model_run_dir=str(tmp_path / 's' / 'model_run')))
