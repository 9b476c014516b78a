#!/usr/bin/env bash
# Creates .venv with Python 3.10 and installs the pinned lock and this package.
# Idempotent: does nothing when .venv already matches requirements/lock.txt.
# Choose the interpreter with PYTHON=/path/to/python3.10 if it is not found.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  local candidates=()
  [ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
  candidates+=(python3.10)
  if command -v pyenv >/dev/null 2>&1; then
    candidates+=("$(pyenv root)"/versions/3.10.*/bin/python)
  fi
  candidates+=("$HOME"/.pyenv/versions/3.10.*/bin/python /usr/bin/python3.10 /usr/local/bin/python3.10)
  for py in "${candidates[@]}"; do
    if command -v "$py" >/dev/null 2>&1 &&
       "$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; then
      command -v "$py"
      return 0
    fi
  done
  return 1
}

stamp=".venv/.lock-sha256"
want="$(cat requirements/lock.txt setup.py pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  exit 0
fi

if ! py="$(find_python)"; then
  cat >&2 <<'MSG'
setup: no Python 3.10 interpreter found (looked at $PYTHON, python3.10 on PATH,
pyenv's versions folder, /usr/bin and /usr/local/bin).
tfx 1.16, which this project pins, supports Python 3.9-3.10 only. Install
Python 3.10 (for example `pyenv install 3.10` or your OS package python3.10)
and run again, or point at it: PYTHON=/path/to/python3.10 make setup
MSG
  exit 1
fi

echo "setup: creating .venv with $py"
rm -rf .venv
"$py" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check uv
# Compiled as pip compiles at install (uv does not by default): every
# start then reads TensorFlow's modules compiled, the first one too, and
# so do those a training imports while it writes none (system/bytecode).
.venv/bin/python -m uv pip install --quiet -p .venv/bin/python --compile-bytecode -r requirements/lock.txt
.venv/bin/python -m uv pip install --quiet -p .venv/bin/python --no-deps -e .
echo "$want" > "$stamp"
echo "setup: .venv ready"
