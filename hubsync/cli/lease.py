"""``hubsync lease acquire|renew|release|show|list``: fenced leases by hand."""

from __future__ import annotations

import json
from typing import Any

import click

from hubstore.leases import (
    Lease,
    LeaseClient,
    LeaseGranted,
    LeaseInfo,
    LeaseRefusal,
    LeaseRefused,
    LeaseReleased,
    LeaseTransition,
)
from hubsync.cli import exit_codes
from hubsync.cli.options import (
    env_option,
    json_option,
    redis_url_option,
    secret_option_callback,
)
from hubsync.core.connections import RedisTarget, probe
from hubsync.core.redis_values import printable

REFUSAL_EXIT_CODES = {
    LeaseRefusal.HELD: exit_codes.LEASE_HELD,
    LeaseRefusal.SUPERSEDED: exit_codes.LEASE_SUPERSEDED,
    LeaseRefusal.EXPIRED: exit_codes.LEASE_EXPIRED,
    LeaseRefusal.MISSING: exit_codes.LEASE_MISSING,
    LeaseRefusal.NOT_REPLICATED: exit_codes.LEASE_NOT_REPLICATED,
}
DEFAULT_TTL_MS = 30_000

_redis_url = redis_url_option
_json = json_option
_holder = env_option(
    "--holder", required=True, help="Holder id (printable, at most 128 characters, no '{' or '}')."
)
_ttl = env_option(
    "--ttl-ms", type=int, default=DEFAULT_TTL_MS, show_default=True,
    help="Lease TTL in ms (50..86400000), counted on Redis's clock.",
)  # fmt: skip
_token = env_option("--token", type=int, required=True, help="The fencing token acquire returned.")
_PROOF_ON_ARGV = ("the lease proof", "set HUBSYNC_PROOF instead")
_proof = env_option(
    "--proof", required=True, callback=secret_option_callback(*_PROOF_ON_ARGV),
    help="The proof secret acquire returned (prefer the env var: argv is visible to others).",
)  # fmt: skip


def _client(redis: RedisTarget) -> LeaseClient:
    # probe's PING first: a refused password is said as such (exit 1), not taken by the
    # lease client for a Redis that did not answer (exit 3)
    return LeaseClient(probe(redis))


def _emit(as_json: bool, document: dict[str, Any], line: str) -> None:
    click.echo(json.dumps(document, sort_keys=True) if as_json else line)


def _refused(as_json: bool, refused: LeaseRefused) -> None:
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": False,
                    "resource": refused.resource,
                    "refusal": refused.refusal.value,
                    "holder": refused.holder or None,
                    "token": refused.token or None,
                    "remaining_ms": max(0, refused.deadline_ms - refused.redis_now_ms),
                },
                sort_keys=True,
            )
        )
    click.echo(f"refused: {refused.describe()}", err=True)
    raise SystemExit(REFUSAL_EXIT_CODES[refused.refusal])


def _granted_or_refused(as_json: bool, result: LeaseGranted | LeaseRefused) -> None:
    if isinstance(result, LeaseRefused):
        _refused(as_json, result)
    else:
        _granted(as_json, result)


def _granted(as_json: bool, granted: LeaseGranted) -> None:
    lease = granted.lease
    document: dict[str, Any] = {
        "ok": True,
        "transition": granted.transition.value,
        "resource": lease.resource,
        "holder": lease.holder,
        "token": lease.token,
        "deadline_ms": lease.deadline_ms,
        "remaining_ms": granted.remaining_ms,
    }
    line = (
        f"{granted.transition.value} {lease.resource} token={lease.token} "
        f"holder={lease.holder} ttl_ms={granted.remaining_ms}"
    )
    # The proof is printed once, when a grant creates it; a renewal was given it by the
    # holder and never echoes it back to a terminal, a log or a shell history.
    if granted.transition is not LeaseTransition.RENEWED:
        document["proof"] = lease.proof
        line += f" proof={lease.proof}"
    _emit(as_json, document, line)


