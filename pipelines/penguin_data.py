"""The penguin CSV the example pipeline trains on, made from `palmerpenguins`.

The `palmerpenguins` package carries the raw table; nothing is downloaded.
Rows with a missing measurement are dropped and the species becomes an int
label: Adelie=0, Chinstrap=1, Gentoo=2 (as in TFX's penguin example), or
stays the species' name with `string_labels=True` (for the canned specs,
whose heads take class names).
"""

import csv
import importlib.resources
import os

SPECIES = ('Adelie', 'Chinstrap', 'Gentoo')
SEXES = ('female', 'male')
COLUMNS = ('species', 'bill_length_mm', 'bill_depth_mm', 'flipper_length_mm',
           'body_mass_g')
# The names TFX's penguin examples (tfx/examples/penguin) give the columns.
TFX_NAMES = {'bill_length_mm': 'culmen_length_mm',
             'bill_depth_mm': 'culmen_depth_mm'}


def write_penguin_csv(data_dir: str, string_labels: bool = False,
                      sex: bool = False, tfx_names: bool = False) -> str:
  """Writes `penguins.csv` into `data_dir` (alone: ExampleGen reads the dir);
  the species as 0/1/2, or as 'Adelie'/'Chinstrap'/'Gentoo'; with `sex`,
  also the `sex` column (0/1, or 'female'/'male'; rows without it
  dropped), a second label for multi-task models. `tfx_names`: name the
  columns as TFX's penguin examples do (culmen_*), for their module files.
  """
  source = importlib.resources.files('palmerpenguins') / 'data/penguins.csv'
  os.makedirs(data_dir, exist_ok=True)
  path = os.path.join(data_dir, 'penguins.csv')
  with source.open() as src, open(path, 'w', newline='') as dst:
    writer = csv.writer(dst)
    writer.writerow([TFX_NAMES.get(c, c) if tfx_names else c
                     for c in COLUMNS] + (['sex'] if sex else []))
    for row in csv.DictReader(src):
      values = [row[c] for c in COLUMNS[1:]] + ([row['sex']] if sex else [])
      if row['species'] in SPECIES and all(v not in ('', 'NA') for v in values):
        label = row['species'] if string_labels else SPECIES.index(
            row['species'])
        if sex and not string_labels:
          values[-1] = SEXES.index(values[-1])
        writer.writerow([label] + values)
  return path
