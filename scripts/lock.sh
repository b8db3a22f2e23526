#!/usr/bin/env bash
# Regenerates constraints.txt, the known-good pins that scripts/test.sh installs: every
# dependency of hubsync and of its extras (test, demo, postgres, bench, web), at the newest release
# that pyproject.toml's ranges admit, resolved in a fresh virtual environment.
# Run it, then scripts/test.sh (the pinned run must pass before the new pins are committed).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/hubsync-lock.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== resolving the newest releases pyproject.toml admits (in $work)"
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  -e '.[test,demo,postgres,bench,web]' 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
"$work/venv/bin/python" -m pip check

{
  echo "# Known-good pins for hubsync and every extra (test, demo, postgres, bench, web): scripts/test.sh"
  echo "# installs exactly these. Regenerate with scripts/lock.sh, never by hand."
  echo "# Resolved with Python $("$work/venv/bin/python" -c 'import platform; print(platform.python_version())')."
  "$work/venv/bin/python" -m pip freeze --exclude-editable --all \
    | grep -v -i -E '^(pip|setuptools|wheel)==' | LC_ALL=C sort -f
} >constraints.txt
echo "== wrote constraints.txt ($(grep -c '==' constraints.txt) pins); run scripts/test.sh before committing it"