@click.group(
    epilog="""\b
Exit codes: 0 ok, 2 bad arguments, 3 Redis unreachable,
  10 held, 11 superseded, 12 expired, 13 missing.
Examples:
  hubsync lease acquire repo/main --holder box-a --ttl-ms 30000 --json
  HUBSYNC_PROOF=... hubsync lease renew repo/main --holder box-a --token 7
  HUBSYNC_PROOF=... hubsync lease release repo/main --holder box-a --token 7
  hubsync lease show repo/main --history 10
  hubsync lease list --json
"""
)
def lease() -> None:
    """Fenced leases: tokens only grow, deadlines follow Redis TIME, Redis keeps a proof digest."""


@lease.command()
@click.argument("resource")
@_holder
@_ttl
@env_option(
    "--proof", default=None, callback=secret_option_callback(*_PROOF_ON_ARGV),
    help="Your proof, to renew your own live lease through acquire (same token).",
)  # fmt: skip
@_json
@_redis_url
def acquire(
    resource: str, holder: str, ttl_ms: int, proof: str | None, as_json: bool, redis: RedisTarget
) -> None:
    """Take RESOURCE: prints the token and the proof secret (keep it: renew/release need it)."""
    _granted_or_refused(as_json, _client(redis).acquire(resource, holder, ttl_ms, proof=proof))


@lease.command()
@click.argument("resource")
@_holder
@_token
@_proof
@_ttl
@_json
@_redis_url
def renew(
    resource: str,
    holder: str,
    token: int,
    proof: str,
    ttl_ms: int,
    as_json: bool,
    redis: RedisTarget,
) -> None:
    """Extend your live lease on RESOURCE (same token, new deadline = Redis now + TTL)."""
    _granted_or_refused(
        as_json, _client(redis).renew(Lease(resource, holder, token, proof, 0, ttl_ms))
    )


@lease.command()
@click.argument("resource")
@_holder
@_token
@_proof
@_json
@_redis_url
def release(
    resource: str, holder: str, token: int, proof: str, as_json: bool, redis: RedisTarget
) -> None:
    """Give RESOURCE back; its fence stays, so later tokens are still larger."""
    result = _client(redis).release(Lease(resource, holder, token, proof, 0, DEFAULT_TTL_MS))
    if isinstance(result, LeaseRefused):
        _refused(as_json, result)
        return
    assert isinstance(result, LeaseReleased)
    _emit(
        as_json,
        {"ok": True, "transition": "released", "resource": resource, "token": result.token},
        f"released {resource} token={result.token}",
    )


def _info_line(info: LeaseInfo) -> str:
    if info.holder is None:
        return f"{info.resource}  {info.state.value}  fence={info.fence}"
    return (
        f"{info.resource}  {info.state.value}  holder={info.holder}  token={info.token}  "
        f"remaining_ms={info.remaining_ms}  fence={info.fence}"
    )


@lease.command()
@click.argument("resource")
@env_option(
    "--history", type=click.IntRange(0, 10_000), default=0,
    help="Also show the last N audit-log entries.",
)  # fmt: skip
@_json
@_redis_url
def show(resource: str, history: int, as_json: bool, redis: RedisTarget) -> None:
    """Show the lease on RESOURCE (state on Redis's clock, holder, token, fence)."""
    client = _client(redis)
    info = client.show(resource)
    entries = client.history(resource, history) if history else []
    document = info.as_dict() | ({"history": entries} if history else {})
    lines = [_info_line(info)] + [
        # audit entries are whatever the lease's log stream holds: escaped, never raw
        "  " + " ".join(f"{printable(k)}={printable(v)}" for k, v in entry.items())
        for entry in entries
    ]
    _emit(as_json, document, "\n".join(lines))


@lease.command(name="list")
@_json
@_redis_url
def list_leases(as_json: bool, redis: RedisTarget) -> None:
    """List every lease (SCAN of hubsync:lease:{*}), free ones included for their fence."""
    infos = _client(redis).list()
    _emit(
        as_json,
        {"leases": [info.as_dict() for info in infos]},
        "\n".join(_info_line(info) for info in infos) or "no leases",
    )
