#!/usr/bin/env python3
"""Benchmark: the relay's outbox bookkeeping per row: read unsent rows, mark them, apply acks.

Builds a runtime whose one store holds ``--rows`` pending bench events (about
540 bytes each: ``hubsync.benchmarks.workload``), opens it as the relay does
(``synchronous=NORMAL``), then times, per row:

* ``unsent``: a walk of the whole backlog by ``unsent(after, --batch)``, as the
  relay's drain reads it (best of three walks);
* ``mark_attempted`` and ``apply_outcomes``: the drain's writes, batch by batch
  (``--batch`` rows: one ``accepted`` outcome per row, its own hash, the ack
  stream position saved in the same transaction, as the relay applies them).

Each figure is wall time and the process's CPU time per row. With ``--compare
DIR [DIR ...]`` each DIR is a code tree (a checkout of this repository) put
first on ``PYTHONPATH`` of a child process running this script, and the trees
run alternately, ``--rounds`` rounds each; the best round of each tree is
printed (a noisy machine makes the slowest rounds the least informative).

Usage: scripts/bench_outbox_acks.py [--rows 50000] [--batch 500] [--json FILE]
       scripts/bench_outbox_acks.py --compare /path/to/a /path/to/b [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PHASES = ("unsent", "mark_attempted", "apply_outcomes")


def measure(rows: int, batch: int) -> dict[str, dict[str, float]]:
    """Per-row microseconds (wall, cpu) of each phase, on a fresh store of ``rows`` events."""
    from hubsync.benchmarks.workload import runtime_with_backlog
    from hubsync.core.entries import Outcome, OutcomeRecord
    from producers.store.outbox import BOOKKEEPING_SYNCHRONOUS

    with tempfile.TemporaryDirectory(prefix="bench-outbox-acks-") as tmp:
        registry, filled = runtime_with_backlog(Path(tmp), rows, join=False)
        (registration,) = registry.projects()
        filled.close()
        store = registry.open_store(registration, synchronous=BOOKKEEPING_SYNCHRONOUS)
        try:
            totals = {phase: [0.0, 0.0] for phase in PHASES}

            def timed(phase: str, call: Callable[..., Any], *args: Any) -> Any:
                wall, cpu = time.perf_counter(), time.process_time()
                result = call(*args)
                totals[phase][0] += time.perf_counter() - wall
                totals[phase][1] += time.process_time() - cpu
                return result

            walks = []
            for _ in range(3):
                totals["unsent"] = [0.0, 0.0]
                after, seen = 0, 0
                while page := timed("unsent", store.unsent, after, batch):
                    seen += len(page)
                    after = page[-1].seq
                assert seen == rows, f"walked {seen} of {rows} rows"
                walks.append(tuple(totals["unsent"]))
            totals["unsent"] = list(min(walks))

            after, position = 0, 0
            while page := store.unsent(after, batch):
                after = page[-1].seq
                seqs = [row.seq for row in page]
                now = time.time()
                timed("mark_attempted", store.mark_attempted, seqs, now, 30.0, 600.0)
                outcomes = [
                    OutcomeRecord(
                        store.project_id, r.run_id, r.sequence, Outcome.ACCEPTED, r.content_hash
                    )
                    for r in page
                ]
                position += 1
                spot = ("acks:bench", f"{position}-0")
                applied = timed("apply_outcomes", store.apply_outcomes, outcomes, now, spot)
                assert applied.acked == len(page), applied
            assert store.outbox_counts()["acked"] == rows
        finally:
            store.close()
            registry.close()
    return {
        phase: {"wall_us_per_row": wall / rows * 1e6, "cpu_us_per_row": cpu / rows * 1e6}
        for phase, (wall, cpu) in totals.items()
    }


def compare(trees: list[str], rounds: int, rows: int, batch: int) -> dict[str, Any]:
    """Run each tree alternately ``rounds`` times in child processes; the best round of each."""
    runs: dict[str, list[dict[str, dict[str, float]]]] = {tree: [] for tree in trees}
    for round_number in range(rounds):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": tree}
            argv = [sys.executable, __file__, "--rows", str(rows), "--batch", str(batch)]
            out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True).stdout
            runs[tree].append(json.loads(out)["phases"])
            print(f"round {round_number + 1} {tree}: {summary(runs[tree][-1])}", file=sys.stderr)
    best = {
        tree: {
            phase: {
                figure: min(run[phase][figure] for run in results)
                for figure in ("wall_us_per_row", "cpu_us_per_row")
            }
            for phase in PHASES
        }
        for tree, results in runs.items()
    }
    return {"rows": rows, "batch": batch, "rounds": rounds, "best": best, "runs": runs}


def summary(phases: dict[str, dict[str, float]]) -> str:
    return ", ".join(
        f"{phase} {v['wall_us_per_row']:.2f} us wall / {v['cpu_us_per_row']:.2f} us cpu"
        for phase, v in phases.items()
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--compare", nargs="+", metavar="DIR", help="code trees to compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the JSON document here")
    args = parser.parse_args()
    if args.compare:
        document: dict[str, Any] = {
            "load_average": os.getloadavg(),
            **compare(args.compare, args.rounds, args.rows, args.batch),
        }
        for tree, phases in document["best"].items():
            print(f"best of {args.rounds} {tree}: {summary(phases)}", file=sys.stderr)
    else:
        document = {
            "rows": args.rows,
            "batch": args.batch,
            "phases": measure(args.rows, args.batch),
        }
    text = json.dumps(document, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
