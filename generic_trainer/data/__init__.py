"""Reading tf.Example data as TFXIO does, without Apache Beam.

`input_pipeline` (the fast datasets of `run_fn` modules and TrainSpecs),
`tf_example_dataset` (TFXIO's own dataset and parse config, Beam-free),
`schema_file` (reading and writing schema.pbtxt), `not_served` (the labels
and weights no serving request carries), `parsed_size` (what
parsed rows will take), `cache_folder` (where parsed rows go on disk),
`span_key`, `span_entry`, `span_cache`, `kept_blocks`, `remote_rows`,
`kept_store` and `kept_factory` (parsed rows kept across trainings),
`graph_code` (our tf.data functions, not converted by autograph).

May import the base modules (`errors`, `keys`, `machine`).
"""
