#!/usr/bin/env bash
# Runs the container engine this machine has, with the settings it needs:
#   scripts/container.sh build -t IMAGE .     scripts/container.sh run ... IMAGE
#   scripts/container.sh --install            installs podman when there is
#                                             neither docker nor podman
#   scripts/container.sh --which              prints docker, podman or nothing
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
