#!/usr/bin/env bash
# An image's base for a machine that cannot pull from a registry: Debian
# from Debian's own packages (mmdebstrap, minbase) and a CPython copied in
# from this machine.
#
#   scripts/base_image.sh [TAG]                       # bookworm, Python 3.10
#   scripts/base_image.sh --debian trixie --python 3.11 [TAG]
#   make image BASE=localhost/tfx-generic-trainer-base:bookworm-py3.10
#
# TAG defaults to localhost/tfx-generic-trainer-base:DEBIAN-pyPYTHON.
# bookworm (Debian 12, glibc 2.36) with Python 3.10 is the base of TFX 1.16's
# image; trixie (Debian 13, glibc 2.41) the base of TFX 1.21's, whose
# ml-metadata and TFDV wheels need glibc 2.39 (scripts/image_tests.sh).
#
# Why a copied Python: TFX 1.16 runs on Python 3.9-3.10 only, and bookworm
# packages Python 3.11 alone; trixie packages 3.13 alone, and TFX 1.21's
# Kubeflow extra stops at 3.11. Building one from source inside the image
# takes minutes and a compiler. A CPython built on Debian 12 (pyenv's, which
# setup.sh also finds) links only libraries both releases ship (libssl3,
# libffi8, libsqlite3, ...; trixie names some of them *t64), which the base
# installs, so it runs there unchanged. Only its interpreter, headers and
# standard library are copied (not its site-packages, which hold this
# machine's tools and .pth files, nor its test suite), and ensurepip gives it
# pip. /opt/pythonX.Y/bin is first on PATH: a venv made through a symlink
# elsewhere would not find its standard library.
# PYTHON_HOME=/path/to/prefix picks another one (its bin/pythonX.Y).
# Skips the work when TAG exists and was made from the same Python and the
# same version of this script.
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."
debian=bookworm
version=3.10
while [ $# -gt 0 ]; do
  case "$1" in
    --debian) debian="$2"; shift 2 ;;
    --python) version="$2"; shift 2 ;;
    *) break ;;
  esac
done
tag="${1:-localhost/tfx-generic-trainer-base:$debian-py$version}"
case "$debian" in
  bookworm) libraries=libssl3,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,zlib1g,libreadline8,libncursesw6,libtinfo6,libuuid1,libstdc++6,libgomp1 ;;
  trixie) libraries=libssl3t64,libffi8,libsqlite3-0,libbz2-1.0,liblzma5,zlib1g,libreadline8t64,libncursesw6,libtinfo6,libuuid1,libnsl2,libtirpc3t64,libcrypt1,libexpat1,libstdc++6,libgomp1 ;;
  *) echo "base_image.sh: --debian must be bookworm or trixie, not $debian" >&2; exit 2 ;;
esac
python="python$version"
if [ -z "${PYTHON_HOME:-}" ]; then
  for py in "$python" "$HOME"/.pyenv/versions/"$version".*/bin/"$python"; do
    if PYTHON_HOME="$("$py" -c 'import sys; print(sys.base_prefix)' 2>/dev/null)"; then
      break
    fi
  done
fi
[ -x "${PYTHON_HOME:-}/bin/$python" ] || {
  echo "base_image.sh: no Python $version found ($python on PATH, pyenv's" \
       "versions); install it (pyenv install $version) or set PYTHON_HOME" >&2
  exit 1; }
command -v mmdebstrap >/dev/null || scripts/container.sh --install
command -v mmdebstrap >/dev/null || apt-get install -y -qq mmdebstrap >/dev/null
stamp="$( ("$PYTHON_HOME/bin/$python" -VV; echo "$debian"; cat "$self") | sha256sum | cut -c1-16)"
if [ "$(scripts/container.sh image inspect --format '{{index .Labels "python-stamp"}}' "$tag" 2>/dev/null || true)" = "$stamp" ]; then
  echo "base_image.sh: $tag is up to date"
  exit 0
fi
prefix="/opt/$python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mmdebstrap --variant=minbase --quiet --include="ca-certificates,$libraries" \
  --customize-hook="mkdir -p \"\$1$prefix\"" \
  --customize-hook="tar -C '$PYTHON_HOME' --exclude='./lib/$python/test' --exclude='./lib/$python/site-packages/*' --exclude='*/__pycache__' -cf - ./bin/$python ./include ./lib | tar -C \"\$1$prefix\" -xf -" \
  --customize-hook="ln -sf $python \"\$1$prefix/bin/python3\"; ln -sf $python \"\$1$prefix/bin/python\"" \
  --customize-hook="echo $prefix/lib > \"\$1/etc/ld.so.conf.d/$python.conf\"" \
  --customize-hook="chroot \"\$1\" ldconfig" \
  --customize-hook="chroot \"\$1\" $prefix/bin/$python -m ensurepip --default-pip >/dev/null" \
  --customize-hook="for n in python python3 $python pip pip3; do ln -sf $prefix/bin/\$n \"\$1/usr/local/bin/\$n\"; done" \
  --customize-hook="rm -rf \"\$1\"/var/lib/apt/lists/* \"\$1\"/var/cache/apt/*" \
  "$debian" "$work/rootfs.tar" http://deb.debian.org/debian
scripts/container.sh import \
  --change "ENV PATH=$prefix/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin" \
  --change 'ENV LANG=C.UTF-8' \
  --change "LABEL python-stamp=$stamp" \
  --change 'CMD ["python3"]' "$work/rootfs.tar" "$tag" >/dev/null
echo "base_image.sh: made $tag"
