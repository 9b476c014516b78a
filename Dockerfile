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
# `trainer` (uid 1000), or as a cluster's rules run it (below). LOCK picks
# another supported combination's lock on a base with its Python: TFX
# 1.21's image (Debian 13, Python 3.11) is
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

# A cluster's rules, as OpenShift's restricted SCC and a read-only root
# filesystem give them: any uid, in group 0, with no passwd entry (so no
# home), nothing writable but /tmp (an emptyDir, or `--read-only --tmpfs
# /tmp`). So HOME is /tmp, for every uid: what TFX, Keras, TensorFlow and
# matplotlib keep under $HOME (~/.keras, ~/.cache, ~/.config/matplotlib)
# goes there, and so does this package's parsed-rows cache (~/.cache). The
# user `trainer` (uid 1000) is the default and has /tmp as its home too.
# /gcs, /minio and /s3 are made at start by KFP's launcher before 2.3
# (os.MkdirAll, which fails in a non-root image, and on a read-only root,
# unless they exist): here they exist, owned by `trainer` and group 0,
# group-writable (g=u, OpenShift's way) and setgid, so that what one uid
# of group 0 writes there another can change; nothing is world-writable.
# /pipeline stays root's and read-only: nothing writes to the working
# directory. The standard library is compiled here too: neither base ships
# its bytecode (python:3.10-slim deletes it, scripts/base_image.sh does not
# copy it), and each step imported about 100 of its modules (multiprocessing,
# unittest, xml, ...) from source, every time, as no uid can write it (ten
# of them: 0.37 s from source, 0.11 s compiled).
RUN echo 'trainer:x:1000:1000::/tmp:/bin/sh' >> /etc/passwd \
 && echo 'trainer:x:1000:' >> /etc/group \
 && install -d -o 1000 -g 0 -m 2775 /gcs /minio /s3 \
 && python -m compileall -q -j 0 -x '/site-packages/|/lib2to3/tests/' \
      "$(python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"

# The package's own modules compiled as the lock's are: a step runs in
# /pipeline, so `python -m` imports generic_trainer, pipelines and the
# module files from here, and no uid can write their __pycache__ later.
# The build's leftovers go (setuptools' build/ and egg-info here, uv's lock
# files in /tmp, world-writable).
COPY setup.py pyproject.toml README.md LICENSE ./
COPY generic_trainer generic_trainer
COPY pipelines pipelines
COPY module_files module_files
RUN python -m uv pip install --system --no-cache --no-deps --no-build-isolation \
      --compile-bytecode . \
 && python -c "from pipelines.penguin_data import write_penguin_csv; write_penguin_csv('/pipeline/data')" \
 && rm -rf build ./*.egg-info /tmp/* /tmp/.[!.]* \
 && python -m compileall -q generic_trainer pipelines module_files

ENV PYTHONPATH=/pipeline/module_files \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 1000:1000

# KubeflowV2DagRunner and the TFJob give this command themselves; it is the
# entrypoint too, for `docker run IMAGE --executor_class_path ... `.
ENTRYPOINT ["python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
