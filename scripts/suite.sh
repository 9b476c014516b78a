#!/usr/bin/env bash
# `make test`: the suite, in two lanes, as an ordinary user.
#
#   scripts/suite.sh              # what `make test` runs (after make setup)
#   scripts/suite.sh only [-m EXPR] TESTS...  # those tests alone, the same way
#   scripts/suite.sh pytest ARGS  # pytest with a base folder of its own
#
# As its users run it. Everyone who trains runs as themselves, so when root
# runs this (CI does), the suite runs as `gt-tester`, an ordinary user of
# this machine made for it, with a HOME of its own, the machine's /tmp and
# no TMPDIR, in a copy of this checkout with an interpreter and a venv of
# its own (scripts/suite_user.py: 2 to 7 s); the tests that need root,
# which tests/needs-root.txt lists with the reason of each, run as root
# after them in each lane, so each test runs once. Run by an ordinary
# user, it all runs as that user, and those tests skip, saying why.
#
# Two lanes. The suite here (TFX 1.16) in the foreground; beside it, at a
# lower priority, the tests that stand apart from it: they run in
# containers or a fresh environment, or run whole benchmarks in processes
# of their own, and share nothing with the suite but the machine (BESIDE:
# the compiled pipeline's steps in the project image, a TrainJob's pods as
# containers of it beside the stand-in API server, our wheel installed
# into a fresh TFX environment, the benchmarks on tiny data), and whole
# trainings that watch no clock (BESIDE_TRAININGS: TFX's own pipelines,
# modules and Trainer tests, the canned pipelines, JAX; their own session,
# fixtures and base folder), then TFX 1.21's tests in their Debian 13
# image (built first; quick when its layers are cached; podman, as root).
# The suite keeps about one core of two busy (it waits on one process at a
# time: `tests/test_cli.py` alone ran at 101% CPU), so the second lane
# runs mostly on the other; the tests that time signals, stalls and
# restarts stay in the foreground. BESIDE_TRAININGS balances the lanes:
# each about half of the whole (per file: pytest's `--junitxml` of one
# run). Its output (BESIDE_LOG) is printed when both are done; the exit is
# 0 only when every part passed.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = pytest ]; then
  shift
  scratch="$(mktemp -d)"
  .venv/bin/python -m pytest -p no:cacheprovider --basetemp="$scratch/t" "$@"
  status=$?
  rm -rf "$scratch"
  exit $status
fi

PY=.venv/bin/python
TFX121_PYTHON="${TFX121_PYTHON:-3.11}"
BESIDE_LOG="${BESIDE_LOG:-build/tests-beside.log}"
BESIDE_TRAININGS=(tests/test_tfx_module_compat.py tests/test_penguin_pipeline_e2e.py
  tests/test_tfx_trainer_executor.py tests/test_canned_pipelines.py tests/test_jax_backend.py
  tests/test_penguin_ct_pipeline_e2e.py)
BESIDE=(tests/test_containers.py tests/test_step_job_pods.py tests/test_kube_standin.py
  tests/test_installed_wheel.py tests/test_benchmarks.py "${BESIDE_TRAININGS[@]}")

# What each lane runs: here, all but BESIDE; `only`: the tests named.
here=(tests "${BESIDE[@]/#/--ignore=}") beside=("${BESIDE[@]}") chosen=''
if [ "${1:-}" = only ]; then
  shift
  here=() beside=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -m) chosen="($2) and "; shift 2 ;;
      *) here+=("$1"); shift ;;
    esac
  done
  [ ${#here[@]} -gt 0 ] || { echo 'suite.sh: only: which tests?' >&2; exit 2; }
fi
# roots ARGS...: those of ARGS (test files, tests) in a file that
# tests/needs-root.txt lists a test of; every listed file for `tests`.
roots() {
  local arg file
  for arg in "$@"; do
    for file in $(sed -n 's/^\(tests\/[^: ]*\.py\)[^ ]*: .*/\1/p' \
                  tests/needs-root.txt | sort -u); do
      if [ "$arg" = tests ]; then
        [[ " ${BESIDE[*]} " == *" $file "* ]] || echo "$file"
      elif [ "${arg%%::*}" = "$file" ]; then echo "$arg"; fi
    done
  done
}

marks="${chosen}not soak"
as_user() { "$@"; }
mapfile -t root_here < <(roots "${here[@]}")
mapfile -t root_beside < <(roots "${beside[@]}")
if [ "$(id -u)" = 0 ]; then
  started=$SECONDS
  run="$($PY scripts/suite_user.py prepare)" || exit 1
  trap '$PY scripts/suite_user.py remove "$run"' EXIT
  user=gt-tester
  # A person's session: a few variables of this one (the network's proxy
  # and CA bundle, CI), nothing else; TMPDIR unset.
  keep=()
  for name in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
              SSL_CERT_FILE REQUESTS_CA_BUNDLE CI TERM; do
    [ -n "${!name:-}" ] && keep+=("$name=${!name}")
  done
  as_user() {
    setpriv --reuid="$user" --regid="$user" --init-groups env -i \
      HOME="$(getent passwd "$user" | cut -d: -f6)" USER="$user" \
      LOGNAME="$user" SHELL=/bin/bash LANG=C.UTF-8 \
      PATH=/usr/local/bin:/usr/bin:/bin "${keep[@]}" \
      bash -c 'cd "$0" && exec "$@"' "$run/checkout" "$@"
  }
  marks="${chosen}not soak and not needs_root"
  echo "make test: the suite runs as $user (uid $(id -u $user)) in" \
       "$run/checkout, made in $((SECONDS - started)) s; the tests" \
       "tests/needs-root.txt lists run as root after it, in each lane."
else
  root_here=() root_beside=()  # They skip, saying why, as this user.
fi
# as_root ARGS...: pytest on ARGS' tests that need root, as root; nothing
# when there are none (or not root). "No test selected" (5) passes.
as_root() {
  [ $# -gt 0 ] || return 0
  bash scripts/suite.sh pytest -m "${chosen}needs_root and not soak" "$@"
  local status=$?
  [ $status = 5 ] && return 0
  return $status
}

mkdir -p "$(dirname "$BESIDE_LOG")"
if [ ${#beside[@]} -gt 0 ]; then
  ( renice -n 10 -p $BASHPID > /dev/null  # A lower priority, its children too.
    as_user bash scripts/suite.sh pytest -m "$marks" "${beside[@]}"; apart=$?
    as_root "${root_beside[@]}"; apart_root=$?
    scripts/image_tests.sh test --python "$TFX121_PYTHON"; newer=$?
    echo "make test: ${beside[*]} exit $apart (as root: $apart_root)," \
         "TFX 1.21 tests exit $newer"
    [ $apart = 0 ] && [ $apart_root = 0 ] && [ $newer = 0 ]
  ) > "$BESIDE_LOG" 2>&1 &
  lane=$!
fi
as_user $PY -m pytest -m "$marks" "${here[@]}"; status=$?
[ $status = 5 ] && status=0  # `only` tests that all need root.
as_root "${root_here[@]}"; status_root=$?
if [ ${#beside[@]} -eq 0 ]; then
  echo "suite.sh: the tests exit $status (as root: $status_root)"
  [ $status = 0 ] && [ $status_root = 0 ]
  exit
fi
echo "make test: the suite here (TFX 1.16) exited $status (as root:" \
     "$status_root); the lane beside it:"
wait $lane; apart=$?
cat "$BESIDE_LOG"
echo "make test: the suite here exit $status (as root: $status_root), the" \
     "lane beside it exit $apart"
[ $status = 0 ] && [ $status_root = 0 ] && [ $apart = 0 ]
