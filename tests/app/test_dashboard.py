"""``hubsync dashboard`` in a real browser, against a live pipeline.

Debian's chromium, driven by Playwright, reads the pages a ``hubsync dashboard``
process serves over a real Redis and hub store (``LivePipeline``: real relay
and consumer code). Each number on the main page is checked against
XINFO/XPENDING/XLEN and the hub database; forged ids planted in Redis show
escaped and run nothing; a replay is clicked through its confirmation; a
dashboard without ``--allow-actions`` refuses every action. Screenshots are
saved beside the test's files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hubstore.leases import LeaseClient
from hubstore.resyncs import ResyncRecord
from hubsync.cli.effects import opened_ledger
from hubsync.core import keys
from producers.effects import review
from producers.effects.kinds import EffectKind
from producers.effects.ledger import EffectsLedger
from producers.effects.records import EffectSpec
from tests.helpers.browser_support import http_status, served_dashboard
from tests.helpers.operator_support import HOSTILE, HUB_PROJECT, LivePipeline, error_lines, run_cli
from tests.helpers.relay_player import send_fields

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

SCRIPT = "<script>window.owned = 1</script>"
ROGUE_CONSUMER = "<img src=x onerror='window.owned = 2'>\u202e"


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str) -> Iterator[LivePipeline]:
    """``LivePipeline.make_busy`` with a forgery refused first, a forged alert, a consumer of
    a hostile name holding one entry, and a lease held."""
    with LivePipeline(tmp_path, redis_url) as live:
        live.relay_once()  # the project exists
        forged = {
            "kind": "event",
            "project_id": HOSTILE,
            "hub_project": HUB_PROJECT,
            "run_id": SCRIPT,
            "sequence": "1",
            "runtime_id": live.runtime_id,
            "content_hash": "0" * 64,
            "event": b"{}",
        }
        send_fields(live.client, HUB_PROJECT, forged, live.runtime_id)  # unsigned: refused
        live.make_busy()
        live.client.xadd(
            keys.alerts_stream(HUB_PROJECT),
            {"reason": "sequence_reused", "project_id": HOSTILE, "run_id": SCRIPT,
             "sequence": "1", "runtime_id": "rt\u202eevil", "existing_hash": "a" * 64,
             "offered_hash": "b" * 64, "detected_at": "now"},
        )  # fmt: skip
        live.client.xreadgroup(keys.CONSUMER_GROUP, ROGUE_CONSUMER, {live.events: ">"}, count=1)
        LeaseClient(live.client).acquire_or_raise("effect:deploy:1", "box-1:1", 600_000)
        yield live


def dashboard_args(p: LivePipeline, *more: str) -> list[str]:
    return ["--redis-url", p.redis_url, "--hub-db", str(p.hub_db), "--refresh", "0.3", *more]


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def field(page: Page, scope: str, name: str) -> str:
    return page.locator(f'{scope} [data-field="{name}"]').inner_text().strip()


def parked_effect(path: Path) -> str:
    """A ledger at ``path`` with one attempt parked blocked_uncertain: its effect key."""
    ledger = EffectsLedger(path)
    try:
        key = ledger.claim(EffectSpec("run-1", "step-1", "a1", EffectKind.GIT_COMMIT, "main"))
        assert isinstance(key, str)
        ledger.park_blocked(key, "a1", "timeout mid-request")
    finally:
        ledger.close()
    return key


def test_the_main_page_agrees_with_redis_and_the_hub_store(
    pipeline: LivePipeline, page: Page, tmp_path: Path
) -> None:
    p, client = pipeline, pipeline.client
    effect = parked_effect(tmp_path / "effects.db")
    restore = ResyncRecord("rq-1", "rs-1", p.runtime_id, HUB_PROJECT, "restore", "{}",
                           "run cursors", 1, "2026-03-01T12:00:00.000000Z")  # fmt: skip
    p.hub.record_resyncs([restore])  # a hub restore asked the runtime to resend
    ledgers = ["--effects-ledger", str(tmp_path / "effects.db")]
    ledgers += ["--effects-ledger", str(tmp_path / "none.db")]
    args = dashboard_args(p, "--amber-after", "0", "--red-after", "1h", *ledgers)
    with served_dashboard(tmp_path, *args) as base:
        reply = page.goto(base + "/")
        assert reply is not None
        policy = reply.headers["content-security-policy"]
        assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy
        card = f'.card[data-project="{HUB_PROJECT}"]'
        [group] = client.xinfo_groups(p.events)
        summary = client.xpending(p.events, keys.CONSUMER_GROUP)
        assert int(field(page, card, "length")) == client.xlen(p.events)
        assert int(field(page, card, "lag")) == group["lag"] > 0
        assert int(field(page, card, "pending")) == summary["pending"] == 3
        assert int(field(page, card, "dead")) == client.xlen(keys.dead_stream(HUB_PROJECT)) == 2
        assert int(field(page, card, "alerts")) == client.xlen(keys.alerts_stream(HUB_PROJECT))
        assert int(field(page, card, "stored")) == p.hub_rows("sync_events") == 6
        assert "amber" in (
            page.locator(f'{card} [data-field="oldest"]').get_attribute("class") or ""
        )

        row = f'[data-runtime="{p.runtime_id}"]'
        [presence] = p.hub.presence(HUB_PROJECT)
        assert field(page, row, "stale") == "no"
        assert int(field(page, row, "backlog")) == presence.beat.backlog
        assert int(field(page, row, "unstored")) == group["lag"] + summary["pending"]
        pending = {
            c["name"].decode(): c["pending"]
            for c in client.xinfo_consumers(p.events, keys.CONSUMER_GROUP)
        }
        ghost = '[data-consumer="ghost"]'
        assert (field(page, ghost, "health"), int(field(page, ghost, "pending"))) == (
            "DEAD",
            pending["ghost"],
        )
        assert "effect:deploy:1" in page.get_by_test_id("leases").inner_text()
        assert page.get_by_test_id("blocked-count").inner_text() == "1"
        assert effect in page.get_by_test_id("blocked").inner_text()
        assert "none.db: no such file" in page.locator("body").inner_text()
        assert not (tmp_path / "none.db").exists()  # a ledger is never created here
        [progress] = p.hub.resyncs()
        assert (
            page.get_by_test_id("resyncs").inner_text()
            == (
                "resync rs-1 (restore, asked 2026-03-01T12:00:00.000000Z): 0 of 1 runtimes done, "
                "0 events re-accepted, 0 already held, 0 rows pending, 1 requests not reported yet"
            )
            and not progress.done
        )

        # security alerts come first, and every forged value shows escaped and runs nothing
        assert page.locator("h2").first.inner_text() == "Security alerts"
        body = page.locator("body").inner_text()
        assert SCRIPT in body and "box\\x1b[2J" in body and "rt\\u202eevil" in body
        assert "<img src=x onerror='window.owned = 2'>\\u202e" in body
        assert "\u202e" not in body and "\x1b" not in body
        assert page.evaluate("window.owned") is None
        assert page.get_by_test_id("mode").inner_text() == "read-only"

        # the page polls /live (its script allowed by the page's policy): the snapshot moves on
        first = page.get_by_test_id("generated").inner_text()
        page.wait_for_function(
            "first => document.querySelector('[data-testid=generated]').innerText !== first",
            arg=first,
        )
        # and the dashboard samples: the sparklines are drawn once two samples exist
        page.wait_for_function(
            "document.querySelector('[data-testid=spark-lag] polyline')"
            ".getAttribute('points').includes(' ')"
        )
        page.screenshot(path=tmp_path / "dashboard.png", full_page=True)
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000


def test_runs_and_events_are_browsed_by_cursor_never_showing_event_bytes(
    pipeline: LivePipeline, page: Page, tmp_path: Path
) -> None:
    with served_dashboard(tmp_path, *dashboard_args(pipeline)) as base:
        page.goto(f"{base}/runs?project={HUB_PROJECT}")
        runs = {
            run.run_id: run for run in pipeline.hub.runs(HUB_PROJECT, None, 100, gaps_per_run=10)
        }
        for run_id, run in runs.items():
            row = f'[data-run="{run_id}"]'
            assert int(field(page, row, "events")) == run.events
            assert int(field(page, row, "missing")) == run.missing
        page.goto(f"{base}/events?project={HUB_PROJECT}&limit=4")
        seen: list[str] = []
        while True:
            seen += page.locator("[data-event]").evaluate_all(
                "rows => rows.map(r => r.dataset.event)"
            )
            following = page.get_by_test_id("next")
            if following.count() == 0:
                break
            following.click()
        stored = pipeline.hub.events(HUB_PROJECT, None, None, 100)
        assert seen == [f"{e.run_id}/{e.sequence}" for e in stored]
        assert '"step"' not in page.content()  # the record's data is never on the page


def test_actions_run_once_confirmed_and_a_forgery_is_never_replayed(
    pipeline: LivePipeline, page: Page, tmp_path: Path
) -> None:
    client, dead = pipeline.client, keys.dead_stream(HUB_PROJECT)
    letters = {f[b"reason"].decode(): i.decode() for i, f in client.xrange(dead)}
    assert set(letters) == {"unauthenticated", "bad_json"}
    ledger = tmp_path / "effects.db"
    effect = parked_effect(ledger)
    args = dashboard_args(pipeline, "--allow-actions", "--effects-ledger", str(ledger))
    with served_dashboard(tmp_path, *args) as base:
        page.goto(f"{base}/dead?project={HUB_PROJECT}")
        forged = page.locator(f'[data-letter="{letters["unauthenticated"]}"]')
        assert forged.locator('[data-field="replayable"]').inner_text().startswith("not")
        assert forged.get_by_text("replay…").count() == 0
        # a form not made by the confirmation page is refused, and changes nothing
        posted = page.request.post(
            f"{base}/dead/replay",
            form={"project": HUB_PROJECT, "id": letters["bad_json"], "csrf": "0" * 64},
        )
        assert posted.status == 403 and client.xlen(dead) == 2

        before = client.xlen(pipeline.events)
        page.locator(f'[data-letter="{letters["bad_json"]}"]').get_by_text("replay…").click()
        page.screenshot(path=tmp_path / "confirm.png")
        page.get_by_test_id("confirm").click()
        assert page.get_by_test_id("done").inner_text().startswith("replayed 1 dead letter(s)")
        assert [i.decode() for i, _ in client.xrange(dead)] == [letters["unauthenticated"]]
        assert client.xlen(pipeline.events) == before + 1

        # the forgery, read, is purged once confirmed
        page.goto(f"{base}/dead?project={HUB_PROJECT}")
        forged.get_by_text("purge…").click()
        page.get_by_test_id("confirm").click()
        assert page.get_by_test_id("done").inner_text() == "purged 1 dead letter(s) from acme"
        assert client.xlen(dead) == 0
        # a dead consumer is removed once confirmed, its pending entries handed to a live one
        pending = consumers_pending(pipeline)
        page.goto(base + "/")
        page.locator('[data-consumer="ghost"]').get_by_text("remove…").click()
        page.get_by_test_id("confirm").click()
        done = page.get_by_test_id("done").inner_text()
        assert done == "removed consumer ghost from 1 stream(s); 2 pending entries handed to hub-1"

        # a parked effect takes the verdict given on its confirmation page, audited
        page.goto(base + "/")
        page.get_by_test_id("blocked").get_by_text("resolve…").click()
        page.get_by_label("it did not land").check()
        page.get_by_test_id("note").fill("no commit on main")
        page.get_by_test_id("confirm").click()
        done = page.get_by_test_id("done").inner_text()
        assert done.startswith(f"{effect}: resolved not-executed by dashboard ")
    after = consumers_pending(pipeline)
    assert "ghost" not in after and after["hub-1"] == pending["hub-1"] + pending["ghost"]
    with opened_ledger(ledger) as opened:
        detail = review.show_effect(opened, effect)
    assert detail is not None and detail.view is None  # its row dropped: a retry claims it
    [verdict] = [h for h in detail.history if h.note == "no commit on main"]
    assert verdict.actor is not None and verdict.actor.startswith("dashboard ")


def consumers_pending(p: LivePipeline) -> dict[str, int]:
    reply: Any = p.client.xinfo_consumers(p.events, keys.CONSUMER_GROUP)
    return {c["name"].decode(): int(c["pending"]) for c in reply}


def test_without_allow_actions_every_action_is_refused(
    pipeline: LivePipeline, page: Page, tmp_path: Path
) -> None:
    client, dead = pipeline.client, keys.dead_stream(HUB_PROJECT)
    [letter, *_] = [i.decode() for i, _ in client.xrange(dead)]
    with served_dashboard(tmp_path, *dashboard_args(pipeline)) as base:
        page.goto(f"{base}/dead?project={HUB_PROJECT}")
        assert page.get_by_text("replay…").count() == 0 and page.get_by_text("purge…").count() == 0
        for path in (
            f"/dead/replay?project={HUB_PROJECT}&id={letter}",
            f"/dead/purge?project={HUB_PROJECT}&id={letter}",
            "/consumers/remove?name=ghost",
            "/effects/resolve?ledger=0&key=eff_x",
        ):
            reply = page.goto(base + path)
            assert reply is not None and reply.status == 403
            assert "--allow-actions" in page.get_by_test_id("error").inner_text()
        form: dict[str, Any] = {"project": HUB_PROJECT, "id": letter, "csrf": "x"}
        assert page.request.post(f"{base}/dead/purge", form=form).status == 403
        assert page.request.post(f"{base}/consumers/remove", form={"name": "ghost"}).status == 403
    assert client.xlen(dead) == 2
    assert "ghost" in {c["name"].decode() for c in client.xinfo_consumers(pipeline.events, "hub")}


def test_with_a_token_file_every_request_needs_the_bearer_token(
    pipeline: LivePipeline, tmp_path: Path
) -> None:
    token = "t0ken-" + "x" * 20
    (tmp_path / "token").write_text(token + "\n")
    args = ["--redis-url", pipeline.redis_url, "--token-file", str(tmp_path / "token")]
    with served_dashboard(tmp_path, *args, token=token) as base:
        assert http_status(base + "/") == 401
        assert http_status(base + "/", {"Authorization": "Bearer " + "x" * 26}) == 401
        assert http_status(base + "/", {"Authorization": f"Bearer {token}"}) == 200
        # a name rebound to 127.0.0.1 by another site is not answered
        headers = {"Authorization": f"Bearer {token}", "Host": "rebound.example"}
        assert http_status(base + "/", headers) == 400


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--host", "0.0.0.0"], "--token-file"),
        (["--token-file", "short"], "shorter than 16"),
        (["--token-file", "missing"], "cannot read it"),
        (["--amber-after", "10m", "--red-after", "1m"], "--red-after"),
        (["--hub-db", "missing.db"], "--hub-url"),  # a hub store is read, never created
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    said: str,
) -> None:
    (tmp_path / "short").write_text("abc\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "dashboard", *argv)
    assert code == 2 and out == ""
    [line] = error_lines(err)
    assert said in line and "abc" not in line
    assert not (tmp_path / "missing.db").exists()
