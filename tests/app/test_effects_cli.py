"""``hubsync effects list|show|resolve`` on a real effects ledger: states, history, and the
operator's audited verdict on a blocked_uncertain effect."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from producers.effects import EffectKind, EffectsLedger, EffectSpec, EffectStatus
from producers.effects.history import EffectEvent
from tests.helpers.operator_support import error_lines, run_cli

HOOK = "https://ops:hunter2pass@hooks.example.test/deploy"


def spec(target: str, attempt: str = "a1", run: str = "run-1") -> EffectSpec:
    return EffectSpec(run, "step-1", attempt, EffectKind.WEBHOOK, target, {})


def claim(ledger: EffectsLedger, effect: EffectSpec, token: int) -> str:
    key = ledger.claim(effect, lease_resource="effect:webhook:r", token=token, holder="box-a:9")
    assert isinstance(key, str), key
    return key


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    """A ledger with one blocked, one committed and one in-flight effect."""
    path = tmp_path / "effects.db"
    ledger = EffectsLedger(path)
    parked = claim(ledger, spec(HOOK + "?n=1"), 1)
    ledger.park_blocked(parked, "a1", "TimeoutError: hooks.example.test failed mid-request")
    done = claim(ledger, spec(HOOK + "?n=2", run="run-2"), 2)
    ledger.commit(done, "a1", {"status": 200}, token=2, holder="box-a:9")
    claim(ledger, spec(HOOK + "?n=3"), 3)
    ledger.close()
    return path


def keys(path: Path) -> dict[str, str]:
    """Each effect's key by its state, as the ledger says."""
    ledger = EffectsLedger(path)
    try:
        found = {
            "blocked": ledger.list_blocked()[0].effect_key,
            "committed": next(r for r in ledger.list_run("run-2")).effect_key,
            "live": next(r for r in ledger.list_run("run-1") if r.attempt_state is None).effect_key,
        }
    finally:
        ledger.close()
    return found


def test_list_shows_each_effect_by_state_without_a_targets_credentials(
    capsys: pytest.CaptureFixture[str], ledger_path: Path
) -> None:
    env = {"HUBSYNC_EFFECTS_LEDGER": str(ledger_path)}
    code, out, err = run_cli(capsys, "effects", "list", env=env)
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split()[1] for line in lines] == ["in-flight", "committed", "blocked_uncertain"]
    assert "hunter2pass" not in out and "hooks.example.test/deploy" in out
    assert "token=1" in lines[2] and "run=run-1" in lines[2] and "webhook" in lines[2]
    code, out, _ = run_cli(capsys, "effects", "list", "--state", "blocked_uncertain",
                           "--state", "committed", "--json", env=env)  # fmt: skip
    document = json.loads(out)
    assert code == 0 and {e["state"] for e in document["effects"]} == {
        "blocked_uncertain",
        "committed",
    }
    code, out, _ = run_cli(capsys, "effects", "list", "--run", "run-2", "--json",
                           "--effects-ledger", str(ledger_path))  # fmt: skip
    [only] = json.loads(out)["effects"]
    assert only["run_id"] == "run-2" and only["receipt"] == {"status": 200}
    assert only["fencing_token"] == 2 and only["age_seconds"] >= 0


def test_show_prints_the_receipt_and_the_history(
    capsys: pytest.CaptureFixture[str], ledger_path: Path
) -> None:
    key = keys(ledger_path)["committed"]
    args = ("effects", "show", key, "--effects-ledger", str(ledger_path))
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and 'receipt: {"status": 200}' in out
    assert "claimed  attempt=a1  by=box-a:9  note=under lease token 2" in out
    assert "committed  attempt=a1" in out
    code, out, _ = run_cli(capsys, *args, "--json")
    document = json.loads(out)
    assert [h["event"] for h in document["history"]] == ["claimed", "committed"]
    assert document["state"] == "committed"
    code, _, err = run_cli(capsys, "effects", "show", "eff_nothing", "--effects-ledger",
                           str(ledger_path))  # fmt: skip
    assert code == 1 and error_lines(err) == [
        "error: effect_not_found: eff_nothing is not in this ledger"
    ]


