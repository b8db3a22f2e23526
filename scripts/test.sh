#!/usr/bin/env bash
# The test command: installs hubsync with its test extra, makes sure a
# redis-server binary and PostgreSQL's initdb/pg_ctl exist (the tests start
# their own private servers from them, never the machine's Redis on 6379 or
# PostgreSQL on 5432), checks lint, format and types, then runs pytest. Extra arguments go to pytest; by default slow soak tests are
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

# Where tests/helpers/postgres_server.py looks for initdb: PATH, pg_config --bindir,
# then /usr/lib/postgresql/*/bin. HUBSYNC_TEST_POSTGRES_URL (an existing server)
# makes it unnecessary.
have_initdb() {
  command -v initdb >/dev/null 2>&1 && return 0
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    return 0
  fi
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}
if [ -z "${HUBSYNC_TEST_POSTGRES_URL:-}" ] && ! have_initdb; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing the PostgreSQL server (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL's initdb is missing: install the server (e.g. 'sudo apt-get install -y postgresql' or 'brew install postgresql'), or set HUBSYNC_TEST_POSTGRES_URL to a server the tests may create databases on, and re-run" >&2
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
