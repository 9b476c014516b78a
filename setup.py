"""tfx-generic-trainer: its metadata, dependencies and command are declared
in pyproject.toml; this file stays for tools that still call setup.py (an
editable install by older pip, `python setup.py ...`)."""

import setuptools

setuptools.setup()
