"""Plumbing every stage uses: files, folders, locks, signals, the machine.

`atomic_files` (every file written whole), `owner_lock` (who uses a
folder), `scratch` (private temporary folders), `bytecode` (no compiled Python
left in TMPDIR by a training), `trust` (the one rule of
what a run may read back, reuse or delete: this user's alone, decided on
the opened descriptor), `output_folder` (a run's folder: this user's
alone, one run at a time), `manifest` (what we wrote in a folder, so
that the next writer replaces that alone), `journal` (each file a run
puts in place in its folders, with its identity, noted as it writes), `removal` (the one way a
tree is removed: by descriptor, no link followed), `paths` (user paths
taken literally; the schemes this process's file systems open),
`source_tree` (a module's source read without running it),
`saved_models` (a SavedModel loaded or parsed once while unchanged),
`machine` and `cgroup` (cores, memory and disk a training may use),
`collector` (a training program's start without the garbage collector's
full passes over what its imports made),
`disk_full` (a full disk told from any writer's error), `preemption`
(SIGTERM as a preemption), `training_position` (where a training thread
is in Keras's loops, and what it waits in, read from its frames),
`keras_env` (which Keras and backend this process has, and the
environment that chooses them), `versions` (where the supported TFX,
TensorFlow and Keras releases' APIs differ, decided by what is
installed), `progress` and
`console` (what a person sees), `lazy` (the heavy modules the package
uses, TensorFlow, Keras, TFX..., declared once and imported on first
use).

May import: the base modules (`errors`, `keys`) only.
"""
