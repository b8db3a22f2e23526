"""``hubsync dead list|replay|purge`` and ``hubsync alerts list`` on a live pipeline."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from consumers.views.dead_letters import DeadLetters
from hubsync.core import keys
from hubsync.core.redis_values import redis_now_ms
from hubsync.demo.embedded_redis import free_port
from hubsync.processes import run_hubsync
from tests.helpers.operator_support import (
    HUB_PROJECT,
    NOT_A_DATABASE,
    LivePipeline,
    error_lines,
    run_cli,
)
from tests.helpers.support import wait_until

DEAD = keys.dead_stream(HUB_PROJECT)


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    with LivePipeline(tmp_path, redis_url) as live:
        yield live


def dead(capsys: pytest.CaptureFixture[str], p: LivePipeline, *argv: str) -> tuple[int, str, str]:
    return run_cli(
        capsys, "dead", argv[0], "--hub-project", HUB_PROJECT, "--redis-url", p.redis_url, *argv[1:]
    )


def dead_json(capsys: pytest.CaptureFixture[str], p: LivePipeline, *argv: str) -> dict[str, Any]:
    """``hubsync dead ARGV --json``, which must succeed: its document."""
    code, out, err = dead(capsys, p, *argv, "--json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def listed(capsys: pytest.CaptureFixture[str], p: LivePipeline) -> list[dict[str, Any]]:
    letters: list[dict[str, Any]] = dead_json(capsys, p, "list")["dead_letters"]
    return letters


def garbage_letters(
    capsys: pytest.CaptureFixture[str], p: LivePipeline, count: int = 1
) -> list[str]:
    """``count`` entries that are no events, consumed and so dead-lettered: the ids listed."""
    for _ in range(count):
        p.inject_garbage()
    p.consume_once()
    return [x["id"] for x in listed(capsys, p)]


def whole_and_truncated(capsys: pytest.CaptureFixture[str], p: LivePipeline) -> tuple[str, str]:
    """Two dead letters: one replayable (``max_deliveries``), one cut short: their ids."""
    whole = kill_by_deliveries(p)
    p.inject_garbage(big=True)
    p.consume_once()
    [cut] = [x["id"] for x in listed(capsys, p) if not x["replayable"]]
    return whole, cut


def kill_by_deliveries(p: LivePipeline) -> str:
    """One relayed event delivered five times to crashing consumers, then dead-lettered by a
    hub worker for ``max_deliveries``: the kind of letter an operator replays after a fix."""
    p.append("run-x", 1)
    p.relay_once()
    p.client.xgroup_create(p.events, keys.CONSUMER_GROUP, id="0", mkstream=True)
    reply: Any = p.client.xreadgroup(keys.CONSUMER_GROUP, "crashy", {p.events: ">"}, count=10)
    ids = [entry_id for entry_id, fields in reply[0][1] if fields[b"kind"] == b"event"]
    others = [entry_id for entry_id, fields in reply[0][1] if fields[b"kind"] != b"event"]
    p.client.xack(p.events, keys.CONSUMER_GROUP, *others)  # the presence beat is not the point
    for _ in range(4):
        p.client.xclaim(p.events, keys.CONSUMER_GROUP, "crashy", 0, ids)
    wait_until(
        lambda: p.client.xpending_range(p.events, keys.CONSUMER_GROUP, "-", "+", 10, idle=100),
        what="entries idle",
    )
    p.consume_once(reclaim_idle=0.1, max_deliveries=5)
    [letter] = [x for x in listed_fields(p.client) if x["reason"] == "max_deliveries"]
    return str(letter["id"])


def listed_fields(client: redis.Redis) -> list[dict[str, Any]]:
    reply: Any = client.xrange(DEAD)
    return [
        {"id": entry_id.decode(), "reason": fields[b"reason"].decode()}
        for entry_id, fields in reply
    ]


def test_list_shows_reason_detail_source_and_key_without_event_bytes(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    source = pipeline.inject_garbage()
    pipeline.consume_once()
    [letter] = listed(capsys, pipeline)
    assert letter["reason"] == "bad_json"
    assert "not valid JSON" in letter["detail"]
    assert letter["source_id"] == source and letter["replayable"] is True
    assert letter["fields"]["kind"] == 5 and letter["fields"]["event"] == 12
    assert letter["fields"]["sig"] == 64
    assert "not an event" not in json.dumps(letter)
    code, out, _ = dead(capsys, pipeline, "list")
    assert code == 0 and letter["id"] in out and "bad_json" in out


def test_replay_after_the_cause_is_fixed_gets_the_event_ingested_and_acked(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    letter_id = kill_by_deliveries(pipeline)
    assert pipeline.hub.count_events() == 0
    result = dead_json(capsys, pipeline, "replay", letter_id)
    assert [r["id"] for r in result["replayed"]] == [letter_id] and result["skipped"] == []
    assert pipeline.client.xlen(DEAD) == 0
    pipeline.consume_once()
    assert pipeline.hub.count_events(run_id="run-x") == 1
    pipeline.relay_once()
    assert pipeline.store.outbox_counts()["acked"] == 1


def test_replay_all_puts_back_whole_letters_and_skips_truncated_ones(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    whole, cut = whole_and_truncated(capsys, pipeline)
    result = dead_json(capsys, pipeline, "replay", "--all")
    assert [r["id"] for r in result["replayed"]] == [whole]
    assert result["skipped"] == [{"id": cut, "why": "truncated"}]
    assert [x["id"] for x in listed(capsys, pipeline)] == [cut]


def test_replay_of_a_truncated_letter_is_refused_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    whole, cut = whole_and_truncated(capsys, pipeline)
    before_events = pipeline.client.xlen(pipeline.events)
    code, out, err = dead(capsys, pipeline, "replay", whole, cut)
    assert code == 1 and out == ""
    assert len(error_lines(err)) == 1 and "truncated" in err and cut in err
    assert pipeline.client.xlen(DEAD) == 2
    assert pipeline.client.xlen(pipeline.events) == before_events


def test_replay_with_reason_replays_only_that_reason(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    kill_by_deliveries(pipeline)
    pipeline.inject_garbage()
    pipeline.consume_once()
    code, out, _ = dead(capsys, pipeline, "replay", "--all", "--reason", "bad_json", "--json")
    assert code == 0
    assert len(json.loads(out)["replayed"]) == 1
    assert [x["reason"] for x in listed(capsys, pipeline)] == ["max_deliveries"]


def test_a_letter_is_replayed_at_most_once(pipeline: LivePipeline) -> None:
    letter_id = kill_by_deliveries(pipeline)
    letters = DeadLetters(pipeline.client, HUB_PROJECT)
    before = pipeline.client.xlen(pipeline.events)
    first = letters.replay_all()
    second = letters.replay_all()
    assert [dead_id for dead_id, _ in first.replayed] == [letter_id]
    assert second.replayed == [] and second.skipped == []
    assert pipeline.client.xlen(pipeline.events) == before + 1


def test_purge_by_id_all_and_older_than(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    first, *_ = garbage_letters(capsys, pipeline, 3)
    assert dead_json(capsys, pipeline, "purge", first) == {"hub_project": HUB_PROJECT, "purged": 1}
    assert dead_json(capsys, pipeline, "purge", "--older-than", "1h")["purged"] == 0
    assert pipeline.client.xlen(DEAD) == 2
    code, out, _ = dead(capsys, pipeline, "purge", "--all")
    assert code == 0 and "purged 2" in out
    assert pipeline.client.xlen(DEAD) == 0


def test_purge_older_than_removes_only_older_letters(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    [old] = garbage_letters(capsys, pipeline)
    # The dead stream's ids carry Redis's clock: wait until the letter is measurably older
    # than the cut-off, which the letter added next is measurably younger than.
    old_ms = int(old.split("-")[0])
    wait_until(lambda: redis_now_ms(pipeline.client) > old_ms + 800, what="0.8s pass")
    pipeline.inject_garbage()
    pipeline.consume_once()
    assert dead_json(capsys, pipeline, "purge", "--older-than", "0.4s")["purged"] == 1
    assert old not in [x["id"] for x in listed(capsys, pipeline)]
    assert len(listed(capsys, pipeline)) == 1


def test_purge_of_a_missing_id_deletes_nothing(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    [present] = garbage_letters(capsys, pipeline)
    code, _, err = dead(capsys, pipeline, "purge", present, "1-0")
    assert code == 1 and "1-0" in err and len(error_lines(err)) == 1
    assert pipeline.client.xlen(DEAD) == 1


def test_alerts_list_shows_an_injected_conflict_from_the_stream_and_the_hub_db(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    pipeline.append("run-a", 2)
    pipeline.relay_once()
    pipeline.consume_once()
    pipeline.inject_conflict(run_id="run-a", sequence=1)
    pipeline.consume_once()
    code, out, err = run_cli(
        capsys,
        "alerts",
        "list",
        "--redis-url",
        pipeline.redis_url,
        "--hub-db",
        str(pipeline.hub_db),
        "--json",
    )
    assert code == 0, err
    doc = json.loads(out)
    [streamed] = doc["stream"]
    assert streamed["reason"] == "sequence_reused"
    assert (streamed["project_id"], streamed["run_id"], streamed["sequence"]) == (
        pipeline.registration.project_id,
        "run-a",
        1,
    )
    assert streamed["existing_hash"] != streamed["offered_hash"]
    [recorded] = doc["hub_db"]
    assert recorded["reason"] == "sequence_reused"
    assert recorded["offered_hash"] == streamed["offered_hash"]
    code, out, _ = run_cli(
        capsys, "alerts", "list", "--hub-project", HUB_PROJECT, "--redis-url", pipeline.redis_url
    )
    assert code == 0 and "sequence_reused" in out and "run-a" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["dead", "list"],
        ["dead", "list", "--hub-project", "bad{name}"],
        ["dead", "list", "--hub-project", "never-seen"],
        ["dead", "list", "--hub-project", HUB_PROJECT, "--count", "0"],
        ["dead", "replay", "--hub-project", HUB_PROJECT],
        ["dead", "replay", "--hub-project", HUB_PROJECT, "not-an-id"],
        ["dead", "replay", "--hub-project", HUB_PROJECT, "1-0", "--all"],
        ["dead", "replay", "--hub-project", HUB_PROJECT, "1-0", "--reason", "bad_json"],
        ["dead", "purge", "--hub-project", HUB_PROJECT],
        ["dead", "purge", "--hub-project", HUB_PROJECT, "--older-than", "3 fortnights"],
        ["dead", "purge", "--hub-project", HUB_PROJECT, "--all", "--older-than", "1h"],
        ["dead", "purge", "--hub-project", HUB_PROJECT, "12345"],
        ["alerts", "list", "--hub-project", "bad{name}"],
        ["alerts", "list", "--hub-project", "never-seen"],
        ["alerts", "list", "--count", "-1"],
        ["alerts", "list", "--hub-db", "/nonexistent/hub.db"],
        ["alerts", "list", "--hub-db", NOT_A_DATABASE],
    ],
)
def test_malformed_dead_and_alerts_input_exits_2_with_one_error_line(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline, argv: list[str]
) -> None:
    pipeline.relay_once()  # the project exists in Redis
    code, out, err = run_cli(capsys, *argv, "--redis-url", pipeline.redis_url)
    assert code == 2, err
    assert out == ""
    assert len(error_lines(err)) == 1, err
    assert "Traceback" not in err


def hubsync_process(p: LivePipeline, *argv: str) -> subprocess.CompletedProcess[str]:
    """``hubsync dead ARGV`` as its own process: exit code and output as an operator sees them."""
    options = ["--hub-project", HUB_PROJECT, "--redis-url", p.redis_url]
    return run_hubsync(["dead", argv[0], *options, *argv[1:]], timeout=60)


def test_letters_with_odd_field_name_bytes_list_and_replay(pipeline: LivePipeline) -> None:
    # '²' is a digit to str.isdigit() but not to int(); ',' and ':' separate the names
    # in a letter's `truncated` field; b"\xff" is not UTF-8 at all.
    big = b"x" * 5000
    cut = {b"kind": b"event", "a:²,b".encode(): big, b"\xff:\xb2,": big}
    whole = {b"kind": b"event", "x:²,y:³".encode(): b"\x00\xff:\xb2"}
    # `whole` dies of deliveries (kept whole, replayable); `cut` is refused unauthenticated
    # (a forgery, cut to a preview)
    client = pipeline.client
    client.xadd(pipeline.events, whole)  # type: ignore[arg-type]
    client.xgroup_create(pipeline.events, keys.CONSUMER_GROUP, id="0")
    reply: Any = client.xreadgroup(keys.CONSUMER_GROUP, "crashy", {pipeline.events: ">"})
    ids = [entry_id for entry_id, _ in reply[0][1]]
    for _ in range(4):
        client.xclaim(pipeline.events, keys.CONSUMER_GROUP, "crashy", 0, ids)
    wait_until(
        lambda: client.xpending_range(pipeline.events, keys.CONSUMER_GROUP, "-", "+", 10, idle=100),
        what="entries idle",
    )
    client.xadd(pipeline.events, cut)  # type: ignore[arg-type]
    pipeline.consume_once(reclaim_idle=0.1, max_deliveries=5)
    assert client.xlen(DEAD) == 2

    shown = {argv: hubsync_process(pipeline, *argv) for argv in (("list",), ("list", "--json"))}
    for listing in shown.values():
        assert listing.returncode == 0 and "Traceback" not in listing.stderr, listing.stderr
    letters = {x["reason"]: x for x in json.loads(shown[("list", "--json")].stdout)["dead_letters"]}
    assert letters["unauthenticated"]["replayable"] is False
    assert letters["max_deliveries"]["replayable"] is True
    # a name that is not UTF-8 was recorded with U+FFFD when it was dead-lettered
    assert letters["unauthenticated"]["truncated"] == {"a:²,b": 5000, "\ufffd:\ufffd,": 5000}

    replayed = hubsync_process(pipeline, "replay", "--all", "--json")
    assert replayed.returncode == 0 and "Traceback" not in replayed.stderr, replayed.stderr
    result = json.loads(replayed.stdout)
    assert [r["id"] for r in result["replayed"]] == [letters["max_deliveries"]["id"]]
    assert result["skipped"] == [{"id": letters["unauthenticated"]["id"], "why": "truncated"}]
    reply = client.xrange(pipeline.events, result["replayed"][0]["new_id"], "+")
    assert reply[0][1] == whole  # the very bytes, names and values, are back


def test_a_forged_letter_is_never_replayed(
    capsys: pytest.CaptureFixture[str], pipeline: LivePipeline
) -> None:
    pipeline.relay_once()  # the project exists
    unsigned = {b"kind": b"event", b"run_id": b"run-f", b"event": b"{}"}
    pipeline.client.xadd(pipeline.events, unsigned)  # type: ignore[arg-type]
    pipeline.consume_once()
    [letter] = listed(capsys, pipeline)
    assert (letter["reason"], letter["replayable"]) == ("unauthenticated", False)
    before = pipeline.client.xlen(pipeline.events)
    code, out, err = dead(capsys, pipeline, "replay", letter["id"])
    assert code == 1 and out == ""
    assert len(error_lines(err)) == 1 and "did not authenticate" in err
    result = dead_json(capsys, pipeline, "replay", "--all")
    assert result["replayed"] == [] and result["skipped"] == [{"id": letter["id"], "why": "forged"}]
    assert pipeline.client.xlen(pipeline.events) == before and pipeline.client.xlen(DEAD) == 1


@pytest.mark.parametrize(
    "argv",
    [["dead", "list", "--hub-project", HUB_PROJECT], ["alerts", "list"]],
)
def test_unreachable_redis_exits_3_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run_cli(capsys, *argv, "--redis-url", f"redis://127.0.0.1:{free_port()}/0")
    assert code == 3 and out == ""
    assert len(err.strip().splitlines()) == 1 and "cannot reach Redis" in err
