"""A `run_fn` module's `fn_args.data_accessor.tf_dataset_factory` when the
execution keeps parsed rows (`kept_cache`): the rows of each file are read
back from what an earlier execution kept, or kept for the next one as the
first pass parses them.

It gives what `input_pipeline.DatasetFactory` gives (TFXIO's features:
the same names, dtypes, shapes and default values, the label popped), read
as a TrainSpec reads its data (`input_pipeline.block_dataset`): files in
parallel, blocks of rows shuffled and permuted in pools rather than
records through a shuffle buffer, a seed giving one order whatever was
kept. TFXIO's `shuffle_buffer_size`, `sloppy_ordering`, thread counts
and prefetch do not apply; files on an object store are read as local
ones.

The call is `DatasetFactory`'s, unchanged (and so are its errors), where
blocks would change what the module sees or cannot hold the data:
`shuffle=False` (TFXIO's order, file after file, which a module may line
predictions up against), several workers (TFXIO's datasets shard by file;
blocks could only shard by batch, each worker in its own order), a sparse,
ragged or string feature, no schema, a file missing, `drop_final_batch` on
a finite dataset, a label that is not a feature.
"""

from typing import List, Optional

import tensorflow as tf

from generic_trainer.system import paths
from generic_trainer.data import input_pipeline
from generic_trainer.data.kept import blocks as kept_blocks


class KeptRowsFactory(input_pipeline.DatasetFactory):
  """`DatasetFactory`, reading and keeping parsed rows through `store`.

  Args:
    store: The execution's entered `kept_cache.SpanCache`.
    transform_graph_path: The Transform output the rows are keyed on, or
      None.
    workers: The processes training together (`fn_args.num_workers`).
  """

  def __init__(self, store, transform_graph_path: Optional[str],
               workers: int = 1,
               telemetry_descriptors: Optional[List[str]] = None):
    super().__init__(telemetry_descriptors)
    self.store = store
    self.transform_graph_path = transform_graph_path
    self.workers = workers

  def __call__(self, file_pattern, options, schema=None):
    patterns = [file_pattern] if isinstance(file_pattern, str) else list(
        file_pattern)
    if (schema is None or not options.shuffle or self.workers > 1 or
        (options.drop_final_batch and options.num_epochs)):
      return super().__call__(file_pattern, options, schema)
    config, names = input_pipeline.parser_config(schema)
    label = options.label_key
    files = paths.expand(patterns)
    kept = kept_blocks.with_key(self.store, config, names, label,
                                input_pipeline.PARSE_ROWS,
                                self.transform_graph_path)
    if (kept is None or not files or not input_pipeline.dense_only(config)
        or (label is not None and label not in names.values())
        or not all(tf.io.gfile.exists(f) for f in files)):  # Its error.
      return super().__call__(file_pattern, options, schema)
    return input_pipeline.block_dataset(
        files, config, names, label, options.batch_size, options.num_epochs,
        options.shuffle, cache=False, seed=options.shuffle_seed, kept=kept)
