"""``hubsync produce``: synthetic events through the real append path, redaction from outside."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hubsync.processes import run_hubsync
from hubsync.wire import parse_sync_event
from producers.outbox import OutboxEntry
from producers.registry import RuntimeRegistry

ENV_SECRET = "sk-live-4f9a8b7c6d5e4f3a"
GITHUB_TOKEN = "ghp_" + "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7"  # 36 after the prefix


def produce(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_hubsync(["produce", *args], env=env)


def stored_rows(state: Path, run_id: str) -> list[OutboxEntry]:
    with RuntimeRegistry(state) as registry:
        store = registry.open_store(registry.projects()[0], environ={})
    with store:
        return store.outbox_for_run(run_id)


def all_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def test_planted_env_api_key_and_github_token_never_reach_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = produce(
        "--state-dir",
        str(state),
        "--project-root",
        str(tmp_path / "shop"),
        "--runs",
        "3",
        "--events-per-run",
        "12",
        "--plant",
        ENV_SECRET,
        "--plant",
        GITHUB_TOKEN,
        "--json",
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


def test_a_planted_text_that_is_no_secret_crosses_in_values_and_keys(tmp_path: Path) -> None:
    result = produce(
        "--state-dir",
        str(tmp_path / "state"),
        "--project-root",
        str(tmp_path / "shop"),
        "--runs",
        "1",
        "--events-per-run",
        "4",
        "--plant",
        "plainmark",
        "--batch",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = stored_rows(tmp_path / "state", report["run_ids"][0])
    assert [row.sequence for row in rows] == [1, 2, 3, 4]
    first = parse_sync_event(rows[0].sync_event, rows[0].content_hash)
    assert first.event_type == "run.started"
    assert "label-plainmark" in first.data["labels"]  # type: ignore[operator]
    assert "plainmark" in str(first.data["workflow_name"])


def test_payloads_have_about_the_requested_size(tmp_path: Path) -> None:
    result = produce(
        "--state-dir",
        str(tmp_path / "state"),
        "--project-root",
        str(tmp_path / "p"),
        "--runs",
        "1",
        "--events-per-run",
        "5",
        "--payload-bytes",
        "4000",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    with RuntimeRegistry(tmp_path / "state") as registry:
        store = registry.open_store(registry.projects()[0], environ={})
    with store:
        sizes = [len(e.payload) for e in store.events(report["run_ids"][0])]
    assert all(3600 <= size <= 4400 for size in sizes), sizes


def test_the_summary_line_names_counts_and_ids(tmp_path: Path) -> None:
    result = produce(
        "--state-dir",
        str(tmp_path / "state"),
        "--project-root",
        str(tmp_path / "shop"),
        "--runtime-id",
        "rt-cli-1",
        "--hub-project",
        "acme",
        "--runs",
        "2",
        "--events-per-run",
        "3",
    )
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert line.startswith("produced 6 events in 2 runs for project shop-")
    assert "hub project acme" in line and "runtime rt-cli-1" in line
    assert "6 pending" in line


def test_options_read_their_environment_variables(tmp_path: Path) -> None:
    result = produce(
        "--json",
        env={
            "HUBSYNC_STATE_DIR": str(tmp_path / "state"),
            "HUBSYNC_PROJECT_ROOT": str(tmp_path / "shop"),
            "HUBSYNC_RUNS": "2",
            "HUBSYNC_EVENTS_PER_RUN": "2",
        },
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["events"] == 4


def test_bad_arguments_are_usage_errors(tmp_path: Path) -> None:
    base = ["--state-dir", str(tmp_path / "s"), "--project-root", str(tmp_path / "p")]
    zero_runs = produce(*base, "--runs", "0", "--events-per-run", "1")
    assert zero_runs.returncode == 2
    assert "--runs" in zero_runs.stderr
    missing = produce(*base, "--runs", "1")
    assert missing.returncode == 2
    assert "--events-per-run" in missing.stderr


def test_another_runtime_id_for_an_existing_state_dir_is_a_usage_error(tmp_path: Path) -> None:
    base = ["--state-dir", str(tmp_path / "s"), "--project-root", str(tmp_path / "p")]
    assert produce(*base, "--runs", "1", "--events-per-run", "1").returncode == 0
    refused = produce(*base, "--runtime-id", "rt-other", "--runs", "1", "--events-per-run", "1")
    assert refused.returncode == 2
    assert "belongs to runtime" in refused.stderr
    assert "Traceback" not in refused.stderr
