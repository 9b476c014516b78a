#!/usr/bin/env bash
# TFX 1.21 in a Debian 13 image: builds it, and runs the suite's tests in it.
#
#   scripts/image_tests.sh build [--python 3.11]
#   scripts/image_tests.sh test  [--python 3.11] [--list FILE] [-- PYTEST ARGS]
#   scripts/image_tests.sh run   [--python 3.11] -- COMMAND ARGS
#
# TFX 1.21's ml-metadata and TFDV publish wheels for glibc 2.39 or newer
# only, so TFX 1.21 installs in Debian 13 (glibc 2.41), not on a Debian 12
# machine (glibc 2.36). `build` makes the base (scripts/base_image.sh:
# Debian 13 from Debian's packages, this machine's Python copied in) and the
# project's image on it (Dockerfile) with the lock of TFX 1.21 on that
# Python (requirements/lock-tfx1.21-pyX.Y.txt); both are cached (the base by
# its stamp, the image by its layers: a code change rebuilds only the last
# ones). `test` builds (quick when cached), then runs pytest in the image on
# this checkout, mounted read-only, as root, with the host's network, CA
# bundle and uv cache (tests/test_installed_wheel.py installs TFX 1.21 into
# a fresh environment); without PYTEST ARGS it runs the tests a list names
# (--list: tests/tfx1.21.txt, or tests/tfx1.21-smoke.txt for the other
# Pythons), one pytest argument a line, `#` starting a comment. `run` runs a command there (make bench-tfx1.21), with
# benchmarks/results and the benchmark's data folder writable. All skip,
# saying so and exiting 0, where there is no container engine (make
# containers installs podman where it can).
#
# Environment: IMAGE_BUILD_FLAGS (e.g. --no-cache), HOST_CA (the CA bundle,
# default $SSL_CERT_FILE or Debian's), UV_CACHE_DIR (the host's uv cache).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
action="${1:-}"
[ $# -gt 0 ] && shift
python=3.11
list=tests/tfx1.21.txt
while [ $# -gt 0 ]; do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --list) list="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "image_tests.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
tfx=1.21
lock="requirements/lock-tfx$tfx-py$python.txt"
base="localhost/tfx-generic-trainer-base:trixie-py$python"
image="localhost/tfx-generic-trainer:tfx$tfx-py$python"
host_ca="${HOST_CA:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
[ -f "$lock" ] || { echo "image_tests.sh: no $lock: TFX $tfx is locked for" \
  "Python $(ls requirements | sed -n "s/^lock-tfx$tfx-py\(.*\)\.txt$/\1/p" | xargs)" >&2
  exit 2; }

if [ -z "$(scripts/container.sh --which)" ]; then
  echo "image_tests.sh: the TFX $tfx tests are skipped: there is no container" \
       "engine here and none could be installed (make containers)."
  exit 0
fi

build() {
  local secret=()
  [ -f "$host_ca" ] && secret=(--secret "id=hostca,src=$host_ca")
  scripts/base_image.sh --debian trixie --python "$python" "$base"
  # shellcheck disable=SC2086
  scripts/container.sh build ${IMAGE_BUILD_FLAGS:-} --network host \
    --build-arg BASE="$base" --build-arg LOCK="$lock" \
    --build-arg KEEP_BUILD_TOOLS=1 "${secret[@]}" \
    -t "$image" -f Dockerfile .
}

# The container of `test` and `run`: this checkout read-only at /src, the
# host's network, CA bundle and uv cache, root (the image's user is uid
# 1000), bytecode not written into the checkout.
in_image() {
  local uv_cache="${UV_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/uv}" ca=()
  mkdir -p "$uv_cache"
  [ -f "$host_ca" ] && ca=(-v "$host_ca:/etc/ssl/host-ca.crt:ro" -e SSL_CERT_FILE=/etc/ssl/host-ca.crt)
  exec scripts/container.sh run --rm --network host --shm-size 1g \
    --user 0:0 -e HOME=/root -v "$uv_cache:/root/.cache/uv" \
    -e UV_CACHE_DIR=/root/.cache/uv "${ca[@]}" \
    -v "$repo:/src:ro" -w /src -e PYTHONPATH=/src -e PYTHONDONTWRITEBYTECODE=1 \
    "${mounts[@]}" --entrypoint "$1" "$image" "${@:2}"
}

built() {
  local start log
  start=$(date +%s)
  log="$(mktemp)"
  if ! build >"$log" 2>&1; then
    echo "image_tests.sh: building $image failed:" >&2
    tail -n 60 "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  echo "image_tests.sh: $image built or up to date in $(( $(date +%s) - start )) s"
}

mounts=()
case "$action" in
  build) build ;;
  test)
    built
    if [ $# -eq 0 ]; then
      mapfile -t listed < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$list" | grep -v '^$')
      set -- "${listed[@]}"
    fi
    in_image python -m pytest -p no:cacheprovider --basetemp=/tmp/pytest "$@" ;;
  run)
    # Any command; the benchmark's results and data folders writable.
    built
    data="$HOME/.cache/tfx-generic-trainer"
    mkdir -p benchmarks/results "$data"
    mounts=(-v "$repo/benchmarks/results:/src/benchmarks/results"
            -v "$data:/root/.cache/tfx-generic-trainer")
    in_image "$@" ;;
  *) echo "usage: scripts/image_tests.sh build|test|run [--python X.Y] [-- ARGS]" >&2
     exit 2 ;;
esac
