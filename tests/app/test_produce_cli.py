"""``hubsync produce``: synthetic events through the real append path, redaction from outside."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hubsync.core.wire import parse_sync_event
from hubsync.processes import run_hubsync
from producers.registry import RuntimeRegistry
from producers.store.event_store import RunEventStore
from producers.store.outbox import OutboxEntry
from tests.helpers.operator_support import CliRun, run_cli

ENV_SECRET = "sk-live-4f9a8b7c6d5e4f3a"
GITHUB_TOKEN = "ghp_" + "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7"  # 36 after the prefix


def produce(
    capsys: pytest.CaptureFixture[str], *args: str, env: dict[str, str] | None = None
) -> CliRun:
    """``hubsync produce ARGS`` in-process."""
    return run_cli(capsys, "produce", *args, env=env)


def produce_report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """``hubsync produce ARGS --json`` in-process, which must succeed: its report."""
    result = produce(capsys, *args, "--json")
    assert result.code == 0, result.err
    report: dict[str, Any] = json.loads(result.out)
    return report


def dirs(tmp_path: Path, root: str = "shop") -> list[str]:
    """``--state-dir`` and ``--project-root`` under ``tmp_path``: the state dir is always ``state``,
    made by the first call (``--create``)."""
    state = ["--state-dir", str(tmp_path / "state"), "--create"]
    return [*state, "--project-root", str(tmp_path / root)]


def counts(runs: int, events_per_run: int) -> list[str]:
    """``--runs RUNS --events-per-run EVENTS_PER_RUN``."""
    return ["--runs", str(runs), "--events-per-run", str(events_per_run)]


def only_store(state: Path) -> RunEventStore:
    """The store of the state dir's one project (not yet open)."""
    with RuntimeRegistry(state) as registry:
        return registry.open_store(registry.projects()[0], environ={})


def stored_rows(state: Path, run_id: str) -> list[OutboxEntry]:
    with only_store(state) as store:
        return store.outbox_for_run(run_id)


def all_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def test_planted_env_api_key_and_github_token_never_reach_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # a real process: the secret comes from its environment, and every file it writes is scanned
    result = run_hubsync(
        [
            "produce",
            "--state-dir",
            str(state),
            "--project-root",
            str(tmp_path / "shop"),
            *counts(3, 12),
            "--plant",
            ENV_SECRET,
            "--plant",
            GITHUB_TOKEN,
            "--json",
            "--create",
        ],
        env={"PAYMENTS_API_KEY": ENV_SECRET},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["events"] == 36
    assert report["outbox"]["total"] == 36
    stored = all_bytes(state)
    assert stored, "the state dir holds the registry and the store"
    assert ENV_SECRET.encode() not in stored
    assert GITHUB_TOKEN.encode() not in stored
    # The planted texts did reach allowlisted fields: they arrive redacted, not dropped.
    with RuntimeRegistry(state) as registry:
        [registration] = registry.projects()
        with registry.open_store(registration, environ={}) as store:
            rows = [row for run in report["run_ids"] for row in store.outbox_for_run(run)]
    bodies = b"".join(row.sync_event for row in rows)
    assert b"[REDACTED:env]" in bodies
    assert b"[REDACTED:github_token]" in bodies
    assert any(b'"label-[REDACTED:env]"' in row.sync_event for row in rows)


def test_a_planted_text_that_is_no_secret_crosses_in_values_and_keys(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = produce_report(
        capsys, *dirs(tmp_path, "shop"), *counts(1, 4), "--plant", "plainmark", "--batch"
    )
    rows = stored_rows(tmp_path / "state", report["run_ids"][0])
    assert [row.sequence for row in rows] == [1, 2, 3, 4]
    first = parse_sync_event(rows[0].sync_event, rows[0].content_hash)
    assert first.event_type == "run.started"
    assert "label-plainmark" in first.data["labels"]  # type: ignore[operator]
    assert "plainmark" in str(first.data["workflow_name"])


def test_payloads_have_about_the_requested_size(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = produce_report(capsys, *dirs(tmp_path, "p"), *counts(1, 5), "--payload-bytes", "4000")
    with only_store(tmp_path / "state") as store:
        sizes = [len(e.payload) for e in store.events(report["run_ids"][0])]
    assert all(3600 <= size <= 4400 for size in sizes), sizes


def test_the_summary_line_names_counts_and_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    identity = ["--runtime-id", "rt-cli-1", "--hub-project", "acme"]
    result = produce(capsys, *dirs(tmp_path, "shop"), *identity, *counts(2, 3))
    assert result.code == 0, result.err
    line = result.out.strip()
    assert line.startswith("produced 6 events in 2 runs for project shop-")
    assert "hub project acme" in line and "runtime rt-cli-1" in line
    assert "6 pending" in line


def test_options_read_their_environment_variables(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = produce(
        capsys,
        "--json",
        "--create",  # a flag that chooses what one call does: no variable
        env={
            "HUBSYNC_STATE_DIR": str(tmp_path / "state"),
            "HUBSYNC_PROJECT_ROOT": str(tmp_path / "shop"),
            "HUBSYNC_RUNS": "2",
            "HUBSYNC_EVENTS_PER_RUN": "2",
        },
    )
    assert result.code == 0, result.err
    assert json.loads(result.out)["events"] == 4


def test_bad_arguments_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = dirs(tmp_path, "p")
    zero_runs = produce(capsys, *base, *counts(0, 1))
    assert zero_runs.code == 2
    assert "--runs" in zero_runs.err
    missing = produce(capsys, *base, "--runs", "1")
    assert missing.code == 2
    assert "--events-per-run" in missing.err


def test_another_runtime_id_for_an_existing_state_dir_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    base = dirs(tmp_path, "p")
    assert produce(capsys, *base, *counts(1, 1)).code == 0
    refused = produce(capsys, *base, "--runtime-id", "rt-other", *counts(1, 1))
    assert refused.code == 2
    assert "belongs to runtime" in refused.err
    assert "Traceback" not in refused.err
