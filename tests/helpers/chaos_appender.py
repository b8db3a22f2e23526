"""One runtime of the chaos soak: appends synthetic run events continuously until told to stop.

Usage: python -m tests.helpers.chaos_appender STATE_DIR PROJECT_ID RATE SEED STOP_FILE SUMMARY_FILE

Appends to the already-registered project PROJECT_ID of the runtime in
STATE_DIR at about RATE events/s, through the real ``append_event`` path (every
fifth run through ``append_events``, one transaction for the whole run). The
texts in ``CHAOS_PLANTED`` (space-separated) are planted inside allowlisted
payload strings and keys WITHOUT being registered: only redaction keeps them
out (one of them is also the value of an ``*_API_KEY`` variable of this
process's environment, the other a ``ghp_`` token). When STOP_FILE exists it
finishes the current run's event and writes one JSON document to SUMMARY_FILE:
how many events it appended and how long the slowest append took (appends
never wait on Redis, so that stays small through every fault).
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from pathlib import Path

from producers.registry import RuntimeRegistry
from producers.store.event_store import NewEvent
from producers.synthetic import run_events

EVENTS_PER_RUN = 12
PAYLOAD_BYTES = 400


def main(argv: list[str]) -> int:
    state_dir, project_id, rate, seed, stop_file, summary_file = argv
    planted = os.environ.get("CHAOS_PLANTED", "").split()
    rng = random.Random(int(seed))
    interval = 1.0 / float(rate)
    stop = Path(stop_file)
    pause = threading.Event()  # never set: a wait with a timeout paces the load
    registry = RuntimeRegistry(state_dir)
    registration = registry.project(project_id)
    if registration is None:
        print(f"project {project_id} is not registered in {state_dir}", file=sys.stderr)
        return 2
    store = registry.open_store(registration)
    latencies: list[float] = []
    appended = runs = 0
    next_at = time.perf_counter()
    while not stop.exists():
        runs += 1
        run_id = f"run-{seed}-{runs:05d}"
        events = list(run_events(EVENTS_PER_RUN, PAYLOAD_BYTES, plant=planted, rng=rng))
        if runs % 5 == 0:
            started = time.perf_counter()
            store.append_events([NewEvent(run_id, kind, payload) for kind, payload in events])
            latencies.append(time.perf_counter() - started)
            appended += len(events)
            next_at += interval * len(events)
        else:
            for kind, payload in events:
                started = time.perf_counter()
                store.append_event(run_id, kind, payload)
                latencies.append(time.perf_counter() - started)
                appended += 1
                next_at += interval
                delay = next_at - time.perf_counter()
                if delay > 0:
                    pause.wait(delay)
        delay = next_at - time.perf_counter()
        if delay > 0:
            pause.wait(delay)
    store.close()
    registry.close()
    latencies.sort()
    summary = {
        "project_id": project_id,
        "appended": appended,
        "runs": runs,
        "append_p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 2)
        if latencies
        else 0.0,
        "append_max_ms": round(latencies[-1] * 1000, 2) if latencies else 0.0,
    }
    Path(summary_file).write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
