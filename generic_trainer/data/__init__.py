"""Reading tf.Example data as TFXIO does, without Apache Beam.

`input_pipeline` (the fast datasets of `run_fn` modules and TrainSpecs),
`tf_example_dataset` (TFXIO's own dataset and parse config, Beam-free, and
`plain`: our tf.data functions, not converted by autograph), `tfrecords`
(files as ExampleGen writes them), `schema_file` (schema.pbtxt),
`statistics` (split folders and their statistics), `schema_check` (data
against the schema), `spelled_missing` and `glued_columns` (two CSV
mistakes told from the examples), `not_served` (the labels and weights no
serving request carries), `feature_names` (names a user gives that the
data lacks, said one way), `parsed_size` (what parsed rows will take),
`cache_folder` (where one training's parsed rows go on disk),
`serving_examples` (tf.Examples built from rows and the schema, to call
a served model: `generic_trainer.tf_examples`); local files
as split folders (`local_files`, from CSV: `csv_data`, `csv_dialect`);
`first_look` (a CSV's header and first rows checked before TensorFlow
loads, every mistake in one message);
`kept/` holds parsed rows kept across trainings.

May import: `trainspec` (the columns a TrainSpec needs) and the base.
"""
