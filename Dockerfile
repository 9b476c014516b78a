# syntax=docker/dockerfile:1
# The image of the Kubeflow penguin pipeline: every step runs in it, the
# trainer step included (docs/guides/scaling-out.md). Build from the
# repository root with `make image` (podman or docker, whichever is here):
#   make image                                  # FROM python:3.10-slim
#   make image BASE=localhost/tfx-generic-trainer-base:bookworm-py3.10
# (the second for a machine that cannot pull: scripts/base_image.sh makes
# that base from Debian's packages). It holds Python 3.10, the pinned lock,
# this package, the module files (importable: module_path='penguin_keras')
# and the penguin CSV (/pipeline/data), and runs as the non-root user
# `trainer` (uid 1000). LOCK picks another supported combination's lock on
# a base with its Python: TFX 1.21's image (Debian 13, Python 3.11) is
#   make image-tfx1.21                          # scripts/image_tests.sh
ARG BASE=python:3.10-slim
FROM ${BASE}
ARG LOCK=requirements/lock.txt
# Set (scripts/image_tests.sh does), g++ and make stay in the image: the
# suite's tests that run in it build the wheel (`make dist`) and install
# TFX into a fresh environment, which builds pyfarmhash again.
ARG KEEP_BUILD_TOOLS=

WORKDIR /pipeline

# The pinned dependencies first: a code change reuses this layer. uv's cache
# is a build cache mount, so rebuilding after a lock change downloads only
# what changed, and the cache is not in the image. `make image` passes the
# host's CA bundle as the secret `hostca` (a network whose proxy re-signs
# TLS needs it); it is read during this step only, never stored. g++ is
# there for this step alone: pyfarmhash (tensorflow-data-validation's) has
# no wheel (TFDV 1.16 and 1.21 pin its sdist) and builds from source; the
# step removes it (but see KEEP_BUILD_TOOLS). The modules are compiled to bytecode here: the user
# `trainer` cannot write __pycache__ under /usr/local or /opt, and without
# it every step imports TFX in ~35 s instead of ~10.
COPY ${LOCK} requirements/lock.txt
RUN --mount=type=cache,target=/root/.cache/uv \
    --mount=type=secret,id=hostca,target=/run/secrets/hostca \
    if [ -s /run/secrets/hostca ]; then \
      export SSL_CERT_FILE=/run/secrets/hostca PIP_CERT=/run/secrets/hostca \
             UV_NATIVE_TLS=1; fi \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ ${KEEP_BUILD_TOOLS:+make} >/dev/null \
 && python -m pip install --no-cache-dir --disable-pip-version-check uv \
 && python -m uv pip install --system --link-mode copy --compile-bytecode \
      -r requirements/lock.txt \
 && if [ -z "$KEEP_BUILD_TOOLS" ]; then apt-get purge -y -qq --auto-remove g++ >/dev/null; fi \
 && rm -rf /var/lib/apt/lists/*

# A user without a login: TFX and Keras write under $HOME.
RUN echo 'trainer:x:1000:1000::/home/trainer:/bin/sh' >> /etc/passwd \
 && echo 'trainer:x:1000:' >> /etc/group \
 && mkdir -p /home/trainer && chown 1000:1000 /home/trainer

COPY setup.py pyproject.toml README.md LICENSE ./
COPY generic_trainer generic_trainer
COPY pipelines pipelines
COPY module_files module_files
RUN python -m uv pip install --system --no-cache --no-deps --no-build-isolation . \
 && python -c "from pipelines.penguin_data import write_penguin_csv; write_penguin_csv('/pipeline/data')"

ENV PYTHONPATH=/pipeline/module_files \
    PYTHONUNBUFFERED=1 \
    HOME=/home/trainer
USER 1000:1000

# KubeflowV2DagRunner and the TFJob give this command themselves; it is the
# entrypoint too, for `docker run IMAGE --executor_class_path ... `.
ENTRYPOINT ["python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
