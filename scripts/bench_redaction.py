#!/usr/bin/env python3
"""Benchmark: ``Redactor.redact_json`` alone, CPU time per event (docs/redaction.md#cost).

Synthetic events (``producers.synthetic``) of 512 B and 4 KiB, clean and with
two planted secrets (a ``ghp_`` token and an environment value), through a
redactor holding one registered and ``--secrets`` environment secrets. The best
of ``--rounds`` rounds counts: CPU time, so a noisy neighbour hurts less.
Prints one JSON document.

Usage: scripts/bench_redaction.py [--events 1000] [--rounds 5] [--secrets 2]
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout this script is in, not an installed copy

from producers.redaction import Redactor  # noqa: E402
from producers.synthetic import run_events  # noqa: E402

PLANTED_ENV = "env-token-value-123456"


def workload(events: int, size: int, plant: tuple[str, ...]) -> list[dict[str, Any]]:
    """``events`` payloads of about ``size`` bytes, from runs of 50 events."""
    rng = random.Random(7)
    payloads: list[dict[str, Any]] = []
    while len(payloads) < events:
        payloads += [payload for _, payload in run_events(50, size, plant=plant, rng=rng)]
    return payloads[:events]


def redactor(secrets: int) -> Redactor:
    """A redactor with one registered value and ``secrets`` environment values."""
    result = Redactor()
    result.register("bench-registered-secret")
    alphabet = string.ascii_letters + string.digits
    environ = {"A_TOKEN": PLANTED_ENV}
    for n in range(secrets - 1):
        environ[f"SVC{n}_TOKEN"] = "".join(random.Random(n).choice(alphabet) for _ in range(30))
    result.register_environment(environ)
    return result


def best_us(payloads: list[dict[str, Any]], secrets: int, rounds: int) -> float:
    """The best round's CPU time per event, in microseconds."""
    subject = redactor(secrets)
    times = []
    for _ in range(rounds):
        started = time.process_time()
        for payload in payloads:
            subject.redact_json(payload)
        times.append((time.process_time() - started) / len(payloads) * 1e6)
    return round(min(times), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--secrets", type=int, default=2, help="environment secrets (>= 1)")
    args = parser.parse_args()
    planted = ("ghp_" + "a1B2c3" * 6, PLANTED_ENV)
    figures = {}
    for size in (512, 4096):
        for name, plant in (("clean", ()), ("planted", planted)):
            payloads = workload(args.events, size, plant)
            figures[f"{name}_{size}_us"] = best_us(payloads, max(args.secrets, 1), args.rounds)
    json.dump({"benchmark": "redaction", "secrets": args.secrets, **figures}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
