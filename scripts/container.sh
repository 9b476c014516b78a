#!/usr/bin/env bash
# Runs the container engine this machine has, with the settings it needs:
#   scripts/container.sh build -t IMAGE .     scripts/container.sh run ... IMAGE
#   scripts/container.sh --install            installs podman when there is
#                                             neither docker nor podman
#   scripts/container.sh --which              prints docker, podman or nothing
#   scripts/container.sh --base IMAGE [LOCAL] makes sure the base IMAGE is
#                                             here (pulls it if not); when it
#                                             cannot be pulled, says how to
#                                             build the base LOCAL here
#                                             (make image-base) and fails
# Docker is used as it is. Podman runs with runc and cgroupfs and explicit
# nofile/nproc ulimits: on machines whose own containers refuse crun, the
# systemd cgroup manager and podman's default ulimits (measured on the
# Debian bookworm CI machines), these are the settings that work, and they
# work elsewhere too. Idempotent and quick when the engine is present.
set -euo pipefail

which_engine() {
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    echo docker
  elif command -v podman >/dev/null 2>&1; then
    echo podman
  fi
}

case "${1:-}" in
  --which) which_engine; exit 0 ;;
  --install)
    [ -n "$(which_engine)" ] && exit 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
      echo 'container.sh: no docker or podman, and no root apt-get to install podman' >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq podman buildah runc mmdebstrap uidmap >/dev/null
    exit 0 ;;
esac

engine="$(which_engine)"
if [ -z "$engine" ]; then
  echo 'container.sh: no docker or podman here (scripts/container.sh --install installs podman)' >&2
  exit 127
fi

if [ "${1:-}" = --base ]; then
  # Before `make image` builds: a base that is neither here nor pullable
  # would end the build with the engine's raw "lookup ... no such host".
  base="${2:?usage: scripts/container.sh --base IMAGE [LOCAL_BASE]}"
  local_base="${3:-localhost/tfx-generic-trainer-base:bookworm-py3.10}"
  "$engine" image inspect "$base" >/dev/null 2>&1 && exit 0
  echo "container.sh: pulling the base $base (BASE) ..." >&2
  if pulled="$("$engine" pull "$base" 2>&1)"; then
    exit 0
  fi
  why="$(printf '%s\n' "$pulled" | grep -v '^[[:space:]]*$' | tail -n 1)"
  why="${why#Error: }"
  echo "container.sh: the image's base $base is not on this machine and" \
    "cannot be pulled from here ($engine pull: $why). Expected a BASE that" \
    "is here or that a registry this machine reaches serves. Received:" \
    "BASE=$base. Build the base from Debian's packages here instead, then" \
    "the image on it:" >&2
  echo "  make image-base" >&2
  echo "  make image BASE=$local_base" >&2
  exit 1
fi
if [ "$engine" = docker ]; then
  exec docker "$@"
fi
sub="$1"; shift
case "$sub" in
  build|run|create)
    exec podman --runtime runc --cgroup-manager cgroupfs "$sub" \
      --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 "$@" ;;
  *) exec podman --runtime runc --cgroup-manager cgroupfs "$sub" "$@" ;;
esac
