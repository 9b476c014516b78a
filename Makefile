# The two commands of README.md: `make pipeline` and `make test`.
PY := .venv/bin/python
OUT ?= tfx_pipeline_output

# The image (Dockerfile): BASE is its FROM; IMAGE its tag.
IMAGE ?= localhost/tfx-generic-trainer:dev
BASE ?= python:3.10-slim
# The base `make image-base` builds from Debian's packages, for a machine
# that cannot pull BASE (scripts/base_image.sh).
LOCAL_BASE ?= localhost/tfx-generic-trainer-base:bookworm-py3.10
# e.g. --no-cache, to time a build from scratch (uv's download cache stays).
IMAGE_BUILD_FLAGS ?=
# The host's CA bundle, for a network whose proxy re-signs TLS (a build secret).
HOST_CA ?= $(or $(SSL_CERT_FILE),/etc/ssl/certs/ca-certificates.crt)
IMAGE_FLAGS = $(IMAGE_BUILD_FLAGS) --network host --build-arg BASE=$(BASE) $(if $(wildcard $(HOST_CA)),--secret id=hostca$(comma)src=$(HOST_CA))
comma := ,

.PHONY: image image-base image-gpu containers setup pipeline pipeline-spec pipeline-jax pipeline-canned test test-fast soak bench lock dist clean

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

image:
	scripts/container.sh --install
	@scripts/container.sh --base $(BASE) $(LOCAL_BASE)
	scripts/container.sh build $(IMAGE_FLAGS) -t $(IMAGE) -f Dockerfile .

# The base from Debian's packages, for a machine that cannot pull (scripts/base_image.sh).
image-base:
	scripts/container.sh --install
	scripts/base_image.sh $(LOCAL_BASE)

# The GPU variant (Dockerfile.gpu), on top of $(IMAGE).
image-gpu:
	scripts/container.sh build $(IMAGE_BUILD_FLAGS) --network host --build-arg IMAGE=$(IMAGE) $(if $(wildcard $(HOST_CA)),--secret id=hostca$(comma)src=$(HOST_CA)) -t $(IMAGE)-gpu -f Dockerfile.gpu .

# What the container tests need (podman, buildah, runc, mmdebstrap): installed
# when there is no engine, quick when there is; they skip where it cannot be.
containers:
	@scripts/container.sh --install || echo 'make: no container engine could be installed; the container tests will skip'

test: setup containers
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
