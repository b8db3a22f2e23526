#!/usr/bin/env bash
# The test command: installs hubsync with its test extra, makes sure a
# redis-server binary exists (the tests start their own private servers from
# it, never the machine's Redis on 6379), checks lint, format and types, then
# runs pytest. Extra arguments go to pytest; by default slow soak tests are
# left out (run them with: scripts/test.sh -m slow, or scripts/soak.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}

echo "== installing hubsync with its test extra"
"$PYTHON" -m pip install --quiet --disable-pip-version-check -e '.[test]' 2>&1 \
  | grep -v -e "is ignored: it is neither a file nor a directory" -e "Running pip as the 'root' user" || true

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing redis-server (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server is missing: install it (e.g. 'sudo apt-get install -y redis-server' or 'brew install redis') and re-run" >&2
    exit 1
  fi
fi

echo "== ruff (lint, format)"
"$PYTHON" -m ruff check hubsync producers consumers hubstore tests scripts
"$PYTHON" -m ruff format --check hubsync producers consumers hubstore tests scripts

echo "== mypy (strict)"
"$PYTHON" -m mypy

echo "== pytest"
# Slow soak tests stay out unless the arguments choose markers themselves
# (scripts/test.sh -m slow, or -m "not e2e and not slow" for the inner loop).
marker_given=false
workers_given=false
without_e2e=false
for arg in "$@"; do
  case "$arg" in
    -m|-m*) marker_given=true ;;
    -n|-n*|--numprocesses*) workers_given=true ;;
  esac
  case "$arg" in *"not e2e"*) without_e2e=true ;; esac
done
if [ "$marker_given" = false ]; then
  set -- -m "not slow" "$@"
fi
# The inner loop (-m "not e2e and not slow") runs on two workers (pytest-xdist):
# each worker starts its own private redis-server. Whole-pipeline tests stay
# serial, so a full run never loads the machine twice over under their clocks.
if [ "$without_e2e" = true ] && [ "$workers_given" = false ]; then
  set -- -n 2 "$@"
fi
"$PYTHON" -m pytest "$@"
