#!/usr/bin/env bash
# The long chaos soak: real relays, hub consumers and a redis-server with AOF,
# under kill -9, SIGSTOP, Redis restarts, duplicates, forgeries and garbage,
# then the end checks (no loss, no duplicate, alerts, dead letters, no secret).
#
#   scripts/soak.sh                 # 600 s of faults (default)
#   scripts/soak.sh 1800            # 30 minutes of faults
#   HUBSYNC_SOAK_SEED=42 scripts/soak.sh 300   # replay a fault schedule
#
# Where it runs (both default to the single server and SQLite):
#
#   HUBSYNC_SOAK_HUB=postgres       # the hub in PostgreSQL: the tests' private server
#                                   # (initdb, pg_ctl), or HUBSYNC_TEST_POSTGRES_URL's
#   HUBSYNC_SOAK_REDIS=cluster      # a private Redis Cluster, 3 masters with a replica
#                                   # each; the Redis fault becomes kill -9 of a master
#                                   # (its replica takes over), then restarting it as a replica
#   HUBSYNC_SOAK_HUB=postgres HUBSYNC_SOAK_REDIS=cluster scripts/soak.sh 600
#
# Prints the seed, every fault and the figures as JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
export HUBSYNC_SOAK_SECONDS="${1:-${HUBSYNC_SOAK_SECONDS:-600}}"
exec "${PYTHON:-python3}" -m pytest -m slow -k long -s -q -p no:cacheprovider tests/e2e/test_soak.py
