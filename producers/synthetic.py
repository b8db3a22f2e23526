"""Synthetic workflow runs: realistic run events for load, demos and tests.

A run is ``run.started``, then steps (``step.started`` / ``step.completed``,
now and then an ``artifact.created``, an ``approval.requested`` or a
``step.failed``), and a closing ``run.completed``. Payloads are nested JSON of
about the requested size, with both allowlisted fields and local-only ones
(environment, host details, traces) that must never cross to the hub.

``plant`` texts are placed inside allowlisted string values and keys, without
being registered as secrets, so that a test can check from outside that
redaction (not the allowlist) keeps them out of every file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from typing import Any

_STEPS = ("checkout", "install", "lint", "build", "test", "package", "publish", "notify")
_EXECUTORS = ("local", "docker", "k8s")


def run_events(
    events: int, payload_bytes: int, plant: Sequence[str] = (), rng: random.Random | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``events`` (event_type, payload) pairs of one synthetic run."""
    rng = rng or random.Random()
    marks = " ".join(plant)
    for index in range(events):
        if index == 0:
            event_type, payload = _run_started(rng, plant, marks)
        elif index == events - 1:
            event_type, payload = _run_completed(rng, plant, marks, index)
        else:
            event_type, payload = _step_event(rng, plant, marks, index)
        yield event_type, _pad(payload, payload_bytes, rng)


def _planted_keys(plant: Sequence[str], stem: str) -> dict[str, str]:
    return {f"{stem}-{text}": f"value {text}" for text in plant}


def _run_started(
    rng: random.Random, plant: Sequence[str], marks: str
) -> tuple[str, dict[str, Any]]:
    return "run.started", {
        "workflow_id": f"wf-{rng.randrange(1000):03d}",
        "workflow_name": f"release pipeline {marks}".strip(),
        "trigger": {"kind": rng.choice(["push", "schedule", "manual"]), "ref": "refs/heads/main"},
        "attempt": 1,
        "labels": {"team": "platform", "tier": rng.choice(["gold", "silver"])}
        | _planted_keys(plant, "label"),
        # Local only: never allowlisted.
        "environment": {"PATH": "/usr/local/bin:/usr/bin", "HOME": "/home/runner"},
        "host": {"name": f"runner-{rng.randrange(64)}", "cpus": rng.choice([2, 4, 8])},
    }


def _run_completed(
    rng: random.Random, plant: Sequence[str], marks: str, index: int
) -> tuple[str, dict[str, Any]]:
    return "run.completed", {
        "status": "succeeded",
        "duration_ms": rng.randrange(1_000, 900_000),
        "summary": f"{index} events, all steps green {marks}".strip(),
        "outputs": {"version": f"1.{rng.randrange(50)}.{rng.randrange(10)}"}
        | _planted_keys(plant, "output"),
        "trace": {"spans": rng.randrange(10, 500)},
    }


def _step_event(
    rng: random.Random, plant: Sequence[str], marks: str, index: int
) -> tuple[str, dict[str, Any]]:
    step = _STEPS[(index - 1) // 2 % len(_STEPS)]
    step_id = f"step-{(index - 1) // 2 + 1}"
    roll = rng.random()
    if roll < 0.05:
        return "artifact.created", {
            "artifact_id": f"art-{rng.randrange(10**6)}",
            "name": f"{step}-report.txt",
            "media_type": "text/plain",
            "size_bytes": rng.randrange(100, 10**7),
            "sha256": f"{rng.getrandbits(256):064x}",
            "uri": f"s3://artifacts/{step_id}/{step}-report.txt",
        }
    if roll < 0.08:
        return "approval.requested", {
            "approval_id": f"apr-{rng.randrange(10**6)}",
            "step_id": step_id,
            "title": f"Deploy {step}? {marks}".strip(),
            "approvers": ["release-managers"],
        }
    if roll < 0.1:
        return "step.failed", {
            "step_id": step_id,
            "step_name": step,
            "attempt": 1,
            "retryable": True,
            "error": {
                "type": "ExitCode",
                "message": f"{step} exited 1 {marks}".strip(),
                "stack": ["main.py:10", "runner.py:88"],
            },
        }
    if index % 2:
        return "step.started", {
            "step_id": step_id,
            "step_name": f"{step} {marks}".strip(),
            "attempt": 1,
            "executor": {"kind": rng.choice(_EXECUTORS), "image": "python:3.11-slim"},
            "command": ["make", step],
        }
    return "step.completed", {
        "step_id": step_id,
        "step_name": step,
        "status": "succeeded",
        "duration_ms": rng.randrange(10, 120_000),
        "outputs": {"exit_code": 0, "cache_hit": rng.random() < 0.5}
        | _planted_keys(plant, "output"),
        "metrics": {"cpu_seconds": round(rng.random() * 100, 3), "max_rss_mb": rng.randrange(4096)},
        "stdout_tail": f"ok {marks}".strip(),
    }


def _pad(payload: dict[str, Any], target: int, rng: random.Random) -> dict[str, Any]:
    """Grow ``payload`` to about ``target`` bytes of JSON with log-like lines."""
    size = len(json.dumps(payload, separators=(",", ":")))
    lines: list[str] = []
    while size < target:
        line = f"{rng.randrange(10**6):06d} INFO worker: processed chunk {rng.getrandbits(48):012x}"
        line = line[: max(1, target - size - 3)]
        lines.append(line)
        size += len(line) + 3
    if lines:
        payload["log"] = {"lines": lines, "truncated": False}
    return payload
