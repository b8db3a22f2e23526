#!/usr/bin/env bash
# inspect-queues.sh: the redis-cli commands an operator runs to look at one hub project's queues.
#
# Usage: scripts/inspect-queues.sh HUB_PROJECT [LEASE_RESOURCE]
#   HUBSYNC_REDIS_URL, else REDIS_URL, picks the Redis [default: redis://127.0.0.1:6379/0],
#   the same precedence as the hubsync CLI.
#
# Read-only. Prints, for hubsync:{HUB_PROJECT}:events: XINFO STREAM, XINFO GROUPS (lag,
# entries-read, pending), XINFO CONSUMERS of group hub (idle times), the XPENDING summary and the
# oldest pending entry (id, consumer, idle ms, deliveries), then XRANGE of the dead letters and
# alerts (first 10), and with LEASE_RESOURCE the lease's HGETALL, its audit log (newest 10) and
# its token counter.
# Every command is echoed with its -u URL (password masked) before its output, so it can be
# copied and rerun by hand.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || "$1" == "-h" || "$1" == "--help" ]]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  [[ $# -ge 1 && ( "$1" == "-h" || "$1" == "--help" ) ]] && exit 0
  exit 2
fi

project=$1
resource=${2:-}
url=${HUBSYNC_REDIS_URL:-${REDIS_URL:-redis://127.0.0.1:6379/0}}
# What is shown of the URL: the password of a [user]:password@ part becomes ****.
shown_url=$(sed -E 's#^([a-z]+://)([^:/@]*):.*@#\1\2:****@#' <<<"$url")

# Names go inside a {hash tag}: refuse what hubsync itself would refuse (hubsync/core/names.py).
name_ok() { [[ "$1" =~ ^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}$ ]]; }
if ! name_ok "$project"; then
  echo "error: invalid hub project '$project' (1-128 of A-Z a-z 0-9 . _ : @ / + = -)" >&2
  exit 2
fi
if [[ -n "$resource" ]] && ! name_ok "$resource"; then
  echo "error: invalid lease resource '$resource'" >&2
  exit 2
fi
if ! command -v redis-cli >/dev/null 2>&1; then
  echo "error: redis-cli is not installed (apt-get install redis-tools)" >&2
  exit 1
fi

rcli() { redis-cli -u "$url" --no-auth-warning "$@"; }
show() {
  echo "> redis-cli -u $shown_url $*"
  rcli "$@"
  echo
}

if ! rcli PING >/dev/null 2>&1; then
  echo "error: cannot reach Redis at $shown_url" >&2
  exit 3
fi

events="hubsync:{$project}:events"
dead="hubsync:{$project}:dead"
alerts="hubsync:{$project}:alerts"

echo "== hub project $project =="
show SISMEMBER hubsync:projects "$project"
if [[ "$(rcli EXISTS "$events")" == "1" ]]; then
  show XINFO STREAM "$events"
  show XINFO GROUPS "$events"
  if [[ "$(rcli XINFO GROUPS "$events" | grep -cx hub)" -gt 0 ]]; then
    show XINFO CONSUMERS "$events" hub
    show XPENDING "$events" hub
    echo "-- oldest pending entry: id, consumer, idle ms, deliveries"
    show XPENDING "$events" hub - + 1
  else
    echo "(no consumer group 'hub' on $events yet: no hub consumer has run)"
    echo
  fi
else
  echo "($events does not exist)"
  echo
fi

echo "== dead letters ($dead) =="
show XLEN "$dead"
show XRANGE "$dead" - + COUNT 10

echo "== alerts ($alerts) =="
show XLEN "$alerts"
show XRANGE "$alerts" - + COUNT 10

if [[ -n "$resource" ]]; then
  lease="hubsync:lease:{$resource}"
  echo "== lease $resource =="
  show HGETALL "$lease"
  show PTTL "$lease"
  show XREVRANGE "$lease:log" + - COUNT 10
  show GET "$lease:counter"
fi
