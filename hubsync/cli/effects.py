"""``hubsync effects list|show|resolve``: the operator's view of a runtime's effects ledger."""

from __future__ import annotations

import getpass
import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from hubsync.cli.options import count_option, env_option, json_option, options_from
from hubsync.core.errors import ConfigError
from hubsync.core.redis_values import printable
from hubsync.core.settings import EffectsLedgerSettings
from producers.effects import EffectRefusalCode, EffectRefused, EffectsLedger, review
from producers.effects.errors import EffectRefusedError, VerdictRefusedError

_ledger_option = options_from(EffectsLedgerSettings)


@contextmanager
def opened_ledger(path: Path) -> Iterator[EffectsLedger]:
    """The existing ledger at ``path`` (a missing one is a usage error, never created)."""
    if not path.is_file():
        raise ConfigError(
            f"--effects-ledger: {path} is no effects ledger (no such file); give the file the "
            "runtime's effect jobs use (HUBSYNC_EFFECTS_LEDGER)"
        )
    ledger = EffectsLedger(path)
    try:
        yield ledger
    finally:
        ledger.close()


def default_actor() -> str:
    """``USER@HOST`` of this process: who gives a verdict, unless told (``--actor``)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"[:128]


def _line(view: review.EffectView) -> str:
    shown = view.as_dict()
    token = shown["fencing_token"] if shown["fencing_token"] is not None else "-"
    return printable(
        f"{shown['effect_key']}  {shown['state']}  {shown['kind']}  run={shown['run_id']}  "
        f"token={token}  age={view.age_seconds:.1f}s  target={shown['target']}"
    )


def _detail_lines(detail: review.EffectDetail) -> Iterator[str]:
    document = detail.as_dict()
    if detail.view is None:
        yield f"{detail.effect_key}  no ledger row (a retry may claim it)"
    else:
        yield _line(detail.view)
        for name in ("step_id", "attempt_id", "lease_resource", "claimed_at",
                     "last_heartbeat_at", "committed_at", "blocked_reason"):  # fmt: skip
            if document[name] is not None:
                yield printable(f"  {name}: {document[name]}")
        yield printable(f"  receipt: {json.dumps(document['receipt'], sort_keys=True)}")
    yield "history:" if detail.history else "history: none"
    for entry in detail.history:
        parts = [entry.at, entry.event.value, f"attempt={entry.attempt_id or '-'}"]
        parts += [f"by={entry.actor}"] if entry.actor else []
        parts += [f"note={entry.note}"] if entry.note else []
        yield "  " + printable("  ".join(parts))


@click.group(
    epilog="""\b
Exit codes: 0 ok, 1 failure (an effect key that is not in the ledger), 2 bad
  arguments, a missing ledger, or a verdict on an effect that is not
  blocked_uncertain (nothing changed).
Examples:
  hubsync effects list --effects-ledger /var/lib/hubsync/effects.db --state blocked_uncertain
  hubsync effects list --run run-2026-0001 --json
  hubsync effects show eff_0123456789abcdef0123456789abcdef
  hubsync effects resolve eff_0123... --not-executed --note "no PR on the forge; retry"
"""
)
def effects() -> None:
    """A runtime's shared effects: list them by state, show one, give the verdict on one
    parked blocked_uncertain."""


@effects.command(name="list")
@_ledger_option
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([s.value for s in review.EffectState]),
    help="Only effects in this state (repeatable) [default: every state] "
    "(no environment variable).",
)
@click.option("--run", "run_id", help="Only this run's effects (no environment variable).")
@count_option("effects, newest claim first")
@json_option
def list_command(
    effects_ledger: Path, states: tuple[str, ...], run_id: str | None, count: int, as_json: bool
) -> None:
    """List effects, newest claim first: key, state, kind, run, lease token, age, target
    (credentials replaced).

    States: in-flight (its attempt heartbeats), stale (its attempt stopped: the
    next claim takes it over), blocked_uncertain (it may have landed: nothing
    retries it until resolved), committed. A failed attempt leaves no row (show
    KEY has its history).
    """
    chosen = tuple(review.EffectState(s) for s in states)
    with opened_ledger(effects_ledger) as ledger:
        found = review.list_effects(ledger, states=chosen, run_id=run_id, limit=count)
    if as_json:
        click.echo(json.dumps({"effects": [v.as_dict() for v in found]}, sort_keys=True))
        return
    for view in found:
        click.echo(_line(view))
    if not found:
        click.echo("no effects")


@effects.command()
@click.argument("key")
@_ledger_option
@json_option
def show(key: str, effects_ledger: Path, as_json: bool) -> None:
    """Show effect KEY: its row, receipt and history (claims, commits, parking, verdicts)."""
    with opened_ledger(effects_ledger) as ledger:
        detail = review.show_effect(ledger, key)
    if detail is None:
        raise EffectRefusedError(
            EffectRefusalCode.NOT_FOUND.value,
            f"effect_not_found: {printable(key)} is not in this ledger",
        )
    if as_json:
        click.echo(json.dumps(detail.as_dict(), sort_keys=True))
        return
    for line in _detail_lines(detail):
        click.echo(line)


@effects.command()
@click.argument("key")
@click.option("--committed", is_flag=True,
              help="It landed: mark it committed (no environment variable).")  # fmt: skip
@click.option(
    "--not-executed",
    is_flag=True,
    help="It did not land: drop its row, so a retry claims it afresh (no environment variable).",
)
@click.option("--note", required=True,
              help="Why: what you checked (kept in the history; no environment variable).")  # fmt: skip
@env_option(
    "--actor",
    default=default_actor,
    show_default="USER@HOST",
    help="Who gives the verdict, kept in the history.",
)
@_ledger_option
@json_option
def resolve(
    key: str,
    committed: bool,
    not_executed: bool,
    note: str,
    actor: str,
    effects_ledger: Path,
    as_json: bool,
) -> None:
    """Give the verdict on effect KEY, parked blocked_uncertain: --committed or --not-executed.

    Audited: who, when and the note go into the effect's history. Any other
    state is refused with one line (exit 2) and nothing changes.
    """
    if committed == not_executed:
        raise click.UsageError("--committed: give exactly one of --committed and --not-executed")
    verdict = review.Verdict.COMMITTED if committed else review.Verdict.NOT_EXECUTED
    with opened_ledger(effects_ledger) as ledger:
        done = review.resolve_effect(ledger, key, verdict, note=note, actor=actor)
    if isinstance(done, EffectRefused):
        if done.code is EffectRefusalCode.NOT_FOUND:
            raise EffectRefusedError(done.code.value, printable(done.message))  # exit 1
        raise VerdictRefusedError(done.code.value, printable(done.message))  # exit 2
    document: dict[str, Any] = {"effect_key": key, "verdict": verdict.value, "actor": actor}
    if as_json:
        click.echo(json.dumps(document, sort_keys=True))
        return
    after = "committed" if committed else "its row dropped; a retry may claim it"
    click.echo(printable(f"{key}: resolved {verdict.value} by {actor}; {after}"))
