#!/usr/bin/env bash
# The image's base for a machine that cannot pull from a registry:
# Debian bookworm from Debian's own packages (mmdebstrap, minbase) and a
# Python 3.10 copied in from this machine.
#
#   scripts/base_image.sh [TAG]      # default localhost/tfx-generic-trainer-base:bookworm-py3.10
#   make image BASE=localhost/tfx-generic-trainer-base:bookworm-py3.10
#
# Why a copied Python: TFX 1.16 runs on Python 3.9-3.10 only, and bookworm
# packages Python 3.11 alone; building 3.10 from source inside the image
# takes minutes and a compiler. A 3.10 built on bookworm (pyenv's, which
# setup.sh also finds) links only bookworm's libraries (libssl3, libffi8,
# libsqlite3, ...), which the base installs, so it runs there unchanged.
# PYTHON_HOME=/path/to/prefix picks another one (its bin/python3.10).
# Skips the work when TAG exists and was made from the same Python.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-localhost/tfx-generic-trainer-base:bookworm-py3.10}"
if [ -z "${PYTHON_HOME:-}" ]; then
  for py in python3.10 "$HOME"/.pyenv/versions/3.10.*/bin/python3.10; do
    if PYTHON_HOME="$("$py" -c 'import sys; print(sys.base_prefix)' 2>/dev/null)"; then
      break
    fi
  done
fi
[ -x "${PYTHON_HOME:-}/bin/python3.10" ] || {
  echo 'base_image.sh: no Python 3.10 found; set PYTHON_HOME' >&2; exit 1; }
command -v mmdebstrap >/dev/null || scripts/container.sh --install
command -v mmdebstrap >/dev/null || apt-get install -y -qq mmdebstrap >/dev/null
stamp="$(cd "$PYTHON_HOME" && "$PYTHON_HOME/bin/python3.10" -VV | sha256sum | cut -c1-16)"
if [ "$(scripts/container.sh image inspect --format '{{index .Labels "python-stamp"}}' "$tag" 2>/dev/null || true)" = "$stamp" ]; then
  echo "base_image.sh: $tag is up to date"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mmdebstrap --variant=minbase --quiet \
  --include=ca-certificates,libssl3,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,zlib1g,libreadline8,libtinfo6,libuuid1,libstdc++6,libgomp1 \
  --customize-hook="mkdir -p \"\$1/opt/python3.10\"" \
  --customize-hook="copy-in $PYTHON_HOME/. /opt/python3.10" \
  --customize-hook="rm -rf \"\$1/opt/python3.10/lib/python3.10/test\"" \
  --customize-hook="echo /opt/python3.10/lib > \"\$1/etc/ld.so.conf.d/python3.10.conf\"" \
  --customize-hook="chroot \"\$1\" ldconfig" \
  --customize-hook="for n in python python3 python3.10 pip pip3; do ln -sf /opt/python3.10/bin/\$n \"\$1/usr/local/bin/\$n\"; done" \
  --customize-hook="rm -rf \"\$1\"/var/lib/apt/lists/* \"\$1\"/var/cache/apt/*" \
  bookworm "$work/rootfs.tar"
scripts/container.sh import \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin' \
  --change 'ENV LANG=C.UTF-8' \
  --change "LABEL python-stamp=$stamp" \
  --change 'CMD ["python3"]' "$work/rootfs.tar" "$tag" >/dev/null
echo "base_image.sh: made $tag"
