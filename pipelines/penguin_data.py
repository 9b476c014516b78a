"""The penguin CSV the example pipeline trains on, made from `palmerpenguins`.

The `palmerpenguins` package carries the raw table; nothing is downloaded.
Rows with a missing measurement are dropped and the species becomes an int
label: Adelie=0, Chinstrap=1, Gentoo=2 (as in TFX's penguin example).
"""

import csv
import importlib.resources
import os

SPECIES = ('Adelie', 'Chinstrap', 'Gentoo')
COLUMNS = ('species', 'bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
           'body_mass_g')
# The names TFX's penguin examples (tfx/examples/penguin) give the columns.
TFX_NAMES = {'bill_length_mm': 'culmen_length_mm',
             'bill_depth_mm': 'culmen_depth_mm'}


def write_penguin_csv(data_dir: str, tfx_names: bool = False) -> str:
  """Writes `penguins.csv` into `data_dir` (alone: ExampleGen reads the dir).

  `tfx_names`: name the columns as TFX's penguin examples do (culmen_*),
  for their module files.
  """
  source = importlib.resources.files('palmerpenguins') / 'data/penguins.csv'
  os.makedirs(data_dir, exist_ok=True)
  path = os.path.join(data_dir, 'penguins.csv')
  with source.open() as src, open(path, 'w', newline='') as dst:
    writer = csv.writer(dst)
    writer.writerow([TFX_NAMES.get(c, c) if tfx_names else c
                     for c in COLUMNS])
    for row in csv.DictReader(src):
      values = [row[c] for c in COLUMNS[1:]]
      if row['species'] in SPECIES and all(v not in ('', 'NA') for v in values):
        writer.writerow([SPECIES.index(row['species'])] + values)
  return path
