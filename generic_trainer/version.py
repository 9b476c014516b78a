"""The package's version, its one source: pyproject.toml reads it
(`[tool.setuptools.dynamic]`), `generic_trainer.__version__` and
`generic-trainer --version` print it. Importing it imports nothing else."""

__version__ = '0.2.0'
