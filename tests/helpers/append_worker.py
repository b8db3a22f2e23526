"""A separate process that appends to one event store (for the concurrency tests).

Usage: python tests/helpers/append_worker.py STORE_PATH GO_FILE WORKER_NAME RUNS EVENTS BUSY_TIMEOUT

Waits until GO_FILE exists (so that several workers start together), then
appends EVENTS events to each of RUNS shared runs (``run-0`` ...), alternating
single appends and small batches, and prints one JSON line: every
(run_id, sequence) it was given. Any exception ends it with a non-zero code.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from producers.store.event_store import NewEvent, open_store_file


def main(argv: list[str]) -> int:
    store_path, go_file, name, runs, events, busy_timeout = argv
    deadline = time.monotonic() + 30
    while not Path(go_file).exists():
        if time.monotonic() > deadline:
            return 3
        time.sleep(0.001)
    got: list[tuple[str, int]] = []
    with open_store_file(store_path, busy_timeout=float(busy_timeout)) as store:
        for index in range(int(events)):
            if index % 2:
                batch = [
                    NewEvent(f"run-{run}", "step.completed", {"by": name, "i": index})
                    for run in range(int(runs))
                ]
                got.extend((a.run_id, a.sequence) for a in store.append_events(batch))
            else:
                for run in range(int(runs)):
                    appended = store.append_event(
                        f"run-{run}", "step.started", {"by": name, "i": index}
                    )
                    got.append((appended.run_id, appended.sequence))
    print(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
