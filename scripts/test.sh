#!/usr/bin/env bash
# The test command: installs hubsync with its test extra into the project's own virtual
# environment (.venv/, created on first use with $PYTHON, default python3) at the pins of
# constraints.txt, makes sure a redis-server binary and PostgreSQL's initdb/pg_ctl exist (the
# tests start their own private servers from them, never the machine's Redis on 6379 or
# PostgreSQL on 5432), installs promtool and systemd-analyze when it can (the deploy/ files'
# checks) and Debian's chromium (the dashboard's browser tests), checks lint, format and
# types, then runs pytest.
#
#   scripts/test.sh                    the pinned run (what CI and a fresh clone install)
#   scripts/test.sh --latest           the same checks on the newest releases pyproject.toml
#                                      admits, in .venv-latest/, without the pins
#   scripts/test.sh -m "not e2e and not slow"   the inner loop (two pytest workers)
#
# Extra arguments go to pytest; by default slow soak tests are left out (run them with:
# scripts/test.sh -m slow, or scripts/soak.sh), and the run is two passes (below): two
# workers for units and components, then the e2e tests alone. Regenerate the pins with
# scripts/lock.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
latest=false
if [ "${1:-}" = "--latest" ]; then
  latest=true
  shift
fi
if [ "$latest" = true ]; then VENV=${HUBSYNC_VENV:-.venv-latest}; else VENV=${HUBSYNC_VENV:-.venv}; fi
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac  # absolute: PATH and VIRTUAL_ENV name it

# pip, with its noise left out (and all of its output when it fails)
quiet_pip() {
  local log status=0
  log=$(mktemp)
  "$VENV/bin/python" -m pip --disable-pip-version-check "$@" >"$log" 2>&1 || status=$?
  grep -v -e "is ignored: it is neither a file nor a directory" -e "Running pip as the 'root' user" "$log" || true
  rm -f "$log"
  return "$status"
}

if ! "$VENV/bin/python" -c "import sys" >/dev/null 2>&1; then
  echo "== creating $VENV with $PYTHON"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
fi

if [ "$latest" = true ]; then
  echo "== installing hubsync with its test extra at the newest releases its ranges admit ($VENV)"
  quiet_pip install --quiet --upgrade --upgrade-strategy eager -e '.[test]'
  # what differs from the pins is what this run tries out
  "$VENV/bin/python" - constraints.txt <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version

newer = []
for line in open(sys.argv[1], encoding="utf-8"):
    name, sep, pinned = line.strip().partition("==")
    if not sep or name.startswith("#"):
        continue
    try:
        installed = version(name)
    except PackageNotFoundError:
        continue
    if installed != pinned:
        newer.append(f"{name} {installed} (pinned {pinned})")
print("== newer than the pins: " + (", ".join(newer) if newer else "nothing"))
PY
else
  # Reinstall only when the project's declared dependencies or the pins changed.
  stamp=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
  if [ "$(cat "$VENV/.hubsync-pins" 2>/dev/null)" != "$stamp" ]; then
    echo "== installing hubsync with its test extra at the pins of constraints.txt ($VENV)"
    quiet_pip install --quiet -c constraints.txt -e '.[test]'
    echo "$stamp" >"$VENV/.hubsync-pins"
  fi
  # tests/app/test_pins.py checks every installed distribution against this file
  export HUBSYNC_TEST_PINS="$PWD/constraints.txt"
fi
PY="$VENV/bin/python"
# as an activated environment: the tests start console scripts (rq, hubsync) by name
export VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH"

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

# promtool (Debian's prometheus package) checks and unit-tests deploy/prometheus/'s alert
# rules; systemd-analyze verifies deploy/systemd/'s units. Their tests skip without them,
# except in CI, so install them here when we can.
install_tool() {  # install_tool COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing $2 for $1 (apt-get)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null
  else
    echo "warning: $1 is missing (e.g. 'sudo apt-get install -y $2'): its tests are skipped, and fail in CI" >&2
  fi
}
install_tool promtool prometheus
# only promtool is wanted: a Prometheus server the package started is stopped and disabled
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
install_tool systemd-analyze systemd
# the dashboard's browser tests drive Debian's chromium (never a browser download)
install_tool chromium chromium

echo "== ruff (lint, format)"
"$PY" -m ruff check hubsync producers consumers hubstore tests scripts
"$PY" -m ruff format --check hubsync producers consumers hubstore tests scripts

echo "== mypy (strict)"
"$PY" -m mypy

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
# The default run is two passes: the tests that are not whole pipelines on two workers
# (pytest-xdist; each worker starts its own private servers), then the whole-pipeline
# (e2e) tests alone, so a full run never loads the machine twice over under their clocks
# and stays within about ten minutes on two cores. The slowest tests are listed, so a test
# that grows shows in CI's output.
if [ "$marker_given" = false ] && [ "$workers_given" = false ]; then
  status=0
  echo "== pytest: units and components, two workers"
  # (exit 5 = that pass selected no test of the ones named, not a failure)
  "$PY" -m pytest --durations=10 -n 2 -m "not e2e and not slow" "$@" || { rc=$?; [ "$rc" = 5 ] || status=$rc; }
  echo "== pytest: whole pipelines (e2e), one at a time"
  "$PY" -m pytest --durations=10 -m "e2e and not slow" "$@" || { rc=$?; [ "$rc" = 5 ] || status=$rc; }
  exit "$status"
fi
if [ "$marker_given" = false ]; then
  set -- -m "not slow" "$@"
fi
# The inner loop (-m "not e2e and not slow") runs on two workers as well.
if [ "$without_e2e" = true ] && [ "$workers_given" = false ]; then
  set -- -n 2 "$@"
fi
"$PY" -m pytest --durations=15 "$@"
