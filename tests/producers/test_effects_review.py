"""The operator's view of the effects ledger: states, history, the audited verdict on a
blocked_uncertain effect, and the ledger's upgrade to the version with a history."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from hubsync.core.clock import utc_now
from hubsync.core.sqlite import backup_path
from producers.effects import (
    EffectKind,
    EffectRefusalCode,
    EffectRefused,
    EffectResolved,
    EffectsLedger,
    EffectSpec,
    EffectState,
    EffectStatus,
    Verdict,
    list_effects,
    resolve_effect,
    show_effect,
)
from producers.effects import ledger as ledger_module
from producers.effects.errors import InvalidEffectError
from producers.effects.history import EffectEvent
from tests.helpers.sqlite_files import columns_of, index_columns, read_only, version_of

HOOK = "https://deploy:hunter2-secret@hooks.example.test/deploy?token=abcdef123456"


def spec(target: str = HOOK, attempt: str = "a1", run: str = "run-1") -> EffectSpec:
    return EffectSpec(run, "step-1", attempt, EffectKind.WEBHOOK, target, {"n": 1})


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[EffectsLedger]:
    led = EffectsLedger(tmp_path / "effects.db")
    yield led
    led.close()


def claim(ledger: EffectsLedger, effect: EffectSpec, token: int = 1) -> str:
    key = ledger.claim(effect, lease_resource="effect:webhook:r", token=token, holder="box-a:1")
    assert isinstance(key, str), key
    return key


def blocked(ledger: EffectsLedger, target: str = HOOK) -> str:
    key = claim(ledger, spec(target))
    assert ledger.park_blocked(key, "a1", "TimeoutError mid-request") is not None
    return key


def test_each_row_is_listed_under_its_state(tmp_path: Path) -> None:
    ledger = EffectsLedger(tmp_path / "e.db", stale_after=60)
    live = claim(ledger, spec(HOOK + "&live"))
    parked = blocked(ledger, HOOK + "&parked")
    done = claim(ledger, spec(HOOK + "&done"), token=3)
    ledger.commit(done, "a1", {"status": 200}, token=3, holder="box-a:1")
    later = utc_now() + timedelta(seconds=61)
    states = {v.record.effect_key: v.state for v in list_effects(ledger, now=later)}
    assert states == {
        live: EffectState.STALE,
        parked: EffectState.BLOCKED_UNCERTAIN,
        done: EffectState.COMMITTED,
    }
    assert [v.record.effect_key for v in list_effects(ledger)] == [done, parked, live]
    in_flight = list_effects(ledger, states=(EffectState.IN_FLIGHT,))
    assert [v.record.effect_key for v in in_flight] == [live]
    assert list_effects(ledger, states=(EffectState.IN_FLIGHT,), now=later) == []
    either = list_effects(ledger, states=(EffectState.COMMITTED, EffectState.BLOCKED_UNCERTAIN))
    assert {v.record.effect_key for v in either} == {done, parked}
    ledger.close()


def test_a_listing_filters_by_run_and_shows_no_credential_of_a_target(
    ledger: EffectsLedger,
) -> None:
    mine = claim(ledger, spec(run="run-1"))
    claim(ledger, spec(run="run-2"))
    (view,) = list_effects(ledger, run_id="run-1")
    shown = view.as_dict()
    assert shown["effect_key"] == mine and shown["run_id"] == "run-1"
    assert shown["fencing_token"] == 1 and shown["state"] == "in-flight"
    assert "hunter2" not in str(shown) and "abcdef123456" not in str(shown)
    assert "hooks.example.test/deploy" in shown["target"]


def test_every_transition_is_in_the_history_and_outlives_a_dropped_row(
    ledger: EffectsLedger,
) -> None:
    key = claim(ledger, spec())
    assert ledger.abandon(key, "a1", "nothing executed: webhook answered 503")
    assert ledger.get(key) is None
    key = claim(ledger, spec(attempt="a2"), token=2)
    ledger.commit(key, "a2", {"status": 200}, token=2, holder="box-a:1")
    detail = show_effect(ledger, key)
    assert detail is not None and detail.view is not None
    assert detail.view.state is EffectState.COMMITTED
    assert detail.view.record.receipt == {"status": 200}
    events = [(h.event, h.attempt_id) for h in detail.history]
    assert events == [
        (EffectEvent.CLAIMED, "a1"),
        (EffectEvent.DROPPED, "a1"),
        (EffectEvent.CLAIMED, "a2"),
        (EffectEvent.COMMITTED, "a2"),
    ]
    assert "503" in str(detail.history[1].note)
    assert detail.history[2].note == "under lease token 2"
    assert show_effect(ledger, "eff_unknown") is None


def test_a_committed_verdict_is_audited_and_nothing_claims_the_effect_again(
    ledger: EffectsLedger,
) -> None:
    key = blocked(ledger)
    done = resolve_effect(
        ledger, key, Verdict.COMMITTED, note="the hook's log shows it ran", actor="ops-ann"
    )
    assert isinstance(done, EffectResolved) and done.record is not None
    assert done.record.status is EffectStatus.COMMITTED and done.record.attempt_state is None
    assert done.record.receipt == {"note": "the hook's log shows it ran", "resolved_by": "ops-ann"}
    last = ledger.history(key)[-1]
    assert (last.event, last.actor, last.note) == (
        EffectEvent.RESOLVED_COMMITTED,
        "ops-ann",
        "the hook's log shows it ran",
    )
    again = ledger.claim(spec(attempt="a9"), lease_resource="effect:webhook:r", token=5, holder="x")
    assert isinstance(again, EffectRefused)
    assert again.code is EffectRefusalCode.ALREADY_COMMITTED


def test_a_not_executed_verdict_lets_a_retry_claim_the_effect(ledger: EffectsLedger) -> None:
    key = blocked(ledger)
    refused = ledger.claim(spec(attempt="a2"), lease_resource="effect:webhook:r", token=2,
                           holder="box-b:2")  # fmt: skip
    assert isinstance(refused, EffectRefused)
    assert refused.code is EffectRefusalCode.BLOCKED_UNCERTAIN
    done = resolve_effect(ledger, key, Verdict.NOT_EXECUTED, note="no delivery", actor="ops")
    assert isinstance(done, EffectResolved) and done.record is None
    assert ledger.get(key) is None
    assert claim(ledger, spec(attempt="a2"), token=2) == key
    events = [h.event for h in ledger.history(key)]
    assert events[-2:] == [EffectEvent.RESOLVED_NOT_EXECUTED, EffectEvent.CLAIMED]


def test_a_verdict_on_any_other_state_is_refused_and_changes_nothing(
    ledger: EffectsLedger,
) -> None:
    key = claim(ledger, spec())
    before = (ledger.get(key), ledger.history(key))
    for verdict in Verdict:
        refused = resolve_effect(ledger, key, verdict, note="sure", actor="ops")
        assert isinstance(refused, EffectRefused)
        assert refused.code is EffectRefusalCode.NOT_BLOCKED and "in-flight" in refused.message
    assert (ledger.get(key), ledger.history(key)) == before
    missing = resolve_effect(ledger, "eff_none", Verdict.COMMITTED, note="x", actor="ops")
    assert isinstance(missing, EffectRefused) and missing.code is EffectRefusalCode.NOT_FOUND


@pytest.mark.parametrize(("note", "actor"), [("", "ops"), ("  ", "ops"), ("a\x1bb", "ops"),
                                             ("x" * 501, "ops"), ("ok", ""), ("ok", "o\np")])  # fmt: skip
def test_a_verdict_needs_a_printable_note_and_actor(
    ledger: EffectsLedger, note: str, actor: str
) -> None:
    key = blocked(ledger)
    with pytest.raises(InvalidEffectError, match="printable"):
        resolve_effect(ledger, key, Verdict.COMMITTED, note=note, actor=actor)
    assert show_effect(ledger, key).view.state is EffectState.BLOCKED_UNCERTAIN  # type: ignore[union-attr]


# The ledger's schema as shipped at version 2 (before effect_history). Never edit.
LEDGER_SCHEMA_V2 = """
CREATE TABLE external_effects (
    effect_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, step_id TEXT NOT NULL,
    attempt_id TEXT NOT NULL, action_kind TEXT NOT NULL, target_ref TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('in-flight', 'committed')),
    attempt_state TEXT CHECK (attempt_state IS NULL OR attempt_state = 'blocked_uncertain'),
    payload_hash TEXT NOT NULL, receipt TEXT, claimed_at TEXT NOT NULL,
    last_heartbeat_at TEXT NOT NULL, committed_at TEXT, blocked_reason TEXT,
    lease_resource TEXT, fencing_token INTEGER
) STRICT;
CREATE INDEX external_effects_run ON external_effects (run_id);
CREATE INDEX external_effects_status ON external_effects (status, committed_at);
CREATE TABLE resource_fences (
    resource TEXT PRIMARY KEY, highest_token INTEGER NOT NULL CHECK (highest_token >= 1),
    holder TEXT, updated_at TEXT NOT NULL
) STRICT;
"""


def test_a_ledger_of_version_2_gains_the_history_and_keeps_its_parked_effect(
    tmp_path: Path,
) -> None:
    path = tmp_path / "effects.db"
    conn = sqlite3.connect(path)
    conn.executescript(LEDGER_SCHEMA_V2)
    conn.execute(
        "INSERT INTO external_effects VALUES ('eff_old', 'run-1', 'step-1', 'a1', 'webhook', "
        "'https://h.example/x', 'in-flight', 'blocked_uncertain', 'h', NULL, "
        "'2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', NULL, 'timeout', "
        "'effect:webhook:r', 4)"
    )
    conn.execute(
        "INSERT INTO resource_fences VALUES ('effect:webhook:r', 4, 'box-a:1', '2026-01-01Z')"
    )
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    upgraded = EffectsLedger(path)
    try:
        assert upgraded.db.schema_version() == ledger_module.SCHEMA_VERSION == 3
        (view,) = list_effects(upgraded, states=(EffectState.BLOCKED_UNCERTAIN,))
        assert view.record.effect_key == "eff_old" and upgraded.history("eff_old") == []
        done = resolve_effect(upgraded, "eff_old", Verdict.NOT_EXECUTED, note="n", actor="ops")
        assert isinstance(done, EffectResolved)
        assert [h.event for h in upgraded.history("eff_old")] == [EffectEvent.RESOLVED_NOT_EXECUTED]
        late = upgraded.claim(spec(), lease_resource="effect:webhook:r", token=3, holder="b")
        assert isinstance(late, EffectRefused) and late.code is EffectRefusalCode.LEASE_SUPERSEDED
    finally:
        upgraded.close()
    assert version_of(backup_path(path, 2)) == 2
    EffectsLedger(tmp_path / "fresh.db").close()
    with read_only(path) as migrated, read_only(tmp_path / "fresh.db") as fresh:
        assert columns_of(migrated, "effect_history") == columns_of(fresh, "effect_history")
        assert index_columns(migrated, "effect_history_key") == ["effect_key", "id"]


def test_purging_committed_effects_drops_their_history_but_not_an_in_flight_ones(
    ledger: EffectsLedger,
) -> None:
    done = claim(ledger, spec(HOOK + "&a"))
    ledger.commit(done, "a1", {}, token=1, holder="box-a:1")
    live = claim(ledger, spec(HOOK + "&b"), token=2)
    assert ledger.purge_committed(older_than=-1) == 1
    assert ledger.history(done) == [] and len(ledger.history(live)) == 1
