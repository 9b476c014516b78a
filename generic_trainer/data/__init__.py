"""Reading tf.Example data as TFXIO does, without Apache Beam.

`input_pipeline` (the fast datasets of `run_fn` modules and TrainSpecs),
`tf_example_dataset` (TFXIO's own dataset and parse config, Beam-free),
`schema_file` (reading and writing schema.pbtxt).

May import: `errors` and `keys` only.
"""
