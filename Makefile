# The two commands of README.md: `make pipeline` and `make test`.
PY := .venv/bin/python
OUT ?= tfx_pipeline_output

# The image (Dockerfile): BASE is its FROM; IMAGE its tag, the package's
# version (generic_trainer/version.py, read without importing anything).
VERSION := $(shell sed -n "s/^__version__ = '\(.*\)'$$/\1/p" generic_trainer/version.py)
IMAGE ?= localhost/tfx-generic-trainer:$(VERSION)
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

.PHONY: image image-base image-gpu image-tfx1.21 containers setup pipeline pipeline-spec pipeline-jax pipeline-canned test test-fast test-tfx1.21 soak bench bench-tfx1.21 lock dist clean

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

# TFX 1.21 in a Debian 13 image (its ml-metadata and TFDV wheels need glibc
# 2.39; this machine's Debian 12 has 2.36): scripts/image_tests.sh builds it
# on Python TFX121_PYTHON (3.10, 3.11, 3.12 or 3.13) and runs the tests
# TFX121_LIST lists in it (tests/tfx1.21-smoke.txt for 3.10, 3.12, 3.13), or
# the pytest arguments TFX121_TESTS.
TFX121_PYTHON ?= 3.11
TFX121_LIST ?= tests/tfx1.21.txt
TFX121_TESTS ?=

image-tfx1.21: containers
	scripts/image_tests.sh build --python $(TFX121_PYTHON)

test-tfx1.21: containers
	scripts/image_tests.sh test --python $(TFX121_PYTHON) --list $(TFX121_LIST) -- $(TFX121_TESTS)

# The suite in two lanes, as an ordinary user when root runs it, the tests
# that need root (tests/needs-root.txt) as root: scripts/suite.sh.
BESIDE_LOG ?= build/tests-beside.log

test: setup containers
	@TFX121_PYTHON=$(TFX121_PYTHON) BESIDE_LOG=$(BESIDE_LOG) bash scripts/suite.sh

test-fast: setup
	$(PY) -m pytest tests -m "not slow and not soak"

soak: setup
	$(PY) -m pytest tests -m soak -s

bench: setup
	$(PY) -m benchmarks.run

# (b), (c) and (f) here (TFX 1.16) and in the TFX 1.21 image, one after the
# other on the same data: docs/benchmarks/index.md sets their ratios side
# by side (e.g. BENCH_TFX121_FLAGS="--only b,c,f --repeats 3").
BENCH_TFX121_FLAGS ?= --only b,c,f
bench-tfx1.21: setup containers
	$(PY) -m benchmarks.run $(BENCH_TFX121_FLAGS) --out benchmarks/results/tfx1.16-b-c-f
	scripts/image_tests.sh run --python $(TFX121_PYTHON) -- python -m benchmarks.run $(BENCH_TFX121_FLAGS) --out benchmarks/results/tfx1.21-b-c-f

# TFX 1.16 on Python 3.10 (this machine's), and TFX 1.21 on 3.10 to 3.13 for
# the glibc of its wheels (manylinux_2_39), with the package's own ranges.
lock:
	UV_PYTHON_DOWNLOADS=never $(UV) pip compile --python-version 3.10 requirements/requirements.in -o requirements/lock.txt
	for py in 3.10 3.11 3.12 3.13; do \
	  UV_PYTHON_DOWNLOADS=never $(UV) pip compile --python-version $$py \
	    --python-platform x86_64-manylinux_2_39 requirements/requirements-tfx1.21.in --all-extras \
	    pyproject.toml -o requirements/lock-tfx1.21-py$$py.txt || exit 1; done

# The sdist and the wheel in dist/, their metadata checked (twine check
# --strict, run by uv from PyPI): what docs/getting-started/install.md installs.
UV ?= $(if $(shell command -v uv 2>/dev/null),uv,$(PY) -m uv)
dist:
	rm -rf dist
	$(UV) build --sdist --wheel --out-dir dist .
	$(UV) tool run twine check --strict dist/*

clean:
	rm -rf $(OUT) .pytest_cache
