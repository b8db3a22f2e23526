"""``hubsync resync`` and ``hubsync hub restore`` as an operator runs them: a rewind resent
and answered duplicate, its progress in ``status``; bad input one line, nothing asked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hubsync.core import keys
from hubsync.core.clock import utc_now_iso
from hubsync.core.resync import ResyncReport
from hubsync.core.signing import RuntimeKey
from tests.helpers.operator_support import HUB_PROJECT, LivePipeline, error_lines, run_cli
from tests.helpers.trust import key_of


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    with LivePipeline(tmp_path, redis_url) as live:
        live.append("run-a", 3)
        live.relay_once()
        live.consume_once()
        live.relay_once()  # acked
        yield live


def test_a_rewind_since_a_time_resends_the_rows_and_the_hub_answers_duplicate(
    pipeline: LivePipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    hub = ("--hub-db", str(pipeline.hub_db), "--redis-url", pipeline.redis_url)
    asked = run_cli(capsys, "resync", *hub, "--runtime", pipeline.runtime_id, "--since", "1h",
                    "--run", "run-a", "--json")  # fmt: skip
    assert asked.code == 0, asked.err
    document = json.loads(asked.out)
    assert document["scope"] == {"project_id": None, "run_id": "run-a"}
    [request] = document["requests"]
    assert request["hub_project"] == HUB_PROJECT and document["done"] is None

    pipeline.relay_once()  # reads the request, puts the three rows back, resends them
    pipeline.consume_once()
    pipeline.relay_once()  # the duplicates ack them; the relay reports done
    pipeline.consume_once()
    assert pipeline.hub_rows("sync_events") == 3
    status = run_cli(capsys, "status", *hub, "--json")
    [shown] = json.loads(status.out)["resyncs"]
    assert shown["group_id"] == document["group_id"] and shown["finished"] is True
    assert (shown["runtimes_asked"], shown["events_reaccepted"], shown["duplicates"]) == (1, 0, 3)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--runtime", "rt-nobody"), "--runtime: rt-nobody is not an active runtime"),
        (("--since", "yesterday"), "--since"),
        (("--hub-project", "elsewhere"), "is not enrolled for elsewhere"),
    ],
)
def test_a_bad_rewind_is_one_line_exit_2_and_asks_nothing(
    pipeline: LivePipeline,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    said: str,
) -> None:
    hub = ("--hub-db", str(pipeline.hub_db), "--redis-url", pipeline.redis_url)
    runtime = () if "--runtime" in argv else ("--runtime", pipeline.runtime_id)
    refused = run_cli(capsys, "resync", *hub, *runtime, *argv)
    assert refused.code == 2
    [line] = error_lines(refused.err)
    assert said in line
    acks = pipeline.client.xrange(keys.acks_stream(HUB_PROJECT, pipeline.runtime_id))
    assert [f for _, f in acks if f.get(b"kind") == b"resync"] == []
    assert pipeline.hub.resyncs() == []


def test_hub_restore_needs_the_redis_of_the_namespace(
    pipeline: LivePipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = run_cli(capsys, "hub", "restore", "--hub-db", str(pipeline.hub_db))
    assert refused.code == 2 and "--redis-url" in refused.err
    assert pipeline.hub.resyncs() == []


def test_only_a_report_the_asked_runtime_signed_counts(
    pipeline: LivePipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    hub = ("--hub-db", str(pipeline.hub_db), "--redis-url", pipeline.redis_url)
    asked = run_cli(capsys, "resync", *hub, "--runtime", pipeline.runtime_id, "--json")
    [request] = json.loads(asked.out)["requests"]
    report = ResyncReport(pipeline.runtime_id, HUB_PROJECT, request["request_id"], 3, 0, 3, 0,
                          0, 0, utc_now_iso())  # fmt: skip
    key = key_of(pipeline.runtime_id)
    assert key is not None
    forged = report.signed_fields(RuntimeKey.generate())
    unsigned = {k: v for k, v in report.signed_fields(key).items() if k != "sig"}
    for fields in (forged, unsigned):
        pipeline.client.xadd(pipeline.events, fields)  # type: ignore[arg-type]
    worker = pipeline.consume_once()
    assert worker.stats.dead == 2
    [kept] = pipeline.hub.resyncs()
    assert kept.pending is None and not kept.done  # nothing believed

    pipeline.client.xadd(pipeline.events, report.signed_fields(key))  # type: ignore[arg-type]
    pipeline.consume_once()
    [kept] = pipeline.hub.resyncs()
    assert kept.done and kept.accepted == 3
