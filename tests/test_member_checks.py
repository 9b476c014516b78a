"""A TrainSpec's members checked before training (`trainspec.member_checks`):
a name Keras does not know is refused with the name meant, and a member that
cannot fit the data is named before the first step."""

import pytest

from message_parts import assert_four_parts


def test_a_misspelt_loss_name_is_named_before_training():
  """`build_loss()` returning a name Keras does not know is refused with
  the name meant, not met at the first step as a shape mismatch."""
  from generic_trainer.errors import SpecError  # pylint: disable=g-import-not-at-top
  from generic_trainer.trainspec import member_checks  # pylint: disable=g-import-not-at-top

  class PenguinSpec:
    pass

  with pytest.raises(SpecError) as e:
    member_checks.loss(PenguinSpec(), 'sparse_categorical_crossentrpy')
  assert str(e.value).startswith(
      "PenguinSpec.build_loss() returned 'sparse_categorical_crossentrpy', "
      "which Keras does not know as a loss; did you mean "
      "'sparse_categorical_crossentropy'?")
  assert_four_parts(str(e.value))
  assert member_checks.loss(PenguinSpec(), {'y': 'mse'}) == {'y': 'mse'}
