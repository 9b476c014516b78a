"""Penguin species, by name, with the canned DNN classifier: the whole module.

The species are read as strings ('Adelie', 'Chinstrap', 'Gentoo'); the
classes, the measurements' means and variances come from the schema and
the `statistics` input. Run it with

    python -m pipelines.penguin_pipeline_local --string-labels \\
        --module-file module_files/penguin_canned.py
"""

from generic_trainer.canned import DNNClassifierSpec


class PenguinSpecies(DNNClassifierSpec):
  label_key = 'species'
  hidden_units = [16, 8]
