# The two commands of README.md: `make pipeline` and `make test`.
PY := .venv/bin/python
OUT ?= tfx_pipeline_output

.PHONY: setup pipeline pipeline-spec pipeline-jax pipeline-canned test test-fast soak bench lock dist clean

setup:
	@bash scripts/setup.sh

pipeline: setup
	$(PY) -m pipelines.penguin_pipeline_local --output-dir $(OUT)

pipeline-spec: setup
	$(PY) -m pipelines.penguin_pipeline_local --output-dir $(OUT)-spec --module-file module_files/penguin_spec.py

pipeline-jax: setup
	$(PY) -m pipelines.penguin_pipeline_local --output-dir $(OUT)-jax --module-file module_files/penguin_spec_jax.py

pipeline-canned: setup
	$(PY) -m pipelines.penguin_pipeline_local --output-dir $(OUT)-canned --string-labels --module-file module_files/penguin_canned.py

test: setup
	$(PY) -m pytest tests

test-fast: setup
	$(PY) -m pytest tests -m "not slow and not soak"

soak: setup
	$(PY) -m pytest tests -m soak -s

bench: setup
	$(PY) -m benchmarks.run

lock:
	uv pip compile --python-version 3.10 requirements/requirements.in -o requirements/lock.txt

# The sdist and the wheel in dist/, their metadata checked (twine check
# --strict, run by uv from PyPI): what docs/getting-started/install.md installs.
UV ?= $(if $(shell command -v uv 2>/dev/null),uv,$(PY) -m uv)
dist:
	rm -rf dist
	$(UV) build --sdist --wheel --out-dir dist .
	$(UV) tool run twine check --strict dist/*

clean:
	rm -rf $(OUT) .pytest_cache
