"""Parsed rows kept across trainings (docs/guides/parsed-rows-cache.md).

`key` says what an entry is keyed on, `entry` its format and how it is
written and read, `folder` the cache folder (ours by its marker, holding
nothing else, used through one descriptor), `cache` the store of one
training, `blocks` a file's
rows read back from its entry or parsed and written, `store` where a
training keeps its rows (decided once), `factory` a `run_fn`'s dataset
factory that keeps rows, `remote` rows kept on an object store,
`read_before` which files the check before training need not read whole
again, `settings` the command's and the notebook's cache settings, and
`artifact` the `ParsedRows` artifact type (its own module: it imports TFX).

May import: `data` and the base.
"""
