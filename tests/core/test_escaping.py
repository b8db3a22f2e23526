"""What came off Redis is printed escaped: ``status``, ``alerts list``, ``dead list`` and the logs.

Anyone with write access to Redis chooses the bytes of a presence beat's host,
an alert's key or an ack's project id. Each test plants ESC and newline bytes
there on a private redis-server and runs the real command or daemon as its own
process: no raw control byte reaches the output, and no forged line appears.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from hubsync.core import keys
from hubsync.core.entries import KIND_OUTCOMES
from hubsync.core.logs import JsonFormatter, TextFormatter
from hubsync.core.redis_values import printable
from hubsync.core.signing import SIGNATURE_FIELD
from hubsync.processes import run_hubsync
from tests.helpers.operator_support import FORGED_LINE, HOSTILE, HUB_PROJECT, LivePipeline
from tests.helpers.relay_player import send_fields
from tests.helpers.trust import signed_outcomes, signed_presence


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    with LivePipeline(tmp_path, redis_url) as live:
        yield live


def assert_nothing_raw(text: str) -> None:
    """No control byte in ``text`` but line ends, and no line forged by the planted newline."""
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert "\u202e" not in text
    assert not any(line.startswith(FORGED_LINE) for line in text.splitlines())


def test_printable_escapes_control_characters_and_keeps_the_rest() -> None:
    assert printable(HOSTILE.encode()) == (
        "box\\x1b[2J\\x1b]0;owned\\x07\\x0a" + FORGED_LINE + "\\x0d\\u202eevil"
    )
    assert printable("hôte-ü 漢字 [red]x[/red]") == "hôte-ü 漢字 [red]x[/red]"
    assert printable(b"\xff\x85") == "\ufffd\ufffd"  # invalid UTF-8 never raises


def test_status_shows_a_hostile_hosts_control_bytes_escaped(pipeline: LivePipeline) -> None:
    pipeline.append("run-a", 1)
    pipeline.relay_once()  # a genuine beat, to copy
    beats = [
        fields
        for _, fields in pipeline.client.xrange(pipeline.events)
        if fields.get(b"kind") == b"presence"
    ]
    # signed with the runtime's key (a runtime whose host name is hostile): the hub keeps it
    hostile = {
        name.decode(): value
        for name, value in beats[-1].items()
        if name.decode() != SIGNATURE_FIELD
    } | {"host": HOSTILE.encode(), "heartbeat": b"\x1b[31mnow"}
    pipeline.client.xadd(pipeline.events, signed_presence(hostile))  # type: ignore[arg-type]
    wide = {"COLUMNS": "400"}  # rich folds cells at the width it is given
    result = run_hubsync(["status", "--redis-url", pipeline.redis_url], env=wide, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"box\\x1b[2J\\x1b]0;owned\\x07\\x0a{FORGED_LINE}" in result.stdout
    assert "\\x1b[31mnow" in result.stdout
    assert_nothing_raw(result.stdout)

    assert pipeline.consume_once().stats.presence == 2  # authenticated: recorded on the hub
    argv = ["status", "--redis-url", pipeline.redis_url, "--hub-db", str(pipeline.hub_db)]
    result = run_hubsync(argv, env=wide, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"box\\x1b[2J\\x1b]0;owned\\x07\\x0a{FORGED_LINE}" in result.stdout
    assert_nothing_raw(result.stdout)


def test_alerts_list_shows_a_forged_alerts_fields_escaped(pipeline: LivePipeline) -> None:
    pipeline.relay_once()  # the project exists
    pipeline.client.xadd(
        keys.alerts_stream(HUB_PROJECT),
        {
            "reason": "sequence_reused",
            "project_id": HOSTILE,
            "run_id": "run\x1b[8m",
            "sequence": "1",
            "runtime_id": "rt\n" + FORGED_LINE,
            "existing_hash": "a" * 64,
            "offered_hash": "b" * 64,
            "detected_at": "now\x1b[0m",
        },
    )
    result = run_hubsync(["alerts", "list", "--redis-url", pipeline.redis_url], timeout=60)
    assert result.returncode == 0, result.stderr
    [line] = [line for line in result.stdout.splitlines() if "sequence_reused" in line]
    assert "box\\x1b[2J" in line and "run\\x1b[8m" in line
    assert_nothing_raw(result.stdout)


def test_alerts_list_shows_what_a_refused_entry_claimed_escaped(pipeline: LivePipeline) -> None:
    pipeline.relay_once()  # the project exists
    unsigned = {
        "kind": "event",
        "project_id": HOSTILE,
        "hub_project": HUB_PROJECT,
        "run_id": "run\x1b[8m",
        "sequence": "1",
        "event_type": "step.completed",
        "runtime_id": pipeline.runtime_id,
        "content_hash": "0" * 64,
        "event": b"{}",
    }
    send_fields(pipeline.client, HUB_PROJECT, unsigned, pipeline.runtime_id)
    assert pipeline.consume_once().stats.refused == 1
    argv = ["alerts", "list", "--redis-url", pipeline.redis_url, "--hub-db", str(pipeline.hub_db)]
    result = run_hubsync(argv, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if "unauthenticated" in line]
    assert lines, result.stdout
    for line in lines:
        assert "box\\x1b[2J" in line and "run\\x1b[8m" in line
    assert_nothing_raw(result.stdout)


def run_relay_once(pipeline: LivePipeline) -> str:
    """``hubsync relay --once`` of the pipeline's runtime as its own process: its stderr."""
    pipeline.registry.close()  # the relay process opens the registry itself
    result = run_hubsync(
        ["relay", "--state-dir", str(pipeline.state_dir), "--once"],
        env={"HUBSYNC_REDIS_URL": pipeline.redis_url},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_a_forged_ack_is_ignored_and_its_project_id_never_reaches_the_relay_log(
    pipeline: LivePipeline,
) -> None:
    pipeline.append("run-a", 1)
    pipeline.relay_once()
    forged = [[HOSTILE, "run-a", 1, "accepted", "c" * 64, None, None]]
    pipeline.client.xadd(
        keys.acks_stream(HUB_PROJECT, pipeline.runtime_id),
        {"kind": KIND_OUTCOMES, "hub_project": HUB_PROJECT, "outcomes": json.dumps(forged)},
    )
    stderr = run_relay_once(pipeline)
    [warning] = [line for line in stderr.splitlines() if "security:" in line]
    assert "ignored outcomes entry" in warning and "(unsigned)" in warning
    assert "owned" not in stderr  # nothing the forger wrote is logged, escaped or not
    assert_nothing_raw(stderr)


def test_a_hostile_project_id_in_a_signed_ack_is_logged_escaped(pipeline: LivePipeline) -> None:
    pipeline.append("run-a", 1)
    pipeline.relay_once()
    hostile = [[HOSTILE, "run-a", 1, "accepted", "c" * 64, None, None]]
    fields = {"kind": KIND_OUTCOMES, "hub_project": HUB_PROJECT, "outcomes": json.dumps(hostile)}
    # signed as the runtime's hub signs: what a hub (or a holder of the key) could send
    pipeline.client.xadd(
        keys.acks_stream(HUB_PROJECT, pipeline.runtime_id),
        signed_outcomes(pipeline.runtime_id, fields),
    )
    stderr = run_relay_once(pipeline)
    [warning] = [line for line in stderr.splitlines() if "security:" in line]
    assert "box\\x1b[2J" in warning and "\\x0a" + FORGED_LINE in warning
    assert_nothing_raw(stderr)


def _record(message: str, *args: object) -> logging.LogRecord:
    return logging.makeLogRecord({"msg": message, "args": args, "levelname": "WARNING"})


def test_the_text_log_format_escapes_the_line_but_keeps_a_traceback_on_its_lines() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = _record("project %s", HOSTILE)
        record.exc_info = sys.exc_info()
    text = TextFormatter().format(record)
    first, *rest = text.splitlines()
    assert "project box\\x1b[2J" in first
    assert rest[0] == "Traceback (most recent call last):"
    assert_nothing_raw(text)


def test_the_json_log_format_escapes_what_json_leaves_raw_and_keeps_the_meaning() -> None:
    line = JsonFormatter().format(_record("project %s \x85 \u2028", HOSTILE))
    assert "\n" not in line and "\x85" not in line and "\u2028" not in line
    assert_nothing_raw(line)
    assert json.loads(line)["message"] == f"project {HOSTILE} \x85 \u2028"
