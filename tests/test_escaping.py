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

from hubsync import keys
from hubsync.entries import KIND_OUTCOMES
from hubsync.logs import JsonFormatter, TextFormatter
from hubsync.processes import run_hubsync
from hubsync.redis_values import printable
from tests.helpers.operator_support import HUB_PROJECT, LivePipeline

FORGED_LINE = "2030-01-01 00:00:00,000 INFO producers.relay: all clear"
HOSTILE = f"box\x1b[2J\x1b]0;owned\x07\n{FORGED_LINE}\r\u202eevil"


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    live = LivePipeline(tmp_path, redis_url)
    yield live
    live.close()


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


def test_status_shows_a_forged_hosts_control_bytes_escaped(pipeline: LivePipeline) -> None:
    pipeline.append("run-a", 1)
    pipeline.relay_once()  # a genuine beat, to copy
    beats = [
        fields
        for _, fields in pipeline.client.xrange(pipeline.events)
        if fields.get(b"kind") == b"presence"
    ]
    forged = dict(beats[-1]) | {b"host": HOSTILE.encode(), b"heartbeat": b"\x1b[31mnow"}
    pipeline.client.xadd(pipeline.events, forged)  # type: ignore[arg-type]
    wide = {"COLUMNS": "400"}  # rich folds cells at the width it is given
    result = run_hubsync(["status", "--redis-url", pipeline.redis_url], env=wide, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"box\\x1b[2J\\x1b]0;owned\\x07\\x0a{FORGED_LINE}" in result.stdout
    assert "\\x1b[31mnow" in result.stdout
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


def test_a_forged_acks_project_id_cannot_forge_a_line_of_the_relay_log(
    pipeline: LivePipeline,
) -> None:
    pipeline.append("run-a", 1)
    pipeline.relay_once()
    forged = [[HOSTILE, "run-a", 1, "accepted", "c" * 64, None, None]]
    pipeline.client.xadd(
        keys.acks_stream(HUB_PROJECT, pipeline.runtime_id),
        {"kind": KIND_OUTCOMES, "hub_project": HUB_PROJECT, "outcomes": json.dumps(forged)},
    )
    pipeline.registry.close()  # the relay process opens the registry itself
    result = run_hubsync(
        ["relay", "--state-dir", str(pipeline.state_dir), "--once"],
        env={"HUBSYNC_REDIS_URL": pipeline.redis_url},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    [warning] = [line for line in result.stderr.splitlines() if "security:" in line]
    assert "box\\x1b[2J" in warning and "\\x0a" + FORGED_LINE in warning
    assert_nothing_raw(result.stderr)


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