def test_resolve_not_executed_is_audited_and_lets_a_retry_claim_it(
    capsys: pytest.CaptureFixture[str], ledger_path: Path
) -> None:
    key = keys(ledger_path)["blocked"]
    env = {"HUBSYNC_EFFECTS_LEDGER": str(ledger_path), "HUBSYNC_ACTOR": "ops-ann"}
    code, out, err = run_cli(capsys, "effects", "resolve", key, "--not-executed",
                             "--note", "hook log has no delivery", env=env)  # fmt: skip
    assert code == 0, err
    assert (
        out == f"{key}: resolved not-executed by ops-ann; its row dropped; a retry may claim it\n"
    )
    ledger = EffectsLedger(ledger_path)
    try:
        last = ledger.history(key)[-1]
        assert (last.event, last.actor, last.note) == (
            EffectEvent.RESOLVED_NOT_EXECUTED,
            "ops-ann",
            "hook log has no delivery",
        )
        assert ledger.claim(spec(HOOK + "?n=1", attempt="a2"), lease_resource="effect:webhook:r",
                            token=4, holder="box-b:1") == key  # fmt: skip
    finally:
        ledger.close()
    code, out, _ = run_cli(capsys, "effects", "show", key, env=env)
    assert "resolved-not-executed  attempt=a1  by=ops-ann  note=hook log has no delivery" in out


def test_resolve_committed_marks_it_committed(
    capsys: pytest.CaptureFixture[str], ledger_path: Path
) -> None:
    key = keys(ledger_path)["blocked"]
    code, out, err = run_cli(capsys, "effects", "resolve", key, "--committed", "--note",
                             "delivered per the hook's log", "--effects-ledger",
                             str(ledger_path), "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["verdict"] == "committed"
    ledger = EffectsLedger(ledger_path)
    try:
        record = ledger.get(key)
        assert record is not None and record.status is EffectStatus.COMMITTED
        assert record.receipt is not None
        assert record.receipt["note"] == "delivered per the hook's log"
    finally:
        ledger.close()


@pytest.mark.parametrize("which", ["committed", "live"])
def test_resolve_refuses_any_other_state_in_one_line_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], ledger_path: Path, which: str
) -> None:
    key = keys(ledger_path)[which]
    before = ledger_path.read_bytes()
    code, out, err = run_cli(capsys, "effects", "resolve", key, "--not-executed", "--note", "x",
                             "--effects-ledger", str(ledger_path))  # fmt: skip
    state = "committed" if which == "committed" else "in-flight"
    assert code == 2 and out == ""
    assert error_lines(err) == [
        f"error: effect_not_blocked: {key} is {state}; only a blocked_uncertain effect takes "
        "a verdict"
    ]
    assert ledger_path.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--note", "x"], "--committed: give exactly one of --committed and --not-executed"),
        (["--committed", "--not-executed", "--note", "x"], "give exactly one"),
        (["--committed"], "--note: missing"),
        (["--committed", "--note", "  "], "the note must be 1..500 printable characters"),
        (["--committed", "--note", "x\x1b[2J"], "printable"),
    ],
)
def test_resolve_refuses_bad_arguments_in_one_line(
    capsys: pytest.CaptureFixture[str], ledger_path: Path, args: list[str], message: str
) -> None:
    key = keys(ledger_path)["blocked"]
    code, _, err = run_cli(capsys, "effects", "resolve", key, *args, "--effects-ledger",
                           str(ledger_path))  # fmt: skip
    assert code == 2 and len(error_lines(err)) == 1 and message in err
    assert keys(ledger_path)["blocked"] == key


def test_a_missing_ledger_is_refused_and_not_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nope.db"
    code, _, err = run_cli(capsys, "effects", "list", "--effects-ledger", str(missing))
    assert code == 2 and "--effects-ledger" in err and "no such file" in err
    assert not missing.exists()
    code, _, err = run_cli(capsys, "effects", "list")
    assert code == 2 and "--effects-ledger: missing" in err and "HUBSYNC_EFFECTS_LEDGER" in err
