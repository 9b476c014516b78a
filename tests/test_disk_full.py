"""A full disk met by user code (`system.disk_full`): our StorageError,
whatever raised it."""

import os

import pytest

from command_line import module_file as _module
from message_parts import assert_four_parts


_FULL_DISK_RUN_FNS = {
    # h5py on a disk that is full when the file is created: OSError ENOSPC.
    'h5py_create': '''
        import os
        import h5py

        def run_fn(fn_args):
          os.makedirs(fn_args.serving_model_dir, exist_ok=True)
          path = os.path.join(fn_args.serving_model_dir, 'model.h5')
          os.symlink('/dev/full', path)
          with h5py.File(path, 'w') as f:
            f['weights'] = [1.0] * 1000
        ''',
    # TensorFlow's writers: ResourceExhaustedError, 'No space left on
    # device'.
    'tf_write': '''
        import os
        import tensorflow as tf

        def run_fn(fn_args):
          os.makedirs(fn_args.serving_model_dir, exist_ok=True)
          path = os.path.join(fn_args.serving_model_dir, 'variables.data')
          os.symlink('/dev/full', path)
          with tf.io.gfile.GFile(path, 'wb') as f:
            f.write(b'0' * 100000)
        ''',
    # The disk fills between h5py's first write and its close: HDF5's own
    # words, as Keras's model.save('x.h5') reports them.
    'h5py_flush': '''
        def run_fn(fn_args):
          raise RuntimeError(
              "Unable to synchronously close file (file write failed: time = "
              "..., filename = '/tmp/model.h5', file descriptor = 5, errno = "
              "28, error message = 'No space left on device') (Disable slist "
              "on flush dest failure failed)")
        ''',
}


@pytest.mark.parametrize('case', sorted(_FULL_DISK_RUN_FNS))
def test_a_full_disk_during_export_is_our_error(trainer_io, tmp_path, case):
  """A run_fn whose export hits a full disk (a real ENOSPC through h5py,
  or HDF5's flush failure): a StorageError saying to free space, with
  h5py's error as the cause; nothing published."""
  from generic_trainer.errors import StorageError  # pylint: disable=g-import-not-at-top
  from generic_trainer.component.executor import GenericExecutor  # pylint: disable=g-import-not-at-top
  module = _module(tmp_path, f'full_{case}', _FULL_DISK_RUN_FNS[case])
  io = trainer_io(module_file=module)
  with pytest.raises(StorageError) as e:
    GenericExecutor().Do(*io)
  message = str(e.value)
  assert message.startswith(
      f"The disk filled while run_fn (module_file='{module}') wrote ")
  assert ('Expected free space for the checkpoints and the export. '
          'Received: no space left') in message
  assert ('Free space on that disk, or point the output (--output-dir, or '
          'the pipeline root) at a disk with room, and run again; nothing '
          'was published, and an earlier model is unchanged.') in message
  assert type(e.value.__cause__).__name__ in (
      'OSError', 'RuntimeError', 'ResourceExhaustedError')
  assert isinstance(e.value, OSError)
  assert_four_parts(message)
  assert not os.path.exists(os.path.join(io[1]['model'][0].uri,
                                         'Format-Serving', 'model.h5'))
