"""User code's failures said plainly (`usercode.guard`): what Keras refuses
in a run_fn, and a failed local pipeline script, each with what to do."""

import pytest

from message_parts import assert_four_parts


def test_keras2_saving_under_keras3_says_what_replaces_it():
  """`model.save(dir, save_format='tf')` under Keras 3: Keras's refusal
  with what was expected and what replaces it: a signature of serialized
  tf.Example, which Evaluator needs, not model.export's raw tensors
  alone."""
  from generic_trainer.errors import RunFnError  # pylint: disable=g-import-not-at-top
  from generic_trainer.usercode import guard  # pylint: disable=g-import-not-at-top
  keras_says = ('The `save_format` argument is deprecated in Keras 3. Please '
                'remove this argument and pass a file path with either '
                '`.keras` or `.h5` extension.Received: save_format=tf')
  with pytest.raises(RunFnError) as e:
    with guard.user_code('run_fn', 'm.py'):
      raise ValueError(keras_says)
  message = str(e.value)
  assert ("Keras 3's model.export(dir) alone writes a signature of raw "
          'tensors, which TF Serving can call but Evaluator cannot') in message
  assert ('a tf.function taking tf.TensorSpec([None], tf.string, '
          '"examples")') in message
  assert "keras_version='tf_keras'" in message
  assert_four_parts(message.split('\nIts traceback')[0])
